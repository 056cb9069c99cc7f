package records

import (
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Hand-written canonical CBOR encoders for the records the loop writes on
// every step (event, step, intent) and on every receipt. The
// reflection-based encoder took ~11 % of the loop's CPU; these produce the
// same bytes — TestRecordEncodersMatchMarshal checks them against
// schemas.Marshal on random records — with one allocation. The kernel's own
// values that are not journaled (the workflow context, the receipt envelope
// delivered to the origin cell) are encoded in kernel/encode.go with the
// helpers exported here.
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

// appendHash appends h as a 32-byte CBOR byte string.
func appendHash(b []byte, h *schemas.Hash) []byte {
	return append(append(b, majBytes<<5|24, 32), h[:]...)
}

// MapSize is the size of a map with n fields always present and one more
// for each optional field that is.
func MapSize(n int, present ...bool) uint64 {
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
	b = appendHead(b, majMap, MapSize(1, len(t.Key) > 0))
	if len(t.Key) > 0 {
		b = appendBytes(appendText(b, "key"), t.Key)
	}
	return appendText(appendText(b, "workflow"), t.Workflow)
}

// Key order: key?, step, depth, workflow.
func appendOrigin(b []byte, o *OriginRec) []byte {
	b = appendHead(b, majMap, MapSize(3, len(o.Key) > 0))
	if len(o.Key) > 0 {
		b = appendBytes(appendText(b, "key"), o.Key)
	}
	b = appendHead(appendText(b, "step"), majUint, o.Step)
	b = appendHead(appendText(b, "depth"), majUint, o.Depth)
	return appendText(appendText(b, "workflow"), o.Workflow)
}

// EncodeEvent is schemas.MustMarshal(rec). Key order: stamp, value, origin?,
// schema, targets, idempotency_key?.
func EncodeEvent(rec *EventRec) []byte {
	b := make([]byte, 0, 160+len(rec.Value)+len(rec.Schema)+48*len(rec.Targets)+len(rec.IdempotencyKey))
	b = appendHead(b, majMap, MapSize(4, rec.Origin != nil, rec.IdempotencyKey != ""))
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

// EncodeStep is schemas.MustMarshal(rec). Key order: key?, input,
// emitted?, intents?, workflow, state_hash, workflow_hash.
func EncodeStep(rec *StepRec) []byte {
	b := make([]byte, 0, 150+len(rec.Workflow)+len(rec.Key)+9*len(rec.Emitted)+34*len(rec.Intents))
	b = appendHead(b, majMap, MapSize(4, len(rec.Key) > 0, len(rec.Emitted) > 0, len(rec.Intents) > 0))
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

// EncodeIntentID is schemas.MustMarshal(id), and with a hash,
// schemas.MustMarshal(&IntentRec{hash, *id}) (the embedded struct's fields
// are flattened into one map). Key order: hash?, index, effect, params,
// emitted_at, issuer_ref?, origin_key, effect_hash, idempotency_key,
// origin_workflow, origin_workflow_hash.
func EncodeIntentID(hash *schemas.Hash, id *IntentID) []byte {
	b := make([]byte, 0, 330+len(id.Params)+len(id.OriginKey)+len(id.IdempotencyKey)+len(id.IssuerRef)+len(id.OriginWorkflow)+len(id.Effect))
	b = appendHead(b, majMap, MapSize(9, hash != nil, id.IssuerRef != ""))
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

// EncodeReceipt is schemas.MustMarshal(rec). Key order: stamp, receipt,
// rejected?.
func EncodeReceipt(rec *ReceiptRec) []byte {
	b := make([]byte, 0, 140+receipts.SignedReceiptSize(&rec.Receipt)+len(rec.Rejected)+len(rec.Stamp.Entropy))
	b = appendHead(b, majMap, MapSize(2, rec.Rejected != ""))
	b = appendStamp(appendText(b, "stamp"), &rec.Stamp)
	b = receipts.AppendSignedReceipt(appendText(b, "receipt"), &rec.Receipt)
	if rec.Rejected != "" {
		b = appendText(appendText(b, "rejected"), rec.Rejected)
	}
	return b
}
