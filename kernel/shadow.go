package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Shadow (DESIGN.md §9, `aosd shadow`): run a proposed manifest against a
// copy of the world and report what it did, bounded to what actually
// executed. The copy is a scratch world (ScratchStores) over the live
// stores: everything it writes stays in memory, and it has no publisher,
// so its effects are observed and never executed and no receipt ever
// reaches it. The proposed manifest is applied in the copy exactly as
// apply would (refused, with the blockers, unless the copy is quiescent),
// then the inputs are submitted:
//
//   - given events, to the copy of the world at its current height; or
//   - a window: the last N ingress events of the journal (events from
//     outside, not emitted by steps), re-fed in journal order with their
//     original stamps' time and entropy and their idempotency keys, to
//     the copy of the world as it stood just before the first of them.
//     Nothing else in the window is re-fed: receipts, frames and drops
//     answered the live world's intents, not the shadow's; recovers,
//     manifest and limits changes were the live operator's. The report
//     counts them.

// Shadow defaults.
const (
	// DefaultShadowWindow is how many ingress events a shadow re-feeds
	// when it is given no events and no window.
	DefaultShadowWindow = 1000
	// DefaultShadowList caps each list of a shadow report (intents,
	// instances, refusals, keys per workflow); the totals are always whole.
	DefaultShadowList = 20
)

// ShadowRequest says what to shadow.
type ShadowRequest struct {
	Manifest *manifest.Manifest // the proposed manifest
	// Events, when given, are submitted after the apply, to the copy of
	// the world at its current height. Without them the last Window
	// ingress events of the journal are re-fed.
	Events []Event
	Window int // 0: DefaultShadowWindow; only without Events
	List   int // 0: DefaultShadowList
}

// ShadowReport is what a shadow run did.
type ShadowReport struct {
	Height uint64 // the live journal height the copy was taken at
	// Start is the seq the copy starts from: it is the live world as of
	// that record (0: an empty world). Height with given events; just
	// before the window's first event otherwise.
	Start  uint64
	Opened OpenInfo     // how the copy was rebuilt up to Start
	Apply  *ApplyResult // the apply in the copy (BlockedBy when refused)
	Inputs ShadowInputs
	// Effects are the intents the copy opened after the apply, in journal
	// order (the first List of them).
	Effects      []ShadowIntent
	EffectsTotal int
	ByEffect     []EffectCount // every intent opened, counted by effect
	// Pending are the intents in flight at the end (the first List, in
	// the order they were opened).
	Pending      []ShadowIntent
	PendingTotal int
	Instances    InstanceCounts // the copy's instances at the end
	// NotCompleted are the instances not at rest at the end (the first
	// List, by workflow and key bytes).
	NotCompleted      []ShadowInstance
	NotCompletedTotal int
	// Allowlist lists the workflows whose effects_emitted the proposed
	// manifest changes (a workflow only in one manifest counts, with an
	// empty list in the other).
	Allowlist []AllowlistChange
	// Deltas are the cells the copy stepped after the apply, by workflow
	// (sorted by name).
	Deltas []ShadowDelta
}

// ShadowInputs says what was submitted to the copy.
type ShadowInputs struct {
	Source string // "events" or "window"
	Window int    // the window asked for (Source "window")
	// Events is how many events were to be submitted: those given, or the
	// ingress events the window found (fewer than Window when the journal
	// holds fewer).
	Events int
	// From and To are the live seqs of the window's first and last events
	// (0 with given events or an empty window).
	From, To   uint64
	Submitted  int // journaled in the copy
	Duplicates int // answered as resends under a remembered idempotency key
	// Refused are the events the copy refused (the first List of them):
	// under the proposed manifest an event may be unknown or invalid.
	Refused      []ShadowRefusal
	RefusedTotal int
	// NotReplayed counts the window's records of the kinds a shadow does
	// not re-feed (receipt, drop, frame, recover, manifest, config).
	NotReplayed []KindCount
}

// ShadowRefusal is one event the copy refused.
type ShadowRefusal struct {
	Index  int    // its place among the events
	Seq    uint64 // its live seq (window only)
	Schema string
	Reason string
}

// KindCount counts records of one kind.
type KindCount struct {
	Kind  journal.Kind
	Count int
}

// EffectCount counts the intents opened for one effect.
type EffectCount struct {
	Effect string
	Count  int
}

// ShadowIntent is one intent the copy opened.
type ShadowIntent struct {
	Seq      uint64 // its intent record in the copy's journal (Effects only)
	Hash     schemas.Hash
	Effect   string
	Workflow string
	Key      []byte // canonical CBOR; nil for an unkeyed workflow
	// EmittedAt is the seq of the step that opened it, in the copy's journal.
	EmittedAt uint64
}

// ShadowInstance is one instance not at rest at the end of a shadow run.
type ShadowInstance struct {
	Workflow string
	Key      []byte
	Status   string // StatusWaiting or StatusFailed
	Reason   string // the fault, when failed
	FaultSeq uint64 // the fault record, when failed
	// New: the status arose in the shadow run (every waiting instance
	// does, as the apply needed quiescence; a failed one when its fault
	// is after the apply).
	New bool
}

// AllowlistChange is one workflow's effects_emitted, before and after.
type AllowlistChange struct {
	Workflow       string
	Old, New       []string // sorted; nil when the workflow is not in that manifest
	Added, Removed []string
}

// ShadowDelta is what the shadow run did to one workflow's cells.
type ShadowDelta struct {
	Workflow string
	Stepped  int // cells stepped after the apply
	Created  int
	Changed  int
	Deleted  int
	// Unchanged: stepped, and left as it was (or stepped to no state
	// from none).
	Unchanged int
	Keys      []ShadowKeyDelta // the first List cells created, changed or deleted, in the order first stepped
}

// ShadowKeyDelta is one cell's state before the run and after it.
type ShadowKeyDelta struct {
	Key    []byte
	Change string        // "created", "changed" or "deleted"
	Before *schemas.Hash // nil: no cell
	After  *schemas.Hash // nil: no cell
}

// Cell changes a ShadowKeyDelta names.
const (
	CellCreated = "created"
	CellChanged = "changed"
	CellDeleted = "deleted"
)

// notReplayedKinds are the record kinds a window holds that a shadow does
// not re-feed, in the order the report lists them.
var notReplayedKinds = []journal.Kind{journal.KindReceipt, journal.KindDrop, journal.KindFrame,
	journal.KindRecover, journal.KindManifest, journal.KindConfig, journal.KindModule, journal.KindRetire}

// Shadow runs req against a copy of the world at its current height and
// reports what the copy did. The world itself is untouched: the copy
// writes only to memory. When the copy is not quiescent where the
// manifest is applied, the report holds the refused apply (its blockers)
// and the error wraps ErrNotQuiescent.
func (w *World) Shadow(ctx context.Context, req ShadowRequest) (*ShadowReport, error) {
	switch {
	case req.Manifest == nil:
		return nil, fmt.Errorf("%w: shadow: no manifest given", ErrInvalid)
	case req.Window < 0:
		return nil, fmt.Errorf("%w: shadow: window %d: want a positive number of ingress events", ErrInvalid, req.Window)
	case req.List < 0:
		return nil, fmt.Errorf("%w: shadow: list %d: want a positive cap", ErrInvalid, req.List)
	case len(req.Events) > 0 && req.Window > 0:
		return nil, fmt.Errorf("%w: shadow: give events or a window, not both", ErrInvalid)
	}
	if req.List == 0 {
		req.List = DefaultShadowList
	}
	if err := w.Sync(ctx); err != nil {
		return nil, err
	}
	s := Stores{CAS: w.cas, Journal: w.journal}
	rep := &ShadowReport{Height: w.journal.Height()}
	var feed []windowEvent
	cfg := w.cfg
	if len(req.Events) > 0 {
		rep.Start = rep.Height
		rep.Inputs = ShadowInputs{Source: "events", Events: len(req.Events)}
	} else {
		n := req.Window
		if n == 0 {
			n = DefaultShadowWindow
		}
		win, err := findWindow(s.Journal, rep.Height, n)
		if err != nil {
			return nil, fmt.Errorf("shadow: find the window of %d ingress events: %w", n, err)
		}
		feed = win.events
		rep.Start = win.start
		rep.Inputs = ShadowInputs{Source: "window", Window: n, Events: len(feed), NotReplayed: win.notReplayed}
		if len(feed) > 0 {
			rep.Inputs.From, rep.Inputs.To = feed[0].seq, feed[len(feed)-1].seq
		}
		stamps := &stampReplay{}
		cfg.Clock, cfg.Entropy = stamps, stamps
		for i := range feed {
			feed[i].stamps = stamps
		}
	}
	// A copy from before the world record of a world made before
	// identities existed takes the world's identity, as the world's own
	// intents now would.
	cfg.borrowedWorld = w.identity
	cw, err := openCopy(s, cfg, rep.Start)
	if err != nil {
		return nil, fmt.Errorf("shadow: open the copy as of seq %d: %w", rep.Start, err)
	}
	defer cw.Close()
	rep.Opened = cw.OpenInfo()
	return rep, cw.runShadow(ctx, req, feed, rep)
}

// openCopy opens a scratch world that is the live one as of seq start:
// no publisher, executors or keys, no snapshots, the journal's limits.
func openCopy(s Stores, cfg Config, start uint64) (*World, error) {
	cfg = scratchConfig(cfg)
	if p := cfg.Progress; p != nil {
		cfg.Progress = func(label string, total uint64) ProgressBar { return p("shadow: "+label, total) }
	}
	return Open(ScratchStores(s, start), cfg)
}

// runShadow is the run on the copy w: apply, submit, report.
func (w *World) runShadow(ctx context.Context, req ShadowRequest, feed []windowEvent, rep *ShadowReport) error {
	rep.Allowlist = allowlistChanges(w.Manifest(), req.Manifest)
	res, err := w.Apply(ctx, req.Manifest, false)
	rep.Apply = res
	if err != nil {
		if errors.Is(err, ErrNotQuiescent) {
			where := fmt.Sprintf("at seq %d, the live height", rep.Start)
			if rep.Inputs.Source == "window" {
				where = fmt.Sprintf("at seq %d, just before the window's first ingress event (seq %d)", rep.Start, rep.Inputs.From)
			}
			return fmt.Errorf("%w %s, where the shadow applies the manifest: apply refused (%d blockers)", ErrNotQuiescent, where, len(res.BlockedBy))
		}
		return fmt.Errorf("shadow: apply %s in the copy: %w", req.Manifest.Name, err)
	}
	mark := w.journal.Height() // the records after it are the shadow run's
	before, err := w.State(ctx)
	if err != nil {
		return fmt.Errorf("shadow: the copy's state after the apply: %w", err)
	}
	if rep.Inputs.Source == "window" {
		err = w.feedWindow(ctx, feed, &rep.Inputs, req.List)
	} else {
		err = w.feedEvents(ctx, req.Events, &rep.Inputs, req.List)
	}
	if err != nil {
		return err
	}
	after, err := w.State(ctx)
	if err != nil {
		return fmt.Errorf("shadow: the copy's state at the end: %w", err)
	}
	st, err := w.Status(ctx)
	if err != nil {
		return fmt.Errorf("shadow: the copy's status at the end: %w", err)
	}
	rep.Instances = st.Instances
	for _, in := range after.Instances {
		si := ShadowInstance{Workflow: in.Workflow, Key: in.Key, Status: in.Status, New: true}
		if f := in.Fault; f != nil {
			si.Reason, si.FaultSeq, si.New = f.Reason, f.Seq, f.Seq > mark
		}
		rep.NotCompletedTotal++
		if len(rep.NotCompleted) < req.List {
			rep.NotCompleted = append(rep.NotCompleted, si)
		}
	}
	pending := make([]ShadowIntent, 0, len(after.Intents))
	for _, it := range after.Intents {
		pending = append(pending, ShadowIntent{Hash: it.Intent.Hash, Effect: it.Intent.Effect,
			Workflow: it.Intent.OriginWorkflow, Key: it.Intent.OriginKey, EmittedAt: it.Intent.EmittedAt})
	}
	sort.SliceStable(pending, func(i, j int) bool { return pending[i].EmittedAt < pending[j].EmittedAt })
	rep.PendingTotal = len(pending)
	rep.Pending = pending[:min(len(pending), req.List)]
	roots := map[string]schemas.Hash{}
	for _, wf := range before.Workflows {
		roots[wf.Name] = wf.Root
	}
	return w.reportTail(mark, roots, req.List, rep)
}

// feedEvents submits the given events one by one, so a refused event is
// reported and the ones after it still run.
func (w *World) feedEvents(ctx context.Context, evs []Event, in *ShadowInputs, list int) error {
	for i, ev := range evs {
		if err := w.feedOne(ctx, ev, in, list, ShadowRefusal{Index: i, Schema: ev.Schema}); err != nil {
			return fmt.Errorf("shadow: event %d (%s): %w", i, ev.Schema, err)
		}
	}
	return nil
}

// feedWindow re-feeds the window's ingress events, each stamped with its
// original time and entropy.
func (w *World) feedWindow(ctx context.Context, feed []windowEvent, in *ShadowInputs, list int) error {
	for i := range feed {
		e := &feed[i]
		e.stamps.set(e.stamp)
		ev := Event{Schema: e.schema, CBOR: e.value, IdempotencyKey: e.key}
		if err := w.feedOne(ctx, ev, in, list, ShadowRefusal{Index: i, Seq: e.seq, Schema: e.schema}); err != nil {
			return fmt.Errorf("shadow: re-feed the event at live seq %d (%s): %w", e.seq, e.schema, err)
		}
	}
	return nil
}

// feedOne submits one event. A refusal of the event (invalid under the
// proposed manifest, an idempotency conflict) is reported; any other
// error ends the run.
func (w *World) feedOne(ctx context.Context, ev Event, in *ShadowInputs, list int, r ShadowRefusal) error {
	res, err := w.Ingest(ctx, ev)
	switch {
	case err == nil:
		in.Submitted++
		if res[0].Duplicate {
			in.Duplicates++
		}
		return nil
	case errors.Is(err, ErrInvalid) || errors.Is(err, ErrIdempotencyConflict):
		in.RefusedTotal++
		if len(in.Refused) < list {
			r.Reason = err.Error()
			in.Refused = append(in.Refused, r)
		}
		return nil
	default:
		return err
	}
}

// reportTail reads the copy's records after mark: the intents opened and
// the cells stepped, whose states before the run are looked up in the
// indexes at roots (the copy's cells right after the apply).
func (w *World) reportTail(mark uint64, roots map[string]schemas.Hash, list int, rep *ShadowReport) error {
	type touched struct {
		wf    string
		key   []byte
		after *schemas.Hash
	}
	var order []*touched
	byID := map[string]*touched{}
	byEffect := map[string]int{}
	err := w.journal.Read(mark+1, func(r journal.Record) (bool, error) {
		switch r.Kind {
		case journal.KindIntent:
			var it records.IntentRec
			if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
				return false, fmt.Errorf("intent record %d: %w", r.Seq, err)
			}
			byEffect[it.Effect]++
			rep.EffectsTotal++
			if len(rep.Effects) < list {
				rep.Effects = append(rep.Effects, ShadowIntent{Seq: r.Seq, Hash: it.Hash, Effect: it.Effect,
					Workflow: it.OriginWorkflow, Key: it.OriginKey, EmittedAt: it.EmittedAt})
			}
		case journal.KindStep:
			var sr records.StepRec
			if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
				return false, fmt.Errorf("step record %d: %w", r.Seq, err)
			}
			id := instanceID(sr.Workflow, sr.Key)
			t := byID[id]
			if t == nil {
				t = &touched{wf: sr.Workflow, key: sr.Key}
				byID[id] = t
				order = append(order, t)
			}
			t.after = sr.StateHash
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("shadow: read the copy's journal after seq %d: %w", mark, err)
	}
	for _, e := range slices.Sorted(maps.Keys(byEffect)) {
		rep.ByEffect = append(rep.ByEffect, EffectCount{Effect: e, Count: byEffect[e]})
	}
	deltas := map[string]*ShadowDelta{}
	indexes := map[string]*cells.CellIndex{}
	for _, t := range order {
		d := deltas[t.wf]
		if d == nil {
			d = &ShadowDelta{Workflow: t.wf}
			deltas[t.wf] = d
			if root := roots[t.wf]; !root.IsZero() {
				ix, err := cells.LoadIndex(w.cas, root)
				if err != nil {
					return fmt.Errorf("shadow: the cells of %s before the run (index %s): %w", t.wf, root, err)
				}
				indexes[t.wf] = ix
			}
		}
		var before *schemas.Hash
		if ix := indexes[t.wf]; ix != nil {
			e, ok, err := ix.Lookup(t.key)
			if err != nil {
				return fmt.Errorf("shadow: the cell of %s key %s before the run: %w", t.wf, keyText(t.key), err)
			}
			if ok {
				h := e.StateHash
				before = &h
			}
		}
		d.Stepped++
		change := cellChange(before, t.after)
		switch change {
		case CellCreated:
			d.Created++
		case CellChanged:
			d.Changed++
		case CellDeleted:
			d.Deleted++
		default:
			d.Unchanged++
			continue
		}
		if len(d.Keys) < list {
			d.Keys = append(d.Keys, ShadowKeyDelta{Key: t.key, Change: change, Before: before, After: t.after})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(deltas)) {
		rep.Deltas = append(rep.Deltas, *deltas[n])
	}
	return nil
}

// cellChange names what happened to a cell between two state hashes (nil:
// no cell); "" when nothing did.
func cellChange(before, after *schemas.Hash) string {
	switch {
	case before == nil && after != nil:
		return CellCreated
	case before != nil && after == nil:
		return CellDeleted
	case before != nil && *before != *after:
		return CellChanged
	}
	return ""
}

// allowlistChanges compares each workflow's effects_emitted in old (nil:
// no manifest) and new.
func allowlistChanges(old, new *manifest.Manifest) []AllowlistChange {
	effects := func(m *manifest.Manifest, wf string) []string {
		if m == nil || m.Workflows[wf] == nil {
			return nil
		}
		return slices.Sorted(slices.Values(m.Workflows[wf].EffectsEmitted))
	}
	names := map[string]bool{}
	for _, m := range []*manifest.Manifest{old, new} {
		if m != nil {
			for n := range m.Workflows {
				names[n] = true
			}
		}
	}
	var out []AllowlistChange
	for _, n := range slices.Sorted(maps.Keys(names)) {
		a, b := effects(old, n), effects(new, n)
		c := AllowlistChange{Workflow: n, Old: a, New: b, Added: missingFrom(b, a), Removed: missingFrom(a, b)}
		if len(c.Added) > 0 || len(c.Removed) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// missingFrom lists the elements of xs that ys lacks.
func missingFrom(xs, ys []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(ys, x) {
			out = append(out, x)
		}
	}
	return out
}

// windowEvent is one ingress event of the journal, to re-feed.
type windowEvent struct {
	seq    uint64
	schema string
	value  []byte
	key    string
	stamp  records.Stamp
	stamps *stampReplay
}

// window is where a shadow's window starts and what it holds.
type window struct {
	start       uint64 // the copy is the world as of this seq
	events      []windowEvent
	notReplayed []KindCount
}

// findWindow finds the last n ingress events at or below height. It reads
// the journal backwards a checkpoint's segment at a time (checkpoints are
// indexed, records are read forwards), so it reads about the window and
// one segment, not the whole journal.
func findWindow(log Log, height uint64, n int) (window, error) {
	var marks []uint64
	err := log.Marks(journal.KindCheckpoint, func(seq uint64) (bool, error) {
		if seq <= height {
			marks = append(marks, seq)
		}
		return true, nil
	})
	if err != nil {
		return window{}, err
	}
	first := max(log.First(), 1)
	marks = append(marks, first) // the last segment starts where the journal does
	type other struct {
		seq  uint64
		kind journal.Kind
	}
	var evs []windowEvent // newest segment last
	var others []other
	end := height
	for _, from := range marks {
		if len(evs) >= n {
			break
		}
		if from > end {
			continue // a checkpoint already read (the journal's first seq can be one)
		}
		var seg []windowEvent
		var segOthers []other
		err := log.Read(from, func(r journal.Record) (bool, error) {
			if r.Seq > end {
				return false, nil
			}
			switch {
			case r.Kind == journal.KindEvent:
				var ev records.EventRec
				if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
					return false, fmt.Errorf("event record %d: %w", r.Seq, err)
				}
				if ev.Origin == nil {
					seg = append(seg, windowEvent{seq: r.Seq, schema: ev.Schema, value: ev.Value, key: ev.IdempotencyKey, stamp: ev.Stamp})
				}
			case slices.Contains(notReplayedKinds, r.Kind):
				segOthers = append(segOthers, other{r.Seq, r.Kind})
			}
			return r.Seq < end, nil
		})
		if err != nil {
			return window{}, err
		}
		evs = append(seg, evs...)
		others = append(others, segOthers...)
		end = from - 1
	}
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	win := window{start: height, events: evs}
	if len(evs) > 0 {
		win.start = evs[0].seq - 1
	}
	counts := map[journal.Kind]int{}
	for _, o := range others {
		if o.seq > win.start {
			counts[o.kind]++
		}
	}
	for _, k := range notReplayedKinds {
		if counts[k] > 0 {
			win.notReplayed = append(win.notReplayed, KindCount{Kind: k, Count: counts[k]})
		}
	}
	return win, nil
}

// stampReplay is the clock and entropy of a window's re-feed: each event
// is stamped with the time and entropy the live world stamped it with, so
// workflows that read them decide as they did live. The events go in one
// at a time, so set before each submit is what its stamp reads.
type stampReplay struct {
	mu      sync.Mutex
	now     uint64
	entropy []byte
}

var (
	_ Clock   = (*stampReplay)(nil)
	_ Entropy = (*stampReplay)(nil)
)

func (s *stampReplay) set(st records.Stamp) {
	s.mu.Lock()
	s.now, s.entropy = st.NowNs, st.Entropy
	s.mu.Unlock()
}

// NowNs implements Clock.
func (s *stampReplay) NowNs() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Fill implements Entropy.
func (s *stampReplay) Fill(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copy(p, s.entropy)
}
