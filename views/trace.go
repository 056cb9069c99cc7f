package views

import (
	"encoding/json"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Trace entries (GET /v1/trace, `aosd trace`): a cell's or an intent's
// records as records.Trace finds them, rendered as JSON. Like the export
// (export.go) they only read the journal, decoding typed records from
// package records; the kernel is not asked.

// TraceEntry is one line of a timeline (records.TraceEntry) as JSON: Value
// (an event's value, an intent's params, a receipt's or frame's payload)
// rendered from canonical CBOR.
type TraceEntry struct {
	Seq       uint64          `json:"seq"`
	Kind      journal.Kind    `json:"kind"`
	Schema    string          `json:"schema,omitempty"`
	Input     uint64          `json:"input,omitempty"`
	StateHash *schemas.Hash   `json:"state_hash,omitempty"`
	Deleted   bool            `json:"deleted,omitempty"`
	Emitted   []uint64        `json:"emitted,omitempty"`
	Intents   []schemas.Hash  `json:"intents,omitempty"`
	Effect    string          `json:"effect,omitempty"`
	Status    string          `json:"status,omitempty"`
	Executor  string          `json:"executor,omitempty"`
	Attempt   uint64          `json:"attempt,omitempty"`   // a receipt's attempt
	FrameSeq  uint64          `json:"frame_seq,omitempty"` // a frame's own number for its intent (the export's frame seq)
	Reason    string          `json:"reason,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Action    string          `json:"action,omitempty"`  // a recover: retry, reset or skip
	Fault     uint64          `json:"fault,omitempty"`   // a recover: the fault record it answers
	Skipped   uint64          `json:"skipped,omitempty"` // a recover: events not delivered while failed (worlds from before parking)
	Parked    uint64          `json:"parked,omitempty"`  // a recover: events parked for the instance, delivered after it (or dropped)
	Dropped   bool            `json:"dropped,omitempty"` // a recover: its parked events were dropped
	By        string          `json:"by,omitempty"`      // a cancel: who asked, as the request said
	// NowNs is the entry's logical time: the journaled ingress stamp of its
	// record, or for a step, fault or intent, of the input it stepped
	// (StampTimes fills those in); 0 when not known.
	NowNs uint64 `json:"now_ns,omitempty"`
	// An intent's origin, idempotency key (bytes, base64) and issuer ref.
	OriginWorkflow string          `json:"origin_workflow,omitempty"`
	OriginKey      json.RawMessage `json:"origin_key,omitempty"`
	IdempotencyKey []byte          `json:"idempotency_key,omitempty"`
	IssuerRef      string          `json:"issuer_ref,omitempty"`
}

// TraceView renders typed trace entries as JSON entries, never nil.
func TraceView(es []records.TraceEntry) []TraceEntry {
	out := make([]TraceEntry, len(es))
	for i, e := range es {
		out[i] = TraceEntry{Seq: e.Seq, Kind: e.Kind, Schema: e.Schema, Input: e.Input, StateHash: e.StateHash,
			Deleted: e.Deleted, Emitted: e.Emitted, Intents: e.Intents, Effect: e.Effect, Status: e.Status,
			Executor: e.Executor, Attempt: e.Attempt, FrameSeq: e.FrameSeq, Reason: e.Reason, Value: valueJSON(e.Value),
			Action: e.Action, Fault: e.Fault, Skipped: e.Skipped, Parked: e.Parked, Dropped: e.Dropped, By: e.By}
		intentIdentity(&out[i], e)
	}
	return out
}

// valueJSON renders a canonical CBOR value as JSON; nil when it has no JSON
// form (the field is then left out).
func valueJSON(v []byte) json.RawMessage {
	js, err := schemas.ToJSON(v)
	if err != nil {
		return nil
	}
	return js
}
