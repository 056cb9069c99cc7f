package sdk

import (
	"fmt"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/modules/sys"
)

// Names of the built-in schemas and effects a workflow meets most.
const (
	SchemaContext         = sys.SchemaContext
	SchemaReceiptEnvelope = sys.SchemaReceiptEnvelope
	SchemaReceiptRejected = sys.SchemaReceiptRejected
	SchemaEffectCancelled = sys.SchemaEffectCancelled
	EffectTimerSet        = sys.EffectTimerSet
)

// Receipt statuses (ReceiptEnvelope.Status).
const (
	StatusOK      = sys.StatusOK
	StatusError   = sys.StatusError
	StatusTimeout = sys.StatusTimeout
)

// ReceiptEnvelope is sys/EffectReceiptEnvelope@1 (its fields are
// sys.ReceiptEnvelope's, the kernel's own): the kernel's delivery of an
// executor's signed receipt to the cell that emitted the intent. A workflow
// receives it as an arm of its variant event schema; decode it with
// Variant.As.
type ReceiptEnvelope sys.ReceiptEnvelope

// OK reports whether the effect succeeded (status "ok").
func (r *ReceiptEnvelope) OK() bool { return r.Status == StatusOK }

// DecodePayload decodes the receipt's payload into v (a pointer), e.g. a
// TimerSetReceipt for sys/timer.set@1.
func (r *ReceiptEnvelope) DecodePayload(v any) error {
	if err := Unmarshal(r.Payload, v); err != nil {
		return fmt.Errorf("receipt payload of %s: %w", r.Effect, err)
	}
	return nil
}

func (r *ReceiptEnvelope) decodeCBOR(data []byte) error {
	return decodeFields(data, []field{
		{name: "origin_workflow", text: &r.OriginWorkflow},
		{name: "origin_workflow_hash", text: &r.OriginWorkflowHash},
		{name: "origin_key", bytes: &r.OriginKey},
		{name: "intent_hash", text: &r.IntentHash},
		{name: "effect", text: &r.Effect},
		{name: "executor", text: &r.Executor},
		{name: "issuer_ref", text: &r.IssuerRef},
		{name: "payload", bytes: &r.Payload},
		{name: "status", text: &r.Status},
		{name: "emitted_at_seq", u64: &r.EmittedAtSeq},
		{name: "signature", bytes: &r.Signature},
	})
}

// UnmarshalCBOR decodes the envelope without reflection.
func (r *ReceiptEnvelope) UnmarshalCBOR(data []byte) error { return r.decodeCBOR(data) }

// ReceiptRejected is sys/EffectReceiptRejected@1 (fields:
// sys.ReceiptRejected): a receipt for the cell's intent came back but its
// payload failed validation. The intent is settled; nothing more will come
// for it. The kernel delivers it only to a workflow whose event schema
// accepts it (as a variant arm).
type ReceiptRejected sys.ReceiptRejected

func (r *ReceiptRejected) decodeCBOR(data []byte) error {
	return decodeFields(data, []field{
		{name: "origin_workflow", text: &r.OriginWorkflow},
		{name: "origin_key", bytes: &r.OriginKey},
		{name: "intent_hash", text: &r.IntentHash},
		{name: "effect", text: &r.Effect},
		{name: "error", text: &r.Error},
		{name: "emitted_at_seq", u64: &r.EmittedAtSeq},
	})
}

// UnmarshalCBOR decodes the rejection without reflection.
func (r *ReceiptRejected) UnmarshalCBOR(data []byte) error { return r.decodeCBOR(data) }

// EffectCancelled is sys/EffectCancelled@1 (fields: sys.EffectCancelled):
// an operator cancelled the cell's intent (`aosd cancel`, POST
// /v1/intents/{hash}/cancel). The intent is settled: no receipt will come
// for it, and a timer it set will not fire. The kernel delivers it only to
// a workflow whose event schema accepts it (as a variant arm, e.g.
// "Cancelled": "sys/EffectCancelled@1"); an instance of any other workflow
// fails instead. Decode it with Variant.As. Cancellations are rare, so it
// is decoded by the library, not by hand.
type EffectCancelled sys.EffectCancelled

// TimerSetParams is sys/TimerSetParams@1 (fields: sys.TimerSetParams), the
// params of sys/timer.set@1.
type TimerSetParams sys.TimerSetParams

// TimerSetReceipt is sys/TimerSetReceipt@1 (fields: sys.TimerSetReceipt),
// the payload of a sys/timer.set@1 receipt.
type TimerSetReceipt sys.TimerSetReceipt

func (r *TimerSetReceipt) decodeCBOR(data []byte) error {
	return decodeFields(data, []field{
		{name: "delivered_at_ns", u64: &r.DeliveredAtNs},
		{name: "key", text: &r.Key},
	})
}

// UnmarshalCBOR decodes the receipt without reflection.
func (r *TimerSetReceipt) UnmarshalCBOR(data []byte) error { return r.decodeCBOR(data) }

// appendTimerSetParams appends the canonical CBOR of TimerSetParams (keys
// key?, deliver_at_ns), as Marshal would.
func appendTimerSetParams(b []byte, deliverAtNs uint64, key string) []byte {
	if key == "" {
		b = canon.AppendMap(b, 1)
	} else {
		b = canon.AppendText(canon.AppendText(canon.AppendMap(b, 2), "key"), key)
	}
	return canon.AppendUint(canon.AppendText(b, "deliver_at_ns"), deliverAtNs)
}
