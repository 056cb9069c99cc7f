package records

import (
	"github.com/aos-kernel/aos/internal/canon"
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

// appendHash appends h as a 32-byte CBOR byte string.
func appendHash(b []byte, h *schemas.Hash) []byte {
	return canon.AppendBytes(b, h[:])
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
	b = canon.AppendHead(b, canon.MajorMap, 5)
	b = canon.AppendHead(canon.AppendText(b, "height"), canon.MajorUint, s.Height)
	b = canon.AppendHead(canon.AppendText(b, "now_ns"), canon.MajorUint, s.NowNs)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "entropy"), s.Entropy)
	b = canon.AppendHead(canon.AppendText(b, "logical_ns"), canon.MajorUint, s.LogicalNs)
	return appendHash(canon.AppendText(b, "manifest_hash"), &s.ManifestHash)
}

// Key order: key?, workflow.
func appendTarget(b []byte, t *TargetRec) []byte {
	b = canon.AppendHead(b, canon.MajorMap, MapSize(1, len(t.Key) > 0))
	if len(t.Key) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "key"), t.Key)
	}
	return canon.AppendText(canon.AppendText(b, "workflow"), t.Workflow)
}

// Key order: key?, step, depth, workflow.
func appendOrigin(b []byte, o *OriginRec) []byte {
	b = canon.AppendHead(b, canon.MajorMap, MapSize(3, len(o.Key) > 0))
	if len(o.Key) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "key"), o.Key)
	}
	b = canon.AppendHead(canon.AppendText(b, "step"), canon.MajorUint, o.Step)
	b = canon.AppendHead(canon.AppendText(b, "depth"), canon.MajorUint, o.Depth)
	return canon.AppendText(canon.AppendText(b, "workflow"), o.Workflow)
}

// EncodeEvent is schemas.MustMarshal(rec). Key order: stamp, value, origin?,
// schema, targets, idempotency_key?.
func EncodeEvent(rec *EventRec) []byte {
	b := make([]byte, 0, eventSize(rec))
	b = canon.AppendHead(b, canon.MajorMap, MapSize(4, rec.Origin != nil, rec.IdempotencyKey != ""))
	b = appendStamp(canon.AppendText(b, "stamp"), &rec.Stamp)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "value"), rec.Value)
	if rec.Origin != nil {
		b = appendOrigin(canon.AppendText(b, "origin"), rec.Origin)
	}
	b = canon.AppendText(canon.AppendText(b, "schema"), rec.Schema)
	b = canon.AppendText(b, "targets")
	if rec.Targets == nil {
		b = append(b, canon.Null)
	} else {
		b = canon.AppendHead(b, canon.MajorArray, uint64(len(rec.Targets)))
		for i := range rec.Targets {
			b = appendTarget(b, &rec.Targets[i])
		}
	}
	if rec.IdempotencyKey != "" {
		b = canon.AppendText(canon.AppendText(b, "idempotency_key"), rec.IdempotencyKey)
	}
	return b
}

// eventSize bounds the length of EncodeEvent(rec), so that its buffer is
// allocated once: every head at its widest (9 bytes), every key's text. The
// estimate it replaced counted 48 bytes a target, which a workflow name of
// 20 characters and a key overran, and the buffer was copied to grow on
// every ingress event.
func eventSize(rec *EventRec) int {
	n := 170 + len(rec.Stamp.Entropy) + len(rec.Value) + len(rec.Schema) // map, stamp, value, schema, targets
	for i := range rec.Targets {
		n += 32 + len(rec.Targets[i].Key) + len(rec.Targets[i].Workflow)
	}
	if o := rec.Origin; o != nil {
		n += 7 + 61 + len(o.Key) + len(o.Workflow)
	}
	if rec.IdempotencyKey != "" {
		n += 25 + len(rec.IdempotencyKey)
	}
	return n
}

// EncodeStep is schemas.MustMarshal(rec). Key order: key?, input,
// emitted?, intents?, workflow, state_hash, workflow_hash.
func EncodeStep(rec *StepRec) []byte {
	b := make([]byte, 0, 150+len(rec.Workflow)+len(rec.Key)+9*len(rec.Emitted)+34*len(rec.Intents))
	b = canon.AppendHead(b, canon.MajorMap, MapSize(4, len(rec.Key) > 0, len(rec.Emitted) > 0, len(rec.Intents) > 0))
	if len(rec.Key) > 0 {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "key"), rec.Key)
	}
	b = canon.AppendHead(canon.AppendText(b, "input"), canon.MajorUint, rec.Input)
	if len(rec.Emitted) > 0 {
		b = canon.AppendHead(canon.AppendText(b, "emitted"), canon.MajorArray, uint64(len(rec.Emitted)))
		for _, e := range rec.Emitted {
			b = canon.AppendHead(b, canon.MajorUint, e)
		}
	}
	if len(rec.Intents) > 0 {
		b = canon.AppendHead(canon.AppendText(b, "intents"), canon.MajorArray, uint64(len(rec.Intents)))
		for i := range rec.Intents {
			b = appendHash(b, &rec.Intents[i])
		}
	}
	b = canon.AppendText(canon.AppendText(b, "workflow"), rec.Workflow)
	b = canon.AppendText(b, "state_hash")
	if rec.StateHash == nil {
		b = append(b, canon.Null)
	} else {
		b = appendHash(b, rec.StateHash)
	}
	return appendHash(canon.AppendText(b, "workflow_hash"), &rec.WorkflowHash)
}

// EncodeIntentID is schemas.MustMarshal(id), and with a hash,
// schemas.MustMarshal(&IntentRec{hash, *id}) (the embedded struct's fields
// are flattened into one map). Key order: hash?, index, world?, effect,
// params, emitted_at, issuer_ref?, origin_key, effect_hash,
// idempotency_key, origin_workflow, origin_workflow_hash.
func EncodeIntentID(hash *schemas.Hash, id *IntentID) []byte {
	b := make([]byte, 0, 345+len(id.World)+len(id.Params)+len(id.OriginKey)+len(id.IdempotencyKey)+len(id.IssuerRef)+len(id.OriginWorkflow)+len(id.Effect))
	b = canon.AppendHead(b, canon.MajorMap, MapSize(9, hash != nil, id.IssuerRef != "", id.World != ""))
	if hash != nil {
		b = appendHash(canon.AppendText(b, "hash"), hash)
	}
	b = canon.AppendHead(canon.AppendText(b, "index"), canon.MajorUint, id.Index)
	if id.World != "" {
		b = canon.AppendText(canon.AppendText(b, "world"), id.World)
	}
	b = canon.AppendText(canon.AppendText(b, "effect"), id.Effect)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "params"), id.Params)
	b = canon.AppendHead(canon.AppendText(b, "emitted_at"), canon.MajorUint, id.EmittedAt)
	if id.IssuerRef != "" {
		b = canon.AppendText(canon.AppendText(b, "issuer_ref"), id.IssuerRef)
	}
	b = canon.AppendBytesOrNull(canon.AppendText(b, "origin_key"), id.OriginKey)
	b = appendHash(canon.AppendText(b, "effect_hash"), &id.EffectHash)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "idempotency_key"), id.IdempotencyKey)
	b = canon.AppendText(canon.AppendText(b, "origin_workflow"), id.OriginWorkflow)
	return appendHash(canon.AppendText(b, "origin_workflow_hash"), &id.OriginWorkflowHash)
}

// EncodeReceipt is schemas.MustMarshal(rec). Key order: stamp, receipt,
// rejected?.
func EncodeReceipt(rec *ReceiptRec) []byte {
	b := make([]byte, 0, 140+receipts.SignedReceiptSize(&rec.Receipt)+len(rec.Rejected)+len(rec.Stamp.Entropy))
	b = canon.AppendHead(b, canon.MajorMap, MapSize(2, rec.Rejected != ""))
	b = appendStamp(canon.AppendText(b, "stamp"), &rec.Stamp)
	b = receipts.AppendSignedReceipt(canon.AppendText(b, "receipt"), &rec.Receipt)
	if rec.Rejected != "" {
		b = canon.AppendText(canon.AppendText(b, "rejected"), rec.Rejected)
	}
	return b
}
