package views

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/wI2L/jsondiff"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// A cell's timeline for the inspector (GET /v1/timeline/{workflow}/{key}):
// the trace's entries one page at a time, each step with the state it left
// and the JSON Patch from the state it started from. A page scans the
// journal from its cursor and stops once it is full; its states come from
// the store where it keeps them (the CAS, or the live cell for the state
// the cell holds now), and the others are recomputed in one replay
// (kernel.CellHistory), so a page costs a page of state reads, plus, when
// states must be recomputed, the records from the nearest usable snapshot
// before the page's first step to its last.

// Timeline page sizes.
const (
	DefaultTimelinePage = 100
	MaxTimelinePage     = 1000
)

// Where a timeline step's state came from (TimelineEntry.StateSource).
const (
	StateFromCAS         = "cas"         // read from the CAS by its hash
	StateFromLive        = "live"        // the state the cell holds now, read from the world
	StateRecomputed      = "recomputed"  // recomputed by replaying the journal (kernel.CellHistory)
	StateNone            = "none"        // the step left no state (the cell was deleted, or never had one)
	StateUnavailable     = "unavailable" // none of the above could give it; StateReason says why
	timelineKeyStateNull = "null"
)

// TimelineQuery selects one page of a cell's timeline.
type TimelineQuery struct {
	After uint64 // entries after this seq (0: from the start)
	Limit int    // entries: 0 for DefaultTimelinePage, at most MaxTimelinePage
}

// TimelineEntry is a trace entry and, for a step, its state: State the
// state after the step as JSON (null when it left none), Diff the RFC 6902
// JSON Patch from the state the step started from to State (absent when
// either is not known), StateSource where State came from, StateReason why
// it is unavailable.
type TimelineEntry struct {
	TraceEntry
	State       json.RawMessage `json:"state,omitempty"`
	Diff        json.RawMessage `json:"diff,omitempty"`
	StateSource string          `json:"state_source,omitempty"`
	StateReason string          `json:"state_reason,omitempty"`
}

// TimelinePage is one page of a timeline; Next, present when the page is
// full, is the After of the next page (which may be empty).
type TimelinePage struct {
	Entries []TimelineEntry `json:"entries"`
	Next    *uint64         `json:"next,omitempty"`
	// First, present once retention (aosd gc --drop-journal) dropped the
	// journal's oldest records, is the lowest seq it holds: the timeline
	// reaches back to there, not to the cell's beginning.
	First uint64 `json:"first,omitempty"`
}

// Timelines pages through the timelines of a world's cells. It keeps,
// between pages, the intents of the cells paged recently (so paging on scans
// the journal only from where the page before ended); the replays that
// recompute states run one at a time on the world's own wasm engine. Its
// zero value is ready; Close ends the replays. Safe for concurrent use.
type Timelines struct {
	hist historian   // the replays that recompute states
	seen intentsSeen // the intents of cells whose timelines were paged
}

// World is what a timeline reads of a world: its journal and CAS, and a
// cell as the world holds it now (*kernel.World has them).
type World interface {
	Journal() kernel.Log
	CAS() cas.Store
	Cell(ctx context.Context, workflow string, key []byte) (*kernel.CellView, error)
}

// Page is one page of the timeline of the cell of workflow and key
// (canonical CBOR) in w: q.Limit entries at most (0: DefaultTimelinePage;
// the caller keeps it to MaxTimelinePage) after seq q.After. States that
// must be recomputed are, by a replay with cfg, the configuration w runs
// with (its builtins and wasm engine).
func (t *Timelines) Page(ctx context.Context, w World, cfg kernel.Config, workflow string, key []byte, q TimelineQuery) (*TimelinePage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultTimelinePage
	}
	log := w.Journal()
	var known []schemas.Hash
	if q.After > 0 {
		var err error
		if known, err = t.cellIntents(ctx, log, workflow, key, q.After); err != nil {
			return nil, err
		}
	}
	first := log.First()
	es, full, err := records.TracePage(ctx, log, workflow, key, q.After, limit, known)
	if err != nil {
		return nil, err
	}
	page := &TimelinePage{Entries: make([]TimelineEntry, len(es))}
	if first > 1 {
		page.First = first
	}
	tv := TraceView(es)
	if err := StampTimes(ctx, log, tv); err != nil {
		return nil, err
	}
	for i, e := range tv {
		page.Entries[i].TraceEntry = e
	}
	if full && len(es) > 0 {
		next := es[len(es)-1].Seq
		page.Next = &next
	}
	// Before the first entry: the state is known to be none only when the
	// page starts at the cell's very beginning.
	startsEmpty := q.After == 0 && log.First() <= 1
	if err := t.states(ctx, w, cfg, workflow, key, page.Entries, startsEmpty); err != nil {
		return nil, err
	}
	return page, nil
}

// intentsSeen remembers, for the cells whose timelines were paged
// recently, the intents each opened up to a seq: paging on scans the
// journal only from there. Holding more intents than those opened before
// a page's start is harmless (an intent's records follow it), so one entry
// serves any page that starts at or before its seq.
type intentsSeen struct {
	mu    sync.Mutex
	cells *lru.Cache[string, cellIntents]
}

type cellIntents struct {
	upTo    uint64
	intents []schemas.Hash
}

// intentsSeenCells bounds the cells intentsSeen remembers.
const intentsSeenCells = 1024

// cellIntents returns the intents the cell opened up to seq upTo (and
// perhaps some after), scanning only what the cell's entry has not seen.
func (t *Timelines) cellIntents(ctx context.Context, log kernel.Log, workflow string, key []byte, upTo uint64) ([]schemas.Hash, error) {
	c := &t.seen
	id := workflow + "\x00" + string(key)
	c.mu.Lock()
	if c.cells == nil {
		c.cells, _ = lru.New[string, cellIntents](intentsSeenCells)
	}
	e, _ := c.cells.Get(id)
	c.mu.Unlock()
	if e.upTo >= upTo {
		return e.intents, nil
	}
	more, err := records.InstanceIntents(ctx, log, workflow, key, e.upTo+1, upTo)
	if err != nil {
		return nil, err
	}
	e = cellIntents{upTo: upTo, intents: append(slices.Clip(e.intents), more...)}
	c.mu.Lock()
	if old, ok := c.cells.Get(id); !ok || old.upTo < e.upTo {
		c.cells.Add(id, e)
	}
	c.mu.Unlock()
	return e.intents, nil
}

// stepState is what a timeline knows of one step's state.
type stepState struct {
	state  []byte // canonical CBOR; nil: none or not known
	known  bool
	source string
	reason string
}

// states gives each step entry its state, source and diff.
func (t *Timelines) states(ctx context.Context, w World, cfg kernel.Config, workflow string, key []byte, es []TimelineEntry, startsEmpty bool) error {
	var steps []int // indexes of step entries
	for i := range es {
		if es[i].Kind == journal.KindStep {
			steps = append(steps, i)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	var live *kernel.CellView
	if v, err := w.Cell(ctx, workflow, key); err == nil {
		live = v
	}
	got := make([]stepState, len(es))
	var missing []int
	for _, i := range steps {
		h := es[i].StateHash
		if h == nil {
			got[i] = stepState{known: true, source: StateNone}
			continue
		}
		if live != nil && live.StateHash != nil && *live.StateHash == *h {
			got[i] = stepState{state: live.State, known: true, source: StateFromLive}
			continue
		}
		b, err := w.CAS().Get(*h)
		switch {
		case err == nil:
			got[i] = stepState{state: b, known: true, source: StateFromCAS}
		case errors.Is(err, cas.ErrNotFound):
			missing = append(missing, i)
		default:
			return err
		}
	}
	// The state the first step started from: none at the cell's beginning,
	// else only a replay knows it.
	first := steps[0]
	var firstPrev *stepState
	if startsEmpty {
		firstPrev = &stepState{known: true}
	}
	if len(missing) > 0 || firstPrev == nil {
		from, to := es[first].Seq, es[first].Seq
		if len(missing) > 0 {
			to = es[missing[len(missing)-1]].Seq
			if firstPrev != nil {
				from = es[missing[0]].Seq
			}
		}
		hist, err := t.history(ctx, w, cfg, kernel.HistoryQuery{Workflow: workflow, Key: key, From: from, To: to})
		bySeq := map[uint64]kernel.HistoryStep{}
		if err == nil {
			for _, s := range hist.Steps {
				bySeq[s.Seq] = s
			}
		}
		for _, i := range missing {
			s, ok := bySeq[es[i].Seq]
			switch {
			case err != nil:
				got[i] = stepState{source: StateUnavailable, reason: "recomputing it failed: " + err.Error()}
			case !ok:
				got[i] = stepState{source: StateUnavailable, reason: fmt.Sprintf("replay did not reach step %d of this cell", es[i].Seq)}
			case s.State == nil || schemas.HashBytes(s.State) != *es[i].StateHash:
				got[i] = stepState{source: StateUnavailable, reason: fmt.Sprintf("replay recomputed another state for step %d", es[i].Seq)}
			default:
				got[i] = stepState{state: s.State, known: true, source: StateRecomputed}
			}
		}
		if s, ok := bySeq[es[first].Seq]; ok && firstPrev == nil {
			firstPrev = &stepState{state: s.Prev, known: true}
		}
	}
	prev := stepState{}
	if firstPrev != nil {
		prev = *firstPrev
	}
	for i := range es {
		e := &es[i]
		switch e.Kind {
		case journal.KindRecover:
			if e.Action == "reset" {
				prev = stepState{known: true} // the cell was deleted
			}
			continue
		case journal.KindStep:
		default:
			continue
		}
		g := got[i]
		e.StateSource, e.StateReason = g.source, g.reason
		if g.known {
			js, err := stateJSON(g.state)
			if err != nil {
				e.StateSource, e.StateReason = StateUnavailable, fmt.Sprintf("state %s has no JSON form: %v", e.StateHash, err)
				g.known = false
			} else {
				e.State = js
			}
		}
		if g.known && prev.known {
			d, err := stateDiff(prev.state, g.state)
			if err != nil {
				return fmt.Errorf("diff of step %d: %w", e.Seq, err)
			}
			e.Diff = d
		}
		prev = g
	}
	return nil
}

// historian runs the replays timelines recompute states with, one at a
// time (each takes a core while it runs), on the world's wasm engine
// (the Config.Wasm it is given), so that a replay does not load the world's compiled
// modules again.
type historian struct {
	mu     sync.Mutex
	closed bool
}

// history recomputes a cell's states (kernel.CellHistory) with the world's
// configuration, its engine included (Config.Wasm: the world's).
func (t *Timelines) history(ctx context.Context, w World, cfg kernel.Config, q kernel.HistoryQuery) (*kernel.HistoryResult, error) {
	h := &t.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, kernel.ErrClosed
	}
	return kernel.CellHistory(ctx, kernel.Stores{CAS: w.CAS(), Journal: w.Journal()}, cfg, q)
}

// Close ends the replays timelines run beside the world; a Page after it
// recomputes no state (kernel.ErrClosed, given as each state's reason). The
// world and its engine are their owner's to close.
func (t *Timelines) Close() error {
	h := &t.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

// stateJSON renders a state as JSON: null for none.
func stateJSON(state []byte) (json.RawMessage, error) {
	if state == nil {
		return json.RawMessage(timelineKeyStateNull), nil
	}
	return schemas.ToJSON(state)
}

// stateDiff is the RFC 6902 JSON Patch that turns the state from into to
// (either nil: none, as JSON null), never null itself.
func stateDiff(from, to []byte) (json.RawMessage, error) {
	a, err := stateJSON(from)
	if err != nil {
		return nil, err
	}
	b, err := stateJSON(to)
	if err != nil {
		return nil, err
	}
	p, err := jsondiff.CompareJSON(bytes.TrimSpace(a), bytes.TrimSpace(b), exactNumbers)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 {
		return json.RawMessage("[]"), nil
	}
	return json.Marshal(p)
}

// exactNumbers has the diff read numbers as json.Number, not float64: a
// state's integers (nanosecond times, amounts) above 2^53 keep every digit
// in the patch.
var exactNumbers = jsondiff.UnmarshalFunc(func(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
})
