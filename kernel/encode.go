package kernel

import (
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Hand-written canonical CBOR encoders for the records the loop writes on
// every step (event, step, intent, workflow context) and on every receipt
// (the receipt record and the envelope delivered to the origin cell). The reflection-based
// encoder took ~11 % of the loop's CPU; these produce the same bytes —
// TestRecordEncodersMatchMarshal checks them against schemas.Marshal on
// random records — with one allocation.
//
// Map keys are written in core deterministic order: shorter keys first, then
// bytewise. The `omitempty` fields are left out exactly when the reflection
// encoder leaves them out (empty string, empty slice, nil pointer); nil byte
// slices and nil slices that are not omitempty encode as null, as the
// library's default NilContainers option does.

const (
	majUint  = 0
	majBytes = 2
	majArray = 4
	majMap   = 5
	cborNull = 0xf6
)

// Direct functions, not func-typed variables, so the compiler can inline
// them.
func appendHead(b []byte, major byte, n uint64) []byte { return schemas.AppendHead(b, major, n) }
func appendText(b []byte, s string) []byte             { return schemas.AppendText(b, s) }

// appendBytes encodes a byte slice that is not omitempty: nil is null.
func appendBytes(b, v []byte) []byte { return schemas.AppendByteString(b, v) }

func appendHash(b []byte, h *schemas.Hash) []byte {
	return append(append(b, majBytes<<5|24, 32), h[:]...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xf5)
	}
	return append(b, 0xf4)
}

func mapSize(n int, present ...bool) uint64 {
	for _, p := range present {
		if p {
			n++
		}
	}
	return uint64(n)
}

// Key order: height, now_ns, entropy, logical_ns, manifest_hash.
func appendStamp(b []byte, s *Stamp) []byte {
	b = appendHead(b, majMap, 5)
	b = appendHead(appendText(b, "height"), majUint, s.Height)
	b = appendHead(appendText(b, "now_ns"), majUint, s.NowNs)
	b = appendBytes(appendText(b, "entropy"), s.Entropy)
	b = appendHead(appendText(b, "logical_ns"), majUint, s.LogicalNs)
	return appendHash(appendText(b, "manifest_hash"), &s.ManifestHash)
}

// Key order: key?, workflow.
func appendTarget(b []byte, t *TargetRec) []byte {
	b = appendHead(b, majMap, mapSize(1, len(t.Key) > 0))
	if len(t.Key) > 0 {
		b = appendBytes(appendText(b, "key"), t.Key)
	}
	return appendText(appendText(b, "workflow"), t.Workflow)
}

// Key order: key?, step, depth, workflow.
func appendOrigin(b []byte, o *OriginRec) []byte {
	b = appendHead(b, majMap, mapSize(3, len(o.Key) > 0))
	if len(o.Key) > 0 {
		b = appendBytes(appendText(b, "key"), o.Key)
	}
	b = appendHead(appendText(b, "step"), majUint, o.Step)
	b = appendHead(appendText(b, "depth"), majUint, o.Depth)
	return appendText(appendText(b, "workflow"), o.Workflow)
}

// encodeEvent is schemas.MustMarshal(rec). Key order: stamp, value, origin?,
// schema, targets, idempotency_key?.
func encodeEvent(rec *EventRec) []byte {
	b := make([]byte, 0, 160+len(rec.Value)+len(rec.Schema)+48*len(rec.Targets)+len(rec.IdempotencyKey))
	b = appendHead(b, majMap, mapSize(4, rec.Origin != nil, rec.IdempotencyKey != ""))
	b = appendStamp(appendText(b, "stamp"), &rec.Stamp)
	b = appendBytes(appendText(b, "value"), rec.Value)
	if rec.Origin != nil {
		b = appendOrigin(appendText(b, "origin"), rec.Origin)
	}
	b = appendText(appendText(b, "schema"), rec.Schema)
	b = appendText(b, "targets")
	if rec.Targets == nil {
		b = append(b, cborNull)
	} else {
		b = appendHead(b, majArray, uint64(len(rec.Targets)))
		for i := range rec.Targets {
			b = appendTarget(b, &rec.Targets[i])
		}
	}
	if rec.IdempotencyKey != "" {
		b = appendText(appendText(b, "idempotency_key"), rec.IdempotencyKey)
	}
	return b
}

// encodeStep is schemas.MustMarshal(rec). Key order: key?, input,
// emitted?, intents?, workflow, state_hash, workflow_hash.
func encodeStep(rec *StepRec) []byte {
	b := make([]byte, 0, 150+len(rec.Workflow)+len(rec.Key)+9*len(rec.Emitted)+34*len(rec.Intents))
	b = appendHead(b, majMap, mapSize(4, len(rec.Key) > 0, len(rec.Emitted) > 0, len(rec.Intents) > 0))
	if len(rec.Key) > 0 {
		b = appendBytes(appendText(b, "key"), rec.Key)
	}
	b = appendHead(appendText(b, "input"), majUint, rec.Input)
	if len(rec.Emitted) > 0 {
		b = appendHead(appendText(b, "emitted"), majArray, uint64(len(rec.Emitted)))
		for _, e := range rec.Emitted {
			b = appendHead(b, majUint, e)
		}
	}
	if len(rec.Intents) > 0 {
		b = appendHead(appendText(b, "intents"), majArray, uint64(len(rec.Intents)))
		for i := range rec.Intents {
			b = appendHash(b, &rec.Intents[i])
		}
	}
	b = appendText(appendText(b, "workflow"), rec.Workflow)
	b = appendText(b, "state_hash")
	if rec.StateHash == nil {
		b = append(b, cborNull)
	} else {
		b = appendHash(b, rec.StateHash)
	}
	return appendHash(appendText(b, "workflow_hash"), &rec.WorkflowHash)
}

// encodeIntentID is schemas.MustMarshal(id), and with a hash,
// schemas.MustMarshal(&IntentRec{hash, *id}) (the embedded struct's fields
// are flattened into one map). Key order: hash?, index, effect, params,
// emitted_at, issuer_ref?, origin_key, effect_hash, idempotency_key,
// origin_workflow, origin_workflow_hash.
func encodeIntentID(hash *schemas.Hash, id *IntentID) []byte {
	b := make([]byte, 0, 330+len(id.Params)+len(id.OriginKey)+len(id.IdempotencyKey)+len(id.IssuerRef)+len(id.OriginWorkflow)+len(id.Effect))
	b = appendHead(b, majMap, mapSize(9, hash != nil, id.IssuerRef != ""))
	if hash != nil {
		b = appendHash(appendText(b, "hash"), hash)
	}
	b = appendHead(appendText(b, "index"), majUint, id.Index)
	b = appendText(appendText(b, "effect"), id.Effect)
	b = appendBytes(appendText(b, "params"), id.Params)
	b = appendHead(appendText(b, "emitted_at"), majUint, id.EmittedAt)
	if id.IssuerRef != "" {
		b = appendText(appendText(b, "issuer_ref"), id.IssuerRef)
	}
	b = appendBytes(appendText(b, "origin_key"), id.OriginKey)
	b = appendHash(appendText(b, "effect_hash"), &id.EffectHash)
	b = appendBytes(appendText(b, "idempotency_key"), id.IdempotencyKey)
	b = appendText(appendText(b, "origin_workflow"), id.OriginWorkflow)
	return appendHash(appendText(b, "origin_workflow_hash"), &id.OriginWorkflowHash)
}

// encodeContext is schemas.MustMarshal(c). Key order: key?, now_ns,
// entropy, workflow, cell_mode, event_hash, manifest_hash, workflow_hash,
// journal_height, logical_now_ns.
func encodeContext(c *workflowContext) []byte {
	b := make([]byte, 0, 400+len(c.Key)+len(c.Workflow))
	b = appendHead(b, majMap, mapSize(9, len(c.Key) > 0))
	if len(c.Key) > 0 {
		b = appendBytes(appendText(b, "key"), c.Key)
	}
	b = appendHead(appendText(b, "now_ns"), majUint, c.NowNs)
	b = appendBytes(appendText(b, "entropy"), c.Entropy)
	b = appendText(appendText(b, "workflow"), c.Workflow)
	b = appendBool(appendText(b, "cell_mode"), c.CellMode)
	b = appendText(appendText(b, "event_hash"), c.EventHash)
	b = appendText(appendText(b, "manifest_hash"), c.ManifestHash)
	b = appendText(appendText(b, "workflow_hash"), c.WorkflowHash)
	b = appendHead(appendText(b, "journal_height"), majUint, c.JournalHeight)
	return appendHead(appendText(b, "logical_now_ns"), majUint, c.LogicalNowNs)
}

// appendSignedReceipt is schemas.MustMarshal(sr): the receipt body's fields
// and key_id, signature in one map. Key order: effect, key_id, status,
// attempt, payload, executor, signature, issuer_ref?, intent_hash.
func appendSignedReceipt(b []byte, sr *receipts.SignedReceipt) []byte {
	b = appendHead(b, majMap, mapSize(8, sr.IssuerRef != ""))
	b = appendText(appendText(b, "effect"), sr.Effect)
	b = appendText(appendText(b, "key_id"), sr.KeyID)
	b = appendText(appendText(b, "status"), string(sr.Status))
	b = appendHead(appendText(b, "attempt"), majUint, sr.Attempt)
	b = appendBytes(appendText(b, "payload"), sr.Payload)
	b = appendText(appendText(b, "executor"), sr.Executor)
	b = appendBytes(appendText(b, "signature"), sr.Signature)
	if sr.IssuerRef != "" {
		b = appendText(appendText(b, "issuer_ref"), sr.IssuerRef)
	}
	return appendHash(appendText(b, "intent_hash"), &sr.Intent)
}

func signedReceiptSize(sr *receipts.SignedReceipt) int {
	return 120 + len(sr.Effect) + len(sr.KeyID) + len(sr.Status) + len(sr.Payload) + len(sr.Executor) + len(sr.Signature) + len(sr.IssuerRef)
}

// encodeReceipt is schemas.MustMarshal(rec). Key order: stamp, receipt,
// rejected?.
func encodeReceipt(rec *ReceiptRec) []byte {
	b := make([]byte, 0, 140+signedReceiptSize(&rec.Receipt)+len(rec.Rejected)+len(rec.Stamp.Entropy))
	b = appendHead(b, majMap, mapSize(2, rec.Rejected != ""))
	b = appendStamp(appendText(b, "stamp"), &rec.Stamp)
	b = appendSignedReceipt(appendText(b, "receipt"), &rec.Receipt)
	if rec.Rejected != "" {
		b = appendText(appendText(b, "rejected"), rec.Rejected)
	}
	return b
}

// encodeEnvelope is schemas.MustMarshal(e). Key order: effect, status,
// payload, executor, signature, issuer_ref?, origin_key?, intent_hash,
// emitted_at_seq, origin_workflow, origin_workflow_hash.
func encodeEnvelope(e *receiptEnvelope) []byte {
	b := make([]byte, 0, 200+len(e.Effect)+len(e.Status)+len(e.Payload)+len(e.Executor)+len(e.Signature)+
		len(e.IssuerRef)+len(e.OriginKey)+len(e.IntentHash)+len(e.OriginWorkflow)+len(e.OriginWorkflowHash))
	b = appendHead(b, majMap, mapSize(9, e.IssuerRef != "", len(e.OriginKey) > 0))
	b = appendText(appendText(b, "effect"), e.Effect)
	b = appendText(appendText(b, "status"), e.Status)
	b = appendBytes(appendText(b, "payload"), e.Payload)
	b = appendText(appendText(b, "executor"), e.Executor)
	b = appendBytes(appendText(b, "signature"), e.Signature)
	if e.IssuerRef != "" {
		b = appendText(appendText(b, "issuer_ref"), e.IssuerRef)
	}
	if len(e.OriginKey) > 0 {
		b = appendBytes(appendText(b, "origin_key"), e.OriginKey)
	}
	b = appendText(appendText(b, "intent_hash"), e.IntentHash)
	b = appendHead(appendText(b, "emitted_at_seq"), majUint, e.EmittedAtSeq)
	b = appendText(appendText(b, "origin_workflow"), e.OriginWorkflow)
	return appendText(appendText(b, "origin_workflow_hash"), e.OriginWorkflowHash)
}
