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

// Describe renders a journal record for people and `--json` output: the
// record's fields with values, keys and states shown as JSON.
func Describe(r journal.Record) (map[string]any, error) {
	rec, err := records.Decode(r)
	if err != nil {
		return nil, err
	}
	var body any
	switch rec := rec.(type) {
	case *records.EventRec:
		targets := make([]map[string]any, len(rec.Targets))
		for i, t := range rec.Targets {
			targets[i] = map[string]any{"workflow": t.Workflow, "key": KeyJSON(t.Key)}
		}
		m := map[string]any{"schema": rec.Schema, "value": valueJSON(rec.Value), "targets": targets,
			"stamp": stampJSON(&rec.Stamp)}
		if rec.Origin != nil {
			m["origin"] = map[string]any{"workflow": rec.Origin.Workflow, "key": KeyJSON(rec.Origin.Key), "step": rec.Origin.Step}
		}
		if rec.IdempotencyKey != "" {
			m["idempotency_key"] = rec.IdempotencyKey
		}
		body = m
	case *records.StepRec:
		body = map[string]any{"input": rec.Input, "workflow": rec.Workflow, "workflow_hash": rec.WorkflowHash,
			"key": KeyJSON(rec.Key), "state_hash": rec.StateHash, "emitted": rec.Emitted, "intents": rec.Intents}
	case *records.FaultRec:
		fb := map[string]any{"input": rec.Input, "workflow": rec.Workflow, "key": KeyJSON(rec.Key), "reason": rec.Reason}
		if rec.Class != "" {
			fb["class"] = rec.Class
		}
		body = fb
	case *records.IntentRec:
		body = map[string]any{"hash": rec.Hash, "origin_workflow": rec.OriginWorkflow, "origin_key": KeyJSON(rec.OriginKey),
			"effect": rec.Effect, "params": valueJSON(rec.Params), "emitted_at": rec.EmittedAt, "index": rec.Index}
	case *records.ManifestRec:
		mb := map[string]any{"hash": rec.Hash, "name": rec.Name, "source_bytes": len(rec.Source)}
		if rec.Limits != nil {
			mb["limits"] = rec.Limits
		}
		body = mb
	case *records.ConfigRec:
		body = map[string]any{"limits": rec.Limits}
	case *records.RecoverRec:
		body = map[string]any{"workflow": rec.Workflow, "key": KeyJSON(rec.Key), "action": rec.Action,
			"fault": rec.Fault, "input": rec.Input, "skipped": rec.Skipped, "stamp": stampJSON(&rec.Stamp)}
	case *records.ReceiptRec, *records.DropRec, *records.FrameRec:
		e, _ := records.Entry(r.Seq, r.Kind, rec)
		m := map[string]any{"intent": e.Intents[0], "executor": e.Executor}
		if e.Effect != "" {
			m["effect"] = e.Effect
		}
		if e.Status != "" {
			m["status"] = e.Status
		}
		if e.Reason != "" {
			m["reason"] = e.Reason
		}
		if e.Attempt != 0 {
			m["attempt"] = e.Attempt
		}
		if v := valueJSON(e.Value); v != nil {
			m["payload"] = v
		}
		body = m
	default:
		js, err := schemas.ToJSON(r.Body)
		if err != nil {
			return nil, err
		}
		body = json.RawMessage(js)
	}
	return map[string]any{"seq": r.Seq, "kind": string(r.Kind), "body": body}, nil
}

// stampJSON is the part of a stamp people read: its entropy is left out.
func stampJSON(s *records.Stamp) map[string]any {
	return map[string]any{"now_ns": s.NowNs, "logical_ns": s.LogicalNs, "height": s.Height, "manifest_hash": s.ManifestHash}
}
