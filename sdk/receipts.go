package sdk

import (
	"fmt"

	"github.com/aos-kernel/aos/internal/canon"
)

// Names of the built-in schemas and effects a workflow meets most.
const (
	SchemaContext         = "sys/WorkflowContext@1"
	SchemaReceiptEnvelope = "sys/EffectReceiptEnvelope@1"
	SchemaReceiptRejected = "sys/EffectReceiptRejected@1"
	EffectTimerSet        = "sys/timer.set@1"
)

// Receipt statuses (ReceiptEnvelope.Status).
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// ReceiptEnvelope is sys/EffectReceiptEnvelope@1: the kernel's delivery of
// an executor's signed receipt to the cell that emitted the intent. A
// workflow receives it as an arm of its variant event schema; decode it with
// Variant.As.
type ReceiptEnvelope struct {
	OriginWorkflow     string `cbor:"origin_workflow"`
	OriginWorkflowHash string `cbor:"origin_workflow_hash"`
	OriginKey          []byte `cbor:"origin_key,omitempty"` // canonical CBOR of the cell key; absent when unkeyed
	IntentHash         string `cbor:"intent_hash"`
	Effect             string `cbor:"effect"`
	Executor           string `cbor:"executor"`
	IssuerRef          string `cbor:"issuer_ref,omitempty"` // as given with IssuerRef when the effect was emitted
	Payload            []byte `cbor:"payload"`              // canonical CBOR of the effect's receipt schema
	Status             string `cbor:"status"`               // StatusOK, StatusError or StatusTimeout
	EmittedAtSeq       uint64 `cbor:"emitted_at_seq"`
	Signature          []byte `cbor:"signature"`
}

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

// ReceiptRejected is sys/EffectReceiptRejected@1: a receipt for the cell's
// intent came back but its payload failed validation. The intent is settled;
// nothing more will come for it. The kernel delivers it only to a workflow
// whose event schema accepts it (as a variant arm).
type ReceiptRejected struct {
	OriginWorkflow string `cbor:"origin_workflow"`
	OriginKey      []byte `cbor:"origin_key,omitempty"`
	IntentHash     string `cbor:"intent_hash"`
	Effect         string `cbor:"effect"`
	Error          string `cbor:"error"`
	EmittedAtSeq   uint64 `cbor:"emitted_at_seq"`
}

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

// TimerSetParams is sys/TimerSetParams@1, the params of sys/timer.set@1.
type TimerSetParams struct {
	DeliverAtNs uint64 `cbor:"deliver_at_ns"` // logical time, as Context.LogicalNowNs
	Key         string `cbor:"key,omitempty"`
}

// TimerSetReceipt is sys/TimerSetReceipt@1, the payload of a
// sys/timer.set@1 receipt.
type TimerSetReceipt struct {
	DeliveredAtNs uint64 `cbor:"delivered_at_ns"`
	Key           string `cbor:"key,omitempty"`
}

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
