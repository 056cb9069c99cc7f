package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/internal/jsonx"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// ShadowRequest is the body of POST /v1/shadow: the proposed manifest as
// POST /v1/apply takes it (exactly one of path and files), and the inputs:
// events, or a window of the journal's last ingress events (neither: the
// last kernel.DefaultShadowWindow). List caps each list of the report (0:
// kernel.DefaultShadowList).
type ShadowRequest struct {
	Path   string  `json:"path,omitempty"`
	Files  []File  `json:"files,omitempty"`
	Events []Event `json:"events,omitempty"`
	Window int     `json:"window,omitempty"`
	List   int     `json:"list,omitempty"`
}

// ShadowOutput is `aosd shadow --json` and the answer of POST /v1/shadow:
// kernel.ShadowReport as JSON. Keys are shown as JSON (KeyJSON).
type ShadowOutput struct {
	Height uint64       `json:"height"` // the live journal height the copy was taken at
	Start  uint64       `json:"start"`  // the copy is the live world as of this seq
	Opened ShadowOpened `json:"opened"`
	// Apply is the apply in the copy, as `aosd apply --json` shows one
	// (its seq is the copy's).
	Apply     *ApplyOutput      `json:"apply"`
	Inputs    ShadowInputs      `json:"inputs"`
	Effects   ShadowEffects     `json:"effects"`
	Pending   ShadowPending     `json:"pending"`
	Instances ShadowInstances   `json:"instances"`
	Allowlist []AllowlistChange `json:"allowlist"`
	Deltas    []ShadowDelta     `json:"deltas"`
}

// ShadowOpened says how the copy was rebuilt (kernel.OpenInfo).
type ShadowOpened struct {
	Snapshot   uint64   `json:"snapshot"`   // the snapshot record it loaded (0: none)
	Checkpoint uint64   `json:"checkpoint"` // that snapshot's checkpoint
	Replayed   uint64   `json:"replayed"`   // records replayed after it
	Skipped    []string `json:"skipped,omitempty"`
}

// ShadowInputs says what was submitted to the copy (kernel.ShadowInputs).
type ShadowInputs struct {
	Source       string          `json:"source"` // "events" or "window"
	Window       int             `json:"window,omitempty"`
	Events       int             `json:"events"`
	From         uint64          `json:"from,omitempty"`
	To           uint64          `json:"to,omitempty"`
	Submitted    int             `json:"submitted"`
	Duplicates   int             `json:"duplicates"`
	Refused      []ShadowRefusal `json:"refused"`
	RefusedTotal int             `json:"refused_total"`
	NotReplayed  map[string]int  `json:"not_replayed"` // record kind -> count
}

// ShadowRefusal is one event the copy refused.
type ShadowRefusal struct {
	Index  int    `json:"index"`
	Seq    uint64 `json:"seq,omitempty"` // its live seq (window only)
	Schema string `json:"schema"`
	Reason string `json:"reason"`
}

// ShadowEffects are the intents the copy opened.
type ShadowEffects struct {
	Total    int            `json:"total"`
	ByEffect map[string]int `json:"by_effect"`
	Intents  []ShadowIntent `json:"intents"`
}

// ShadowPending are the intents in flight at the end.
type ShadowPending struct {
	Total   int            `json:"total"`
	Intents []ShadowIntent `json:"intents"`
}

// ShadowIntent is one intent the copy opened (kernel.ShadowIntent).
type ShadowIntent struct {
	Seq       uint64          `json:"seq,omitempty"` // its intent record in the copy's journal
	Intent    schemas.Hash    `json:"intent"`
	Effect    string          `json:"effect"`
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	EmittedAt uint64          `json:"emitted_at"`
}

// ShadowInstances are the copy's instances at the end.
type ShadowInstances struct {
	Counts            InstanceCounts   `json:"counts"`
	NotCompletedTotal int              `json:"not_completed_total"`
	NotCompleted      []ShadowInstance `json:"not_completed"`
}

// ShadowInstance is an instance not at rest at the end (kernel.ShadowInstance).
type ShadowInstance struct {
	Workflow string          `json:"workflow"`
	Key      json.RawMessage `json:"key"`
	Status   string          `json:"status"`
	Reason   string          `json:"reason,omitempty"`
	FaultSeq uint64          `json:"fault_seq,omitempty"`
	New      bool            `json:"new"` // the status arose in the shadow run
}

// AllowlistChange is one workflow's effects_emitted before and after (old
// or new null when the workflow is not in that manifest).
type AllowlistChange struct {
	Workflow string   `json:"workflow"`
	Old      []string `json:"old"`
	New      []string `json:"new"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
}

// ShadowDelta is what the run did to one workflow's cells.
type ShadowDelta struct {
	Workflow  string           `json:"workflow"`
	Stepped   int              `json:"stepped"`
	Created   int              `json:"created"`
	Changed   int              `json:"changed"`
	Deleted   int              `json:"deleted"`
	Unchanged int              `json:"unchanged"`
	Keys      []ShadowKeyDelta `json:"keys"`
}

// ShadowKeyDelta is one cell's state hash before and after (null: no cell).
type ShadowKeyDelta struct {
	Key    json.RawMessage `json:"key"`
	Change string          `json:"change"`
	Before *schemas.Hash   `json:"before"`
	After  *schemas.Hash   `json:"after"`
}

// Shadow implements Reader. A request that gives both events and a
// window, or an event without its schema or value, is invalid_input; a
// copy that is not quiescent where the manifest is applied is
// not_quiescent, with the report (its apply's blocked_by) beside the
// error.
func (l *Local) Shadow(ctx context.Context, req ShadowRequest) (*ShadowOutput, error) {
	switch {
	case req.Window < 0:
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "window", "window %d: want a positive number of ingress events", req.Window)
	case req.List < 0:
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "list", "list %d: want a positive cap", req.List)
	case len(req.Events) > 0 && req.Window > 0:
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "window", "give events or a window, not both")
	}
	evs := make([]kernel.Event, len(req.Events))
	for i, e := range req.Events {
		if e.Schema == "" || len(e.Value) == 0 {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("events[%d]", i), "an event needs a schema and a value")
		}
		evs[i] = e.kernelEvent()
	}
	m, err := LoadManifest(ApplyRequest{Path: req.Path, Files: req.Files}, l.W.CAS().Get)
	if err != nil {
		return nil, err
	}
	rep, err := l.W.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Events: evs, Window: req.Window, List: req.List})
	var out *ShadowOutput
	if rep != nil {
		out = ShadowOutputOf(m, rep)
	}
	if err == nil {
		return out, nil
	}
	where := "shadow of manifest " + m.Name
	switch {
	case errors.Is(err, kernel.ErrNotQuiescent):
		return out, &Error{Status: http.StatusConflict, Code: CodeNotQuiescent, Where: where, err: err,
			Message: err.Error() + " (see apply.blocked_by)"}
	case rep != nil && rep.Apply != nil && !rep.Apply.Applied && !rep.Apply.Unchanged &&
		!errors.Is(err, kernel.ErrClosed) && !errors.Is(err, kernel.ErrBroken):
		// The copy could not bind the manifest (a builtin this binary
		// lacks, a wasm module that breaks the ABI): as apply answers it.
		return out, &Error{Status: http.StatusBadRequest, Code: CodeInvalidManifest, Where: where, err: err, Message: err.Error()}
	}
	return nil, AsError(err, where)
}

// ShadowOutputOf renders a shadow report of manifest m.
func ShadowOutputOf(m *manifest.Manifest, r *kernel.ShadowReport) *ShadowOutput {
	o := &ShadowOutput{Height: r.Height, Start: r.Start,
		Opened:    ShadowOpened{Snapshot: r.Opened.Snapshot, Checkpoint: r.Opened.Checkpoint, Replayed: r.Opened.Replayed, Skipped: r.Opened.Skipped},
		Allowlist: []AllowlistChange{}, Deltas: []ShadowDelta{}}
	if r.Apply != nil {
		o.Apply = applyOutput(m, r.Apply, false)
	}
	in := r.Inputs
	o.Inputs = ShadowInputs{Source: in.Source, Window: in.Window, Events: in.Events, From: in.From, To: in.To,
		Submitted: in.Submitted, Duplicates: in.Duplicates, Refused: []ShadowRefusal{}, RefusedTotal: in.RefusedTotal,
		NotReplayed: map[string]int{}}
	for _, x := range in.Refused {
		o.Inputs.Refused = append(o.Inputs.Refused, ShadowRefusal(x))
	}
	for _, k := range in.NotReplayed {
		o.Inputs.NotReplayed[string(k.Kind)] = k.Count
	}
	o.Effects = ShadowEffects{Total: r.EffectsTotal, ByEffect: map[string]int{}, Intents: shadowIntents(r.Effects)}
	for _, e := range r.ByEffect {
		o.Effects.ByEffect[e.Effect] = e.Count
	}
	o.Pending = ShadowPending{Total: r.PendingTotal, Intents: shadowIntents(r.Pending)}
	o.Instances = ShadowInstances{Counts: InstanceCounts(r.Instances), NotCompletedTotal: r.NotCompletedTotal, NotCompleted: []ShadowInstance{}}
	for _, si := range r.NotCompleted {
		o.Instances.NotCompleted = append(o.Instances.NotCompleted, ShadowInstance{Workflow: si.Workflow, Key: records.KeyJSON(si.Key),
			Status: si.Status, Reason: si.Reason, FaultSeq: si.FaultSeq, New: si.New})
	}
	for _, c := range r.Allowlist {
		o.Allowlist = append(o.Allowlist, AllowlistChange{Workflow: c.Workflow, Old: c.Old, New: c.New,
			Added: nonNil(c.Added), Removed: nonNil(c.Removed)})
	}
	for _, d := range r.Deltas {
		v := ShadowDelta{Workflow: d.Workflow, Stepped: d.Stepped, Created: d.Created, Changed: d.Changed,
			Deleted: d.Deleted, Unchanged: d.Unchanged, Keys: []ShadowKeyDelta{}}
		for _, k := range d.Keys {
			v.Keys = append(v.Keys, ShadowKeyDelta{Key: records.KeyJSON(k.Key), Change: k.Change, Before: k.Before, After: k.After})
		}
		o.Deltas = append(o.Deltas, v)
	}
	return o
}

func shadowIntents(its []kernel.ShadowIntent) []ShadowIntent {
	out := make([]ShadowIntent, len(its))
	for i, it := range its {
		out[i] = ShadowIntent{Seq: it.Seq, Intent: it.Hash, Effect: it.Effect, Workflow: it.Workflow,
			Key: records.KeyJSON(it.Key), EmittedAt: it.EmittedAt}
	}
	return out
}

// Shadow implements Reader over POST /v1/shadow. A refusal that carries
// a report (not_quiescent, invalid_manifest) returns it beside the error.
func (c *Client) Shadow(ctx context.Context, req ShadowRequest) (*ShadowOutput, error) {
	var out ShadowOutput
	if err := c.call(ctx, "POST", "/v1/shadow", req, &out); err != nil {
		if out.Apply != nil {
			return &out, err
		}
		return nil, err
	}
	return &out, nil
}

// shadowRefusal is the body of a refused shadow: its report and the error.
type shadowRefusal struct {
	*ShadowOutput
	Err *Error `json:"error"`
}

// shadowRoute is POST /v1/shadow. It reads its body as apply does (up to
// DefaultMaxApplyBytes: it may carry wasm artifacts), and a refusal that
// comes with a report answers both.
func (s *Server) shadowRoute(w http.ResponseWriter, r *http.Request) {
	var req ShadowRequest
	raw, err := s.readBody(w, r, max(s.MaxBodyBytes, DefaultMaxApplyBytes))
	if err == nil {
		err = body{into: &req, shape: `body is not {"files": [{"name", "content" | "base64"}] | "path", "events"?: [{"schema", "value", "idempotency_key"?}], "window"?, "list"?}`}.decode(raw)
	}
	if err != nil {
		s.fail(w, err, "request body")
		return
	}
	out, err := s.Backend.Shadow(r.Context(), req)
	if err != nil {
		e := AsError(err, "shadow")
		if out != nil {
			writeJSON(w, e.Status, shadowRefusal{ShadowOutput: out, Err: e})
			return
		}
		s.fail(w, e, "shadow")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// ParseEvents reads events for a shadow: a JSON array of {"schema",
// "value", "idempotency_key"?} objects, or such objects one after another
// (JSON lines). name names the source in errors, which give the event's
// place and byte offset. It reads them as POST /v1/events reads its body
// (the jsonx Scanner, readEvent): exact keys, no key twice, nothing after
// the array, no lone surrogate escapes.
func ParseEvents(name string, data []byte) ([]Event, error) {
	var sc jsonx.Scanner
	if err := sc.Reset(data, jsonx.Options{MaxDepth: views.MaxDepth}); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", kernel.ErrInvalid, name, views.Problem(err))
	}
	bad := func(i int, err error) error {
		return fmt.Errorf("%w: %s: event %d: %v; want {\"schema\": NAME, \"value\": JSON, \"idempotency_key\"?: KEY}",
			kernel.ErrInvalid, name, i, views.Problem(err))
	}
	in := eventsBody{emptyKey: -1}
	if c, ok := sc.Peek(); ok && c == '[' {
		err := sc.Array("an array of events", func(i int) error {
			in.events = append(in.events, Event{})
			if err := in.read(&sc, i); err != nil {
				return bad(i, err)
			}
			return nil
		})
		switch {
		case errors.Is(err, kernel.ErrInvalid):
			return nil, err
		case err != nil:
			return nil, fmt.Errorf("%w: %s: not a JSON array of events: %v", kernel.ErrInvalid, name, views.Problem(err))
		}
		if err := sc.End(); err != nil {
			return nil, fmt.Errorf("%w: %s: data after the array of events: %v", kernel.ErrInvalid, name, views.Problem(err))
		}
	} else {
		for i := 0; ; i++ {
			if _, more := sc.Peek(); !more {
				break
			}
			in.events = append(in.events, Event{})
			if err := in.read(&sc, i); err != nil {
				return nil, bad(i, err)
			}
		}
	}
	for i, ev := range in.events {
		switch {
		case ev.Schema == "":
			return nil, fmt.Errorf("%w: %s: event %d has no schema", kernel.ErrInvalid, name, i)
		case len(ev.Value) == 0:
			return nil, fmt.Errorf("%w: %s: event %d (%s) has no value", kernel.ErrInvalid, name, i, ev.Schema)
		case i == in.emptyKey:
			return nil, fmt.Errorf("%w: %s: event %d (%s): idempotency_key is empty; omit it", kernel.ErrInvalid, name, i, ev.Schema)
		}
	}
	if in.events == nil {
		return []Event{}, nil
	}
	return in.events, nil
}
