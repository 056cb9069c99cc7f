package kernel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// InstanceCounts counts instances by status.
type InstanceCounts struct {
	Running   int `json:"running"`
	Waiting   int `json:"waiting"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Status is the world at a glance (`aosd status --json`).
type Status struct {
	ManifestHash  *schemas.Hash  `json:"manifest_hash"`
	ManifestName  string         `json:"manifest_name,omitempty"`
	JournalHeight uint64         `json:"journal_height"`
	Quiescent     bool           `json:"quiescent"`
	Instances     InstanceCounts `json:"instances"`
	Inflight      int            `json:"inflight"`
	QueuedEffects int            `json:"queued_effects"`
	Cells         map[string]int `json:"cells"`
	Limits        Limits         `json:"limits"`
}

// Status reports the world's state after every request queued before it.
func (w *World) Status(ctx context.Context) (*Status, error) {
	var s Status
	err := w.do(ctx, func(st *state) {
		if st.man != nil {
			h := st.man.Hash
			s.ManifestHash, s.ManifestName = &h, st.man.Name
		}
		s.Cells = map[string]int{}
		for name, rt := range st.wfs {
			s.Cells[name] = rt.head.Len()
			s.Instances.Completed += rt.head.Len()
		}
		for _, in := range st.instances {
			st := in.status()
			switch st {
			case StatusRunning:
				s.Instances.Running++
			case StatusWaiting:
				s.Instances.Waiting++
			case StatusFailed:
				s.Instances.Failed++
			}
			if st != StatusCompleted && in.hasCell(w.st) {
				s.Instances.Completed--
			}
		}
		s.Inflight = len(st.inflight)
		s.Limits = st.limits
		s.Quiescent = s.Instances.Running == 0 && s.Instances.Waiting == 0 && s.Inflight == 0 && s.QueuedEffects == 0
	})
	s.JournalHeight = w.journal.Height()
	if q, ok := w.cfg.Publisher.(QueueReporter); ok && err == nil {
		// Queued intents are also in flight, so quiescence is unchanged.
		s.QueuedEffects = q.Queued()
	}
	return &s, err
}

func (in *instance) hasCell(st *state) bool {
	rt := st.wfs[in.wf]
	if rt == nil {
		return false
	}
	_, ok, _ := rt.head.Lookup(in.key)
	return ok
}

// CellInfo is one row of `aosd cells ls` (see CellPage): a cell, or an
// instance not at rest that has no cell (zero StateHash and Size).
type CellInfo struct {
	Key        json.RawMessage `json:"key"`
	StateHash  schemas.Hash    `json:"state_hash"`
	Size       uint64          `json:"size"`
	Status     string          `json:"status"`
	LastActive uint64          `json:"last_active_ns"`
	Reason     string          `json:"reason,omitempty"`
}

// CellView is `aosd cells show`.
type CellView struct {
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason,omitempty"`
	State     json.RawMessage `json:"state"`
	StateHash *schemas.Hash   `json:"state_hash"`
	Size      uint64          `json:"size"`
	Inflight  []string        `json:"inflight"`
	Exists    bool            `json:"-"`
}

// ErrNoCell reports a cell that does not exist.
var ErrNoCell = fmt.Errorf("kernel: no such cell")

// Cell shows one cell. key is canonical CBOR (nil for an unkeyed workflow).
func (w *World) Cell(ctx context.Context, workflow string, key []byte) (*CellView, error) {
	var v *CellView
	var qerr error
	err := w.do(ctx, func(st *state) {
		rt := st.wfs[workflow]
		if rt == nil {
			qerr = fmt.Errorf("%w: unknown workflow %q", ErrInvalid, workflow)
			return
		}
		state, ok, err := rt.head.Get(key)
		if err != nil {
			qerr = err
			return
		}
		in := st.instances[instanceID(workflow, key)]
		if !ok && in == nil {
			qerr = fmt.Errorf("%w: workflow %s key %s", ErrNoCell, workflow, keyText(key))
			return
		}
		v = &CellView{Workflow: workflow, Key: KeyJSON(key), Status: StatusCompleted, State: json.RawMessage("null"), Inflight: []string{}, Exists: ok}
		if ok {
			h := schemas.HashBytes(state)
			v.StateHash, v.Size = &h, uint64(len(state))
			if js, err := schemas.ToJSON(state); err == nil {
				v.State = js
			}
		}
		if in != nil {
			v.Status, v.Reason = in.status(), in.reason
			for h := range in.inflight {
				v.Inflight = append(v.Inflight, h.String())
			}
			sort.Strings(v.Inflight)
		}
	})
	if err != nil {
		return nil, err
	}
	return v, qerr
}

// KeyJSON renders a canonical CBOR key as JSON (null for no key).
func KeyJSON(key []byte) json.RawMessage {
	if len(key) == 0 {
		return json.RawMessage("null")
	}
	js, err := schemas.ToJSON(key)
	if err != nil {
		return json.RawMessage(`"` + base64.StdEncoding.EncodeToString(key) + `"`)
	}
	return js
}

func keyText(key []byte) string { return string(KeyJSON(key)) }

// TraceEntry is one line of a cell's timeline.
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

// Trace returns the durable timeline of one instance: events delivered to it,
// its steps with resulting state hashes, intents opened, stream frames,
// receipts delivered or dropped, and faults. It scans the journal, decoding
// only the records whose bytes contain the workflow name and key (or one of
// the instance's intent hashes): a record that lacks them cannot be part of
// the timeline.
func (w *World) Trace(ctx context.Context, workflow string, key []byte) ([]TraceEntry, error) {
	might, match := instanceFilters(workflow, key)
	return w.trace(ctx, might, match)
}

type (
	// mightFilter sees a record's raw body and may say false only for
	// records the matchFilter would refuse.
	mightFilter func(kind journal.Kind, body []byte) bool
	// matchFilter decides on a decoded record; for events it is asked once
	// per target.
	matchFilter func(kind journal.Kind, wf string, key []byte, intent schemas.Hash) bool
)

// instanceFilters select one instance's timeline.
func instanceFilters(workflow string, key []byte) (mightFilter, matchFilter) {
	mine := map[schemas.Hash]bool{}
	wfb := []byte(workflow)
	might := func(kind journal.Kind, body []byte) bool {
		switch kind {
		case journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			if len(mine) > maxIntentPrefilter {
				return true
			}
			for h := range mine {
				if bytes.Contains(body, h[:]) {
					return true
				}
			}
			return false
		}
		return bytes.Contains(body, wfb) && bytes.Contains(body, key)
	}
	return might, func(kind journal.Kind, wf string, k []byte, intent schemas.Hash) bool {
		switch kind {
		case journal.KindIntent:
			if wf == workflow && bytes.Equal(k, key) {
				mine[intent] = true
				return true
			}
			return false
		case journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			return mine[intent]
		}
		return wf == workflow && bytes.Equal(k, key)
	}
}

// maxIntentPrefilter: beyond this many intents, searching a record's bytes
// for each costs more than decoding it.
const maxIntentPrefilter = 32

// TraceIntent returns one intent's life: opened, stream frames, receipts
// delivered or dropped.
func (w *World) TraceIntent(ctx context.Context, h schemas.Hash) ([]TraceEntry, error) {
	might, match := intentFilters(h)
	return w.trace(ctx, might, match)
}

// intentFilters select one intent's records.
func intentFilters(h schemas.Hash) (mightFilter, matchFilter) {
	might := func(kind journal.Kind, body []byte) bool {
		switch kind {
		case journal.KindIntent, journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			return bytes.Contains(body, h[:])
		}
		return false
	}
	return might, func(kind journal.Kind, _ string, _ []byte, intent schemas.Hash) bool {
		switch kind {
		case journal.KindIntent, journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			return intent == h
		}
		return false
	}
}

// trace scans the journal and keeps the entries match accepts. might sees
// each record's raw body first and may only say false for records match
// would refuse; for events match is asked once per target.
func (w *World) trace(ctx context.Context, might mightFilter, match matchFilter) ([]TraceEntry, error) {
	out := []TraceEntry{}
	err := w.journal.Read(1, func(r journal.Record) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !might(r.Kind, r.Body) {
			return true, nil
		}
		e, ok, err := traceEntry(r, match)
		if err != nil {
			return false, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		if ok {
			out = append(out, e)
		}
		return true, nil
	})
	return out, err
}

func traceEntry(r journal.Record, match matchFilter) (TraceEntry, bool, error) {
	e := TraceEntry{Seq: r.Seq, Kind: r.Kind}
	var none schemas.Hash
	switch r.Kind {
	case journal.KindEvent:
		var ev records.EventRec
		if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
			return e, false, err
		}
		for _, t := range ev.Targets {
			if match(r.Kind, t.Workflow, t.Key, none) {
				e.Schema = ev.Schema
				e.Value, _ = schemas.ToJSON(ev.Value)
				return e, true, nil
			}
		}
		return e, false, nil
	case journal.KindStep:
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			return e, false, err
		}
		e.Input, e.StateHash, e.Deleted, e.Emitted, e.Intents = s.Input, s.StateHash, s.StateHash == nil, s.Emitted, s.Intents
		return e, match(r.Kind, s.Workflow, s.Key, none), nil
	case journal.KindFault:
		var f records.FaultRec
		if err := schemas.UnmarshalTrusted(r.Body, &f); err != nil {
			return e, false, err
		}
		e.Input, e.Reason = f.Input, f.Reason
		return e, match(r.Kind, f.Workflow, f.Key, none), nil
	case journal.KindRecover:
		var rr records.RecoverRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return e, false, err
		}
		e.Input, e.Action, e.Fault, e.Skipped = rr.Input, rr.Action, rr.Fault, rr.Skipped
		return e, match(r.Kind, rr.Workflow, rr.Key, none), nil
	case journal.KindIntent:
		var it records.IntentRec
		if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
			return e, false, err
		}
		e.Effect, e.Intents, e.Input = it.Effect, []schemas.Hash{it.Hash}, it.EmittedAt
		e.Value, _ = schemas.ToJSON(it.Params)
		return e, match(r.Kind, it.OriginWorkflow, it.OriginKey, it.Hash), nil
	case journal.KindReceipt:
		var rr records.ReceiptRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return e, false, err
		}
		e.Effect, e.Intents, e.Status, e.Executor, e.Reason = rr.Receipt.Effect, []schemas.Hash{rr.Receipt.Intent}, string(rr.Receipt.Status), rr.Receipt.Executor, rr.Rejected
		e.Attempt = rr.Receipt.Attempt
		e.Value, _ = schemas.ToJSON(rr.Receipt.Payload)
		return e, match(r.Kind, "", nil, rr.Receipt.Intent), nil
	case journal.KindDrop:
		var dr records.DropRec
		if err := schemas.UnmarshalTrusted(r.Body, &dr); err != nil {
			return e, false, err
		}
		e.Effect, e.Intents, e.Status, e.Executor, e.Reason = dr.Receipt.Effect, []schemas.Hash{dr.Receipt.Intent}, string(dr.Receipt.Status), dr.Receipt.Executor, dr.Reason
		return e, match(r.Kind, "", nil, dr.Receipt.Intent), nil
	case journal.KindFrame:
		var fr records.FrameRec
		if err := schemas.UnmarshalTrusted(r.Body, &fr); err != nil {
			return e, false, err
		}
		e.Intents, e.Executor, e.Attempt = []schemas.Hash{fr.Intent}, fr.Executor, fr.Seq
		e.Value, _ = schemas.ToJSON(fr.Payload)
		return e, match(r.Kind, "", nil, fr.Intent), nil
	}
	return e, false, nil
}

// Describe renders a journal record for people and `--json` output: the
// record's fields with values, keys and states shown as JSON.
func Describe(r journal.Record) (map[string]any, error) {
	out := map[string]any{"seq": r.Seq, "kind": string(r.Kind)}
	var body any
	switch r.Kind {
	case journal.KindEvent:
		var ev records.EventRec
		if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
			return nil, err
		}
		js, _ := schemas.ToJSON(ev.Value)
		targets := make([]map[string]any, len(ev.Targets))
		for i, t := range ev.Targets {
			targets[i] = map[string]any{"workflow": t.Workflow, "key": KeyJSON(t.Key)}
		}
		m := map[string]any{"schema": ev.Schema, "value": json.RawMessage(js), "targets": targets,
			"stamp": map[string]any{"now_ns": ev.Stamp.NowNs, "logical_ns": ev.Stamp.LogicalNs,
				"height": ev.Stamp.Height, "manifest_hash": ev.Stamp.ManifestHash}}
		if ev.Origin != nil {
			m["origin"] = map[string]any{"workflow": ev.Origin.Workflow, "key": KeyJSON(ev.Origin.Key), "step": ev.Origin.Step}
		}
		if ev.IdempotencyKey != "" {
			m["idempotency_key"] = ev.IdempotencyKey
		}
		body = m
	case journal.KindStep:
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			return nil, err
		}
		body = map[string]any{"input": s.Input, "workflow": s.Workflow, "workflow_hash": s.WorkflowHash,
			"key": KeyJSON(s.Key), "state_hash": s.StateHash, "emitted": s.Emitted, "intents": s.Intents}
	case journal.KindFault:
		var f records.FaultRec
		if err := schemas.UnmarshalTrusted(r.Body, &f); err != nil {
			return nil, err
		}
		fb := map[string]any{"input": f.Input, "workflow": f.Workflow, "key": KeyJSON(f.Key), "reason": f.Reason}
		if f.Class != "" {
			fb["class"] = f.Class
		}
		body = fb
	case journal.KindIntent:
		var it records.IntentRec
		if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
			return nil, err
		}
		params, _ := schemas.ToJSON(it.Params)
		body = map[string]any{"hash": it.Hash, "origin_workflow": it.OriginWorkflow, "origin_key": KeyJSON(it.OriginKey),
			"effect": it.Effect, "params": json.RawMessage(params), "emitted_at": it.EmittedAt, "index": it.Index}
	case journal.KindManifest:
		var mr records.ManifestRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			return nil, err
		}
		mb := map[string]any{"hash": mr.Hash, "name": mr.Name, "source_bytes": len(mr.Source)}
		if mr.Limits != nil {
			mb["limits"] = mr.Limits
		}
		body = mb
	case journal.KindConfig:
		var cr records.ConfigRec
		if err := schemas.UnmarshalTrusted(r.Body, &cr); err != nil {
			return nil, err
		}
		body = map[string]any{"limits": cr.Limits}
	case journal.KindRecover:
		var rr records.RecoverRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return nil, err
		}
		body = map[string]any{"workflow": rr.Workflow, "key": KeyJSON(rr.Key), "action": rr.Action,
			"fault": rr.Fault, "input": rr.Input, "skipped": rr.Skipped,
			"stamp": map[string]any{"now_ns": rr.Stamp.NowNs, "logical_ns": rr.Stamp.LogicalNs,
				"height": rr.Stamp.Height, "manifest_hash": rr.Stamp.ManifestHash}}
	case journal.KindReceipt, journal.KindDrop, journal.KindFrame:
		e, _, err := traceEntry(r, func(journal.Kind, string, []byte, schemas.Hash) bool { return true })
		if err != nil {
			return nil, err
		}
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
		if e.Value != nil {
			m["payload"] = e.Value
		}
		body = m
	default:
		js, err := schemas.ToJSON(r.Body)
		if err != nil {
			return nil, err
		}
		body = json.RawMessage(js)
	}
	out["body"] = body
	return out, nil
}
