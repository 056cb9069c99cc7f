package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Live manifests and per-instance pins (DESIGN.md §9a, docs/upgrades.md).
//
// A plain apply is made at quiescence and leaves one live manifest: itself.
// An apply --pin (records.ManifestRec.Pin) makes its manifest current at once
// and keeps the one it replaces live: every instance then in flight (running
// or waiting) is pinned to it and steps under it, with its code, schemas,
// effect allowlist and router, until it is at rest again. An instance at
// rest on a manifest that is not current moves (its pin is dropped) when its
// state validates against the current state schema; otherwise it stays
// pinned, with a table entry saying why. A cell that was at rest when the
// apply came has no pin; at its next input it moves, or, when its state
// does not validate against the current state schema, it is pinned to the
// newest older live manifest that accepts the state and the input.
//
// Everything here follows from the journal alone: the manifest records (and
// their pin flag), the retire records and the steps; replay rebuilds it, and
// snapshots carry it (snapshot.State.Live, snapshot.Instance.Pin).
//
// The hot path pays one comparison: an instance's pin is nil while it is on
// the current manifest, and pinned counts the instances whose pin is set,
// so a world with no pins looks nothing up.

// Errors callers branch on.
var (
	// ErrPinned: an event routes to an instance pinned to an older manifest
	// that cannot take it. Nothing was journaled.
	ErrPinned = errors.New("kernel: the event cannot be delivered under the pin of its target")
	// ErrNotDrained: a retire of a manifest that instances are still pinned
	// to. Nothing was journaled.
	ErrNotDrained = errors.New("kernel: the manifest is not drained")
	// ErrNotLive: a retire of a manifest that is not live.
	ErrNotLive = errors.New("kernel: no such live manifest")
	// ErrRetireCurrent: a retire of the current manifest.
	ErrRetireCurrent = errors.New("kernel: the current manifest cannot be retired")
)

// liveManifest is one live manifest with everything bound for it.
type liveManifest struct {
	m      *manifest.Manifest
	router *routing.Router
	wfs    map[string]*wfRuntime
	mods   map[string]*boundModule
	text   string // m.Hash.String(), which every step's context carries
	seq    uint64 // the manifest record that applied it
}

// PinnedError is an event refused at ingress because a target is pinned to
// a manifest that cannot take it.
type PinnedError struct {
	Schema   string
	Workflow string
	Key      []byte
	Pin      schemas.Hash // the manifest the target is pinned to
	PinName  string
	Current  schemas.Hash
	Why      string
}

func (e *PinnedError) Error() string {
	return fmt.Sprintf("kernel: event %s for workflow %s key %s cannot be delivered: the cell is pinned to manifest %s (%s), not the current %s, and %s",
		e.Schema, e.Workflow, keyText(e.Key), e.PinName, e.Pin, e.Current, e.Why)
}

func (e *PinnedError) Unwrap() error { return ErrPinned }

// NotDrainedError lists what keeps a manifest from being retired.
type NotDrainedError struct {
	Hash     schemas.Hash
	Name     string
	Blockers []Blocker
}

func (e *NotDrainedError) Error() string {
	n := "1 instance is"
	if len(e.Blockers) != 1 {
		n = fmt.Sprintf("%d instances are", len(e.Blockers))
	}
	return fmt.Sprintf("kernel: manifest %s (%s) is not drained: %s pinned to it", e.Name, e.Hash, n)
}

func (e *NotDrainedError) Unwrap() error { return ErrNotDrained }

// manifestOf is the manifest in steps under.
func (st *state) manifestOf(in *instance) *liveManifest {
	if in.pin != nil {
		return in.pin
	}
	return st.cur
}

// pinTo pins in to lm (nil or the current manifest: unpinned).
func (st *state) pinTo(in *instance, lm *liveManifest, why string) {
	if lm == st.cur {
		lm = nil
	}
	switch {
	case in.pin == nil && lm != nil:
		st.pinned++
	case in.pin != nil && lm == nil:
		st.pinned--
	}
	in.pin, in.pinWhy = lm, why
	if lm == nil {
		in.pinWhy = ""
	}
}

// inFlight says whether in has work under way: mailbox work or intents.
func (in *instance) inFlight() bool {
	return !in.failed && (len(in.mailbox) > 0 || len(in.inflight) > 0)
}

// tryMove moves an instance at rest that is pinned to an older manifest to
// the current one when its state validates against the current state
// schema, or through the current workflow's declared migration (a journaled
// move, migrate.go); otherwise it stays pinned and pinWhy says why. It reports
// whether in is still pinned. The one place a pin is dropped; a later
// journaled move of a waiting instance (an upgrade) goes through pinTo too.
func (st *state) tryMove(in *instance) bool {
	if in.pin == nil {
		return false
	}
	if in.failed || in.inFlight() || len(in.parked) > 0 {
		return true
	}
	rt := st.cur.wfs[in.wf]
	if rt == nil {
		in.pinWhy = fmt.Sprintf("workflow %s is not in the current manifest %s", in.wf, st.cur.m.Name)
		return true
	}
	state, exists, err := rt.head.Get(in.key)
	if err != nil {
		st.stop("cell store read for "+in.wf, err)
		return true
	}
	if exists {
		old := in.pin.wfs[in.wf]
		if old == nil || stateSchemaOf(in.pin.m, old.def.State) != stateSchemaOf(st.cur.m, rt.def.State) {
			if verr := st.cur.m.Registry.Validate(rt.def.State, state); verr != nil {
				if rt.def.Migrate != nil {
					return st.moveMigrating(in, rt, state) // migrate.go
				}
				in.pinWhy = fmt.Sprintf("its state does not validate against %s of the current manifest %s (%s): %v",
					rt.def.State, st.cur.m.Name, st.cur.text, verr)
				return true
			}
		}
	}
	st.pinTo(in, nil, "")
	return false
}

// fallbackPin finds, for a cell at rest with no pin whose state does not
// validate against the current state schema, the newest older live manifest
// whose state schema accepts the state and which can take d, and d as that
// manifest's workflow takes it (its own event schema, variant arm: the
// current manifest may have renamed the event); nil when none does (the
// step then fails as it would with one live manifest).
func (st *state) fallbackPin(in *instance, state []byte, d *delivery) (*liveManifest, *delivery) {
	for i := len(st.live) - 2; i >= 0; i-- {
		lm := st.live[i]
		rt := lm.wfs[in.wf]
		if rt == nil || lm.m.Registry.Validate(rt.def.State, state) != nil {
			continue
		}
		if st.undeliverableUnder(lm, in.wf, "the input", d) == "" {
			return lm, d
		}
		if cur := st.cur.wfs[in.wf]; cur != nil && cur.def.Event != rt.def.Event {
			if value, why := reshape(st.cur, cur, lm, rt, d); why == "" {
				nd := *d
				nd.schema, nd.value = rt.def.Event, value
				return lm, &nd
			}
		}
	}
	return nil, d
}

// underPins checks the targets lm routed an event to against the manifest
// each target steps under, and shapes the event for those on another
// manifest as that manifest routes it. It returns the targets (a copy when
// any changed), or why one of them cannot take the event. A world with no
// pin, routing with the current manifest, pays two comparisons.
func (st *state) underPins(lm *liveManifest, schema string, value []byte, targets []routing.Target) ([]routing.Target, *PinnedError) {
	if st.pinned == 0 && lm == st.cur {
		return targets, nil
	}
	out := targets
	for i, t := range targets {
		tm := st.cur
		if st.pinned > 0 {
			if in := st.lookupInstance(t.Workflow, t.Key); in != nil && in.pin != nil {
				tm = in.pin
			}
		}
		if tm == lm {
			continue
		}
		nt, why := routedUnder(tm, schema, value, t)
		if why != "" {
			return nil, &PinnedError{Schema: schema, Workflow: t.Workflow, Key: t.Key, Pin: tm.m.Hash, PinName: tm.m.Name,
				Current: st.cur.m.Hash, Why: why}
		}
		if &out[0] == &targets[0] {
			out = slices.Clone(targets)
		}
		out[i] = nt
	}
	return out, nil
}

// routedUnder is t as manifest tm routes the event, or why tm cannot take
// it for t's instance.
func routedUnder(tm *liveManifest, schema string, value []byte, t routing.Target) (routing.Target, string) {
	if !tm.m.Registry.Has(schema) {
		return t, fmt.Sprintf("that manifest has no schema %s", schema)
	}
	if err := tm.m.Registry.Validate(schema, value); err != nil {
		return t, fmt.Sprintf("the value does not validate against %s of that manifest: %v", schema, err)
	}
	ts, err := tm.router.Route(schema, value)
	if err != nil {
		return t, fmt.Sprintf("that manifest cannot route it: %v", err)
	}
	for _, u := range ts {
		if u.Workflow == t.Workflow && string(u.Key) == string(t.Key) {
			return u, ""
		}
	}
	return t, fmt.Sprintf("that manifest does not route %s to workflow %s", schema, t.Workflow)
}

// undeliverableUnder is undeliverable (recover.go) against lm.
func (st *state) undeliverableUnder(lm *liveManifest, wf, what string, d *delivery) string {
	rt := lm.wfs[wf]
	if rt == nil {
		return fmt.Sprintf("the workflow is not in manifest %s", lm.m.Name)
	}
	if d.stamp != nil && d.stamp.ManifestHash == lm.m.Hash {
		return ""
	}
	if rt.def.Event != d.schema {
		return fmt.Sprintf("%s is a %s, but the workflow takes %s under manifest %s", what, d.schema, rt.def.Event, lm.m.Name)
	}
	if err := lm.m.Registry.Validate(d.schema, d.value); err != nil {
		return fmt.Sprintf("%s does not validate against %s of manifest %s: %v", what, d.schema, lm.m.Name, err)
	}
	return ""
}

// adoptLive makes lm the current manifest. With pin, the manifest it
// replaces stays live and every instance in flight is pinned to it (an
// apply --pin); without, lm is the only live manifest (a plain apply, made
// at quiescence) and the others' modules are closed.
func (st *state) adoptLive(lm *liveManifest, pin bool) {
	old := st.cur
	if !pin {
		for _, o := range st.live {
			if o != old { // the caller closes the replaced current's modules
				closeModules(o.mods)
			}
		}
		for _, in := range st.instances {
			st.pinTo(in, nil, "")
		}
		st.live = append(st.live[:0], lm)
		st.cur = lm
		return
	}
	// An older live manifest applied again replaces its own entry: its
	// instances are on the new one (the same manifest, fresh modules).
	if i := slices.IndexFunc(st.live, func(o *liveManifest) bool { return o.m.Hash == lm.m.Hash }); i >= 0 {
		prev := st.live[i]
		st.live = slices.Delete(st.live, i, i+1)
		for _, in := range st.instances {
			if in.pin == prev {
				in.pin = lm
			}
		}
		if prev != old {
			closeModules(prev.mods)
		}
	}
	st.live = append(st.live, lm)
	st.cur = lm
	if old != nil && old.m.Hash != lm.m.Hash {
		for _, in := range st.instances {
			if in.pin == nil && in.inFlight() {
				st.pinTo(in, old, "")
			}
		}
	}
	for _, in := range st.instances {
		if in.pin == lm {
			st.pinTo(in, nil, "")
		}
	}
	// Instances at rest that stayed pinned try the new current manifest.
	for _, id := range st.pinnedAtRest() {
		in := st.instances[id]
		if !st.tryMove(in) {
			st.settle(in)
		}
	}
}

// pinnedAtRest lists, sorted, the ids of pinned instances at rest.
func (st *state) pinnedAtRest() []string {
	var ids []string
	if st.pinned == 0 {
		return nil
	}
	for id, in := range st.instances {
		if in.pin != nil && !in.failed && !in.inFlight() && len(in.parked) == 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// liveByHash is the live manifest with hash h, or nil.
func (st *state) liveByHash(h schemas.Hash) *liveManifest {
	for _, lm := range st.live {
		if lm.m.Hash == h {
			return lm
		}
	}
	return nil
}

// pinBlockers lists the instances pinned to lm, sorted.
func (st *state) pinBlockers(lm *liveManifest) []Blocker {
	var out []Blocker
	if st.pinned == 0 {
		return out
	}
	for _, in := range st.instances {
		if in.pin == lm {
			b := Blocker{Kind: "pinned", Workflow: in.wf, Key: in.key, Status: in.status(), Reason: in.pinWhy}
			out = append(out, b)
		}
	}
	sortBlockers(out)
	return out
}

// RetireResult says what a retire did.
type RetireResult struct {
	Hash      schemas.Hash
	Name      string
	Seq       uint64
	BlockedBy []Blocker
}

// Retire retires live manifest h: journaled, refused (ErrNotDrained, with
// the blockers) while any instance is pinned to it, and refused for the
// current manifest. Its modules are closed.
func (w *World) Retire(ctx context.Context, h schemas.Hash) (*RetireResult, error) {
	var res *RetireResult
	var rerr error
	if err := w.do(ctx, func(st *state) { res, rerr = st.retire(h) }); err != nil {
		return nil, err
	}
	return res, rerr
}

func (st *state) retire(h schemas.Hash) (*RetireResult, error) {
	lm := st.liveByHash(h)
	if lm == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotLive, h)
	}
	res := &RetireResult{Hash: h, Name: lm.m.Name, BlockedBy: []Blocker{}}
	if lm == st.cur {
		return res, fmt.Errorf("%w: %s (%s); apply another first", ErrRetireCurrent, lm.m.Name, h)
	}
	if b := st.pinBlockers(lm); len(b) > 0 {
		res.BlockedBy = b
		return res, &NotDrainedError{Hash: h, Name: lm.m.Name, Blockers: b}
	}
	res.Seq = st.emit(journal.KindRetire, schemas.MustMarshal(&records.RetireRec{Hash: h, Name: lm.m.Name}))
	st.live = slices.DeleteFunc(st.live, func(o *liveManifest) bool { return o == lm })
	closeModules(lm.mods)
	return res, st.stopped
}

// replayRetire re-executes a journaled retire.
func (st *state) replayRetire(r journal.Record) error {
	var rr records.RetireRec
	if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
	}
	if _, err := st.retire(rr.Hash); err != nil {
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
	}
	return nil
}

// ManifestInfo is one live manifest (`aosd manifests`).
type ManifestInfo struct {
	Hash    schemas.Hash
	Name    string
	Seq     uint64 // the manifest record that applied it
	Current bool
	// Pinned counts the instances pinned to it by status (for the current
	// manifest: the instances in the table that are on it; its cells at
	// rest are counted in Status).
	Pinned InstanceCounts
	// PinnedAtRest counts the pinned instances at rest whose state does
	// not fit the current manifest (included in Pinned.Completed).
	PinnedAtRest int
	// Intents counts the intents in flight of instances on it.
	Intents int
	// Drained: nothing is pinned to it (never said of the current one).
	Drained bool
}

// Manifests lists the live manifests in the order they were applied, the
// current one last.
func (w *World) Manifests(ctx context.Context) ([]ManifestInfo, error) {
	var out []ManifestInfo
	err := w.do(ctx, func(st *state) {
		idx := map[*liveManifest]int{}
		for i, lm := range st.live {
			idx[lm] = i
			out = append(out, ManifestInfo{Hash: lm.m.Hash, Name: lm.m.Name, Seq: lm.seq, Current: lm == st.cur})
		}
		for _, in := range st.instances {
			i, ok := idx[st.manifestOf(in)]
			if !ok {
				continue
			}
			mi := &out[i]
			switch in.status() {
			case StatusRunning:
				mi.Pinned.Running++
			case StatusWaiting:
				mi.Pinned.Waiting++
			case StatusFailed:
				mi.Pinned.Failed++
			case StatusParked:
				mi.Pinned.Parked++
			default:
				mi.Pinned.Completed++
				if in.pin != nil {
					mi.PinnedAtRest++
				}
			}
			mi.Intents += len(in.inflight)
		}
		for i := range out {
			mi := &out[i]
			mi.Drained = !mi.Current && mi.Pinned == (InstanceCounts{}) && mi.Intents == 0
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pinText names an instance's pin for listings ("" on the current one).
func (st *state) pinText(in *instance) string {
	if in == nil || in.pin == nil {
		return ""
	}
	return in.pin.text
}

// describePins says, for errors, which manifests are live.
func (st *state) describePins() string {
	var b strings.Builder
	for i, lm := range st.live {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(lm.m.Name + " (" + lm.text + ")")
	}
	return b.String()
}
