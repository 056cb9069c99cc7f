package daemon

import (
	"encoding/json"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The JSON shapes of what the journal holds: trace entries (GET /v1/trace,
// `aosd trace`) and described records (GET /v1/journal, `aosd journal`).
// Both only read the journal, through the world's (kernel.World.Journal),
// decoding typed records from package records; the kernel is not asked.

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
	Attempt   uint64          `json:"attempt,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Action    string          `json:"action,omitempty"`  // a recover: retry, reset or skip
	Fault     uint64          `json:"fault,omitempty"`   // a recover: the fault record it answers
	Skipped   uint64          `json:"skipped,omitempty"` // a recover: events not delivered while failed
}

// TraceView renders typed trace entries as JSON entries, never nil.
func TraceView(es []records.TraceEntry) []TraceEntry {
	out := make([]TraceEntry, len(es))
	for i, e := range es {
		out[i] = TraceEntry{Seq: e.Seq, Kind: e.Kind, Schema: e.Schema, Input: e.Input, StateHash: e.StateHash,
			Deleted: e.Deleted, Emitted: e.Emitted, Intents: e.Intents, Effect: e.Effect, Status: e.Status,
			Executor: e.Executor, Attempt: e.Attempt, Reason: e.Reason, Value: valueJSON(e.Value),
			Action: e.Action, Fault: e.Fault, Skipped: e.Skipped}
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

// KeyJSON renders a canonical CBOR key as JSON (null for no key), as every
// shape and error message shows keys (records.KeyJSON).
func KeyJSON(key []byte) json.RawMessage { return records.KeyJSON(key) }

// JournalEntry is one described journal record (GET /v1/journal, `aosd
// journal --json`): its seq, kind and body, the body one of the *Body types
// below for the kinds records knows, else the record's CBOR as JSON. Fields
// are declared in name order, as the JSON has always listed them.
type JournalEntry struct {
	Body any    `json:"body"`
	Kind string `json:"kind"`
	Seq  uint64 `json:"seq"`
}

// StampBody is the part of a stamp people read: its entropy is left out.
type StampBody struct {
	Height       uint64       `json:"height"`
	LogicalNs    uint64       `json:"logical_ns"`
	ManifestHash schemas.Hash `json:"manifest_hash"`
	NowNs        uint64       `json:"now_ns"`
}

// TargetBody is one delivery of an event.
type TargetBody struct {
	Key      json.RawMessage `json:"key"`
	Workflow string          `json:"workflow"`
}

// OriginBody says which step emitted an event.
type OriginBody struct {
	Key      json.RawMessage `json:"key"`
	Step     uint64          `json:"step"`
	Workflow string          `json:"workflow"`
}

// EventBody is an event record (records.EventRec).
type EventBody struct {
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Origin         *OriginBody     `json:"origin,omitempty"`
	Schema         string          `json:"schema"`
	Stamp          StampBody       `json:"stamp"`
	Targets        []TargetBody    `json:"targets"`
	Value          json.RawMessage `json:"value"`
}

// StepBody is a step record (records.StepRec).
type StepBody struct {
	Emitted      []uint64        `json:"emitted"`
	Input        uint64          `json:"input"`
	Intents      []schemas.Hash  `json:"intents"`
	Key          json.RawMessage `json:"key"`
	StateHash    *schemas.Hash   `json:"state_hash"`
	Workflow     string          `json:"workflow"`
	WorkflowHash schemas.Hash    `json:"workflow_hash"`
}

// FaultBody is a fault record (records.FaultRec).
type FaultBody struct {
	Class    string          `json:"class,omitempty"`
	Input    uint64          `json:"input"`
	Key      json.RawMessage `json:"key"`
	Reason   string          `json:"reason"`
	Workflow string          `json:"workflow"`
}

// IntentBody is an intent record (records.IntentRec).
type IntentBody struct {
	Effect         string          `json:"effect"`
	EmittedAt      uint64          `json:"emitted_at"`
	Hash           schemas.Hash    `json:"hash"`
	Index          uint64          `json:"index"`
	OriginKey      json.RawMessage `json:"origin_key"`
	OriginWorkflow string          `json:"origin_workflow"`
	Params         json.RawMessage `json:"params"`
}

// ManifestBody is a manifest record (records.ManifestRec), its source
// counted, not shown.
type ManifestBody struct {
	Hash        schemas.Hash `json:"hash"`
	Limits      *Limits      `json:"limits,omitempty"`
	Name        string       `json:"name"`
	SourceBytes int          `json:"source_bytes"`
}

// ConfigBody is a config record (records.ConfigRec).
type ConfigBody struct {
	Limits Limits `json:"limits"`
}

// RecoverBody is a recover record (records.RecoverRec).
type RecoverBody struct {
	Action   string          `json:"action"`
	Fault    uint64          `json:"fault"`
	Input    uint64          `json:"input"`
	Key      json.RawMessage `json:"key"`
	Skipped  uint64          `json:"skipped"`
	Stamp    StampBody       `json:"stamp"`
	Workflow string          `json:"workflow"`
}

// CheckpointBody is a checkpoint record (records.CheckpointRec): a
// snapshot's point, and what asked for it.
type CheckpointBody struct {
	Reason string `json:"reason"` // records, time or operator
}

// SnapshotBody is a snapshot record (records.SnapshotRec): the snapshot of
// the state after the checkpoint record at Checkpoint is stored as Object.
type SnapshotBody struct {
	Bytes      uint64       `json:"bytes"`
	Checkpoint uint64       `json:"checkpoint"`
	Object     schemas.Hash `json:"object"`
}

// ReceiptBody is a receipt, drop or frame record: what an executor said
// about an intent (a frame's seq is its attempt).
type ReceiptBody struct {
	Attempt  uint64          `json:"attempt,omitempty"`
	Effect   string          `json:"effect,omitempty"`
	Executor string          `json:"executor"`
	Intent   schemas.Hash    `json:"intent"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Status   string          `json:"status,omitempty"`
}

// Describe renders a journal record for people and `--json` output: the
// record's fields with values, keys and states shown as JSON.
func Describe(r journal.Record) (*JournalEntry, error) {
	rec, err := records.Decode(r)
	if err != nil {
		return nil, err
	}
	var body any
	switch rec := rec.(type) {
	case *records.EventRec:
		b := &EventBody{IdempotencyKey: rec.IdempotencyKey, Schema: rec.Schema, Stamp: stampBody(&rec.Stamp),
			Targets: make([]TargetBody, len(rec.Targets)), Value: valueJSON(rec.Value)}
		for i, t := range rec.Targets {
			b.Targets[i] = TargetBody{Key: KeyJSON(t.Key), Workflow: t.Workflow}
		}
		if o := rec.Origin; o != nil {
			b.Origin = &OriginBody{Key: KeyJSON(o.Key), Step: o.Step, Workflow: o.Workflow}
		}
		body = b
	case *records.StepRec:
		body = &StepBody{Emitted: rec.Emitted, Input: rec.Input, Intents: rec.Intents, Key: KeyJSON(rec.Key),
			StateHash: rec.StateHash, Workflow: rec.Workflow, WorkflowHash: rec.WorkflowHash}
	case *records.FaultRec:
		body = &FaultBody{Class: rec.Class, Input: rec.Input, Key: KeyJSON(rec.Key), Reason: rec.Reason, Workflow: rec.Workflow}
	case *records.IntentRec:
		body = &IntentBody{Effect: rec.Effect, EmittedAt: rec.EmittedAt, Hash: rec.Hash, Index: rec.Index,
			OriginKey: KeyJSON(rec.OriginKey), OriginWorkflow: rec.OriginWorkflow, Params: valueJSON(rec.Params)}
	case *records.ManifestRec:
		b := &ManifestBody{Hash: rec.Hash, Name: rec.Name, SourceBytes: len(rec.Source)}
		if rec.Limits != nil {
			lim := Limits(*rec.Limits)
			b.Limits = &lim
		}
		body = b
	case *records.ConfigRec:
		body = &ConfigBody{Limits: Limits(rec.Limits)}
	case *records.RecoverRec:
		body = &RecoverBody{Action: rec.Action, Fault: rec.Fault, Input: rec.Input, Key: KeyJSON(rec.Key),
			Skipped: rec.Skipped, Stamp: stampBody(&rec.Stamp), Workflow: rec.Workflow}
	case *records.CheckpointRec:
		body = &CheckpointBody{Reason: rec.Reason}
	case *records.SnapshotRec:
		body = &SnapshotBody{Bytes: rec.Bytes, Checkpoint: rec.Checkpoint, Object: rec.Object}
	case *records.ReceiptRec, *records.DropRec, *records.FrameRec:
		e, _ := records.Entry(r.Seq, r.Kind, rec)
		body = &ReceiptBody{Attempt: e.Attempt, Effect: e.Effect, Executor: e.Executor, Intent: e.Intents[0],
			Payload: valueJSON(e.Value), Reason: e.Reason, Status: e.Status}
	default:
		js, err := schemas.ToJSON(r.Body)
		if err != nil {
			return nil, err
		}
		body = json.RawMessage(js)
	}
	return &JournalEntry{Body: body, Kind: string(r.Kind), Seq: r.Seq}, nil
}

func stampBody(s *records.Stamp) StampBody {
	return StampBody{Height: s.Height, LogicalNs: s.LogicalNs, ManifestHash: s.ManifestHash, NowNs: s.NowNs}
}
