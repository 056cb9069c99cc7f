package kernel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Blocker is one reason the world is not quiescent.
type Blocker struct {
	Kind     string // "instance" or "intent"
	Workflow string
	Key      []byte
	Status   string
	Intent   string
	Effect   string
	// Reason says why an instance at rest stays pinned (Kind "pinned").
	Reason string
}

// ApplyResult says what an apply did or would do.
type ApplyResult struct {
	Applied      bool
	Unchanged    bool
	ManifestHash schemas.Hash
	Previous     *schemas.Hash
	Diff         manifest.Changes
	BlockedBy    []Blocker
	Seq          uint64
	// Pinned: an apply --pin; PinnedNow counts the instances in flight it
	// left on the manifest it replaced.
	Pinned    bool
	PinnedNow int
}

// ApplyOptions are Apply's choices.
type ApplyOptions struct {
	DryRun bool
	// Pin makes the manifest current at once whatever is in flight: every
	// instance in flight stays on (is pinned to) the manifest it was on
	// (pins.go). Without it, apply waits for no one: it is refused unless
	// the world is quiescent.
	Pin bool
}

// Apply makes m the world's manifest if the world is quiescent. When it is
// not, the result lists the blockers and the error wraps ErrNotQuiescent;
// nothing changes. With dryRun nothing changes either way.
func (w *World) Apply(ctx context.Context, m *manifest.Manifest, dryRun bool) (*ApplyResult, error) {
	return w.ApplyWith(ctx, m, ApplyOptions{DryRun: dryRun})
}

// ApplyWith is Apply with options: with Pin, m becomes current whatever is
// in flight, and what is in flight stays on its manifest (pins.go).
func (w *World) ApplyWith(ctx context.Context, m *manifest.Manifest, opt ApplyOptions) (*ApplyResult, error) {
	// Compile wasm modules here, in the caller's goroutine: compiling a
	// module can take seconds, and the loop then finds the code compiled
	// (held by these runners until the loop is done with the request).
	pre := map[string]*boundModule{}
	defer closeModules(pre)
	for _, n := range slices.Sorted(maps.Keys(m.Modules)) {
		if def := m.Modules[n]; def.Runtime.Kind == "wasm" {
			b, err := w.bindModule(ctx, def)
			if err != nil {
				// Answered like the loop's own binding errors: the
				// manifest is at fault, and the result says what it was.
				return &ApplyResult{ManifestHash: m.Hash, Diff: manifest.Diff(w.Manifest(), m), BlockedBy: []Blocker{}}, err
			}
			pre[n] = b
		}
	}
	res, err := w.send(ctx, request{apply: m, dryRun: opt.DryRun, pin: opt.Pin})
	return res.applied, err
}

func (st *state) apply(m *manifest.Manifest, dryRun, pin bool) (*ApplyResult, error) {
	res := &ApplyResult{ManifestHash: m.Hash, Diff: manifest.Diff(st.man, m), BlockedBy: []Blocker{}, Pinned: pin}
	if !pin {
		res.BlockedBy = st.blockers()
	}
	if st.man != nil {
		h := st.man.Hash
		res.Previous = &h
	}
	wfs, mods, err := st.runtimes(m)
	if err != nil {
		return res, err
	}
	switch {
	case len(res.BlockedBy) > 0:
		err = fmt.Errorf("%w: %d blockers", ErrNotQuiescent, len(res.BlockedBy))
	case st.man != nil && st.man.Hash == m.Hash:
		res.Unchanged = true
	case dryRun:
	default:
		// The artifacts go into the CAS first, so the world carries its
		// code: the manifest record names them by hash, and they become
		// durable with it (the CAS and the journal share one store and one
		// sync). A store that fails here stops the world.
		if _, arts := artifactsOf(m); len(arts) > 0 {
			if _, err := st.w.cas.PutBatch(arts); err != nil {
				closeModules(mods)
				st.stop("store the wasm artifacts of "+m.Name, err)
				return res, st.stopped
			}
		}
		lim := st.limits
		before := st.pinned
		res.Seq = st.installManifest(m, wfs, mods, &lim, st.newStateChange(m), pin)
		res.PinnedNow = max(st.pinned-before, 0)
		res.Applied = true
		st.resumeReplaced(m) // modules set aside that m replaces run again (aside.go)
		return res, st.stopped
	}
	closeModules(mods) // bound only to check them
	return res, err
}

// installManifest journals m and makes it current (apply has stored its wasm
// artifacts). Every wasm module starts on a fresh instance here, a journaled
// point replay passes in the same place. wfs and mods are what runtimes bound
// for m. lim is journaled with it: the limits in force (nil only when
// replaying a journal that predates journaled limits). So is sc, the
// workflows whose state schema m changes (nil likewise for a journal that
// predates that check); their schema epochs start here (schema_epoch.go).
//
// With pin (an apply --pin) the manifest it replaces stays live, with its
// modules, for the instances in flight, which are pinned to it (pins.go).
func (st *state) installManifest(m *manifest.Manifest, wfs map[string]*wfRuntime, mods map[string]*boundModule, lim *Limits, sc *records.StateChangeRec, pin bool) uint64 {
	seq := st.emit(journal.KindManifest, schemas.MustMarshal(&records.ManifestRec{Hash: m.Hash, Name: m.Name, Source: m.Source, Limits: lim, StateChange: sc, Pin: pin}))
	st.installStateChange(m, sc)
	router, err := routing.New(m)
	if err != nil {
		panic(fmt.Sprintf("kernel: router for loaded manifest: %v", err))
	}
	if !pin || (st.cur != nil && st.cur.m.Hash == m.Hash) {
		closeModules(st.mods)
	}
	resetModules(mods)
	st.adoptRuntimes(wfs, mods)
	st.man, st.manText, st.router = m, m.Hash.String(), router
	st.adoptLive(&liveManifest{m: m, router: router, wfs: wfs, mods: mods, text: st.manText, seq: seq}, pin)
	st.w.current.Store(&installed{m: m, r: router})
	return seq
}

// runtimes binds every workflow of m to its module and cell head. It
// compiles what is not compiled yet but starts no instance: apply validates
// with it before deciding, and only installManifest makes the result live.
func (st *state) runtimes(m *manifest.Manifest) (_ map[string]*wfRuntime, _ map[string]*boundModule, err error) {
	mods, err := st.bindModules(context.Background(), m)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			closeModules(mods)
		}
	}()
	names := slices.Sorted(maps.Keys(m.Workflows))
	out := make(map[string]*wfRuntime, len(names))
	for _, n := range names {
		def := m.Workflows[n]
		mod := mods[def.Impl.Module]
		if mod == nil {
			return nil, nil, fmt.Errorf("workflow %s: module %s is not in the manifest", n, def.Impl.Module)
		}
		rt := &wfRuntime{def: def, mod: mod, ctx: def.Context != "", keyed: def.Keyed(), hashText: def.Hash.String()}
		if mod.native != nil {
			fn, ok := mod.native.Entrypoints[def.Impl.Entrypoint]
			if !ok {
				return nil, nil, fmt.Errorf("workflow %s: %s has no entrypoint %q (it has: %s)",
					n, mod.describe(), def.Impl.Entrypoint, strings.Join(slices.Sorted(maps.Keys(mod.native.Entrypoints)), ", "))
			}
			rt.fn = fn
			if mg := def.Migrate; mg != nil {
				if rt.migrate, ok = mod.native.Entrypoints[mg.Entrypoint]; !ok {
					return nil, nil, fmt.Errorf("workflow %s: %s has no migration entrypoint %q (it has: %s)",
						n, mod.describe(), mg.Entrypoint, strings.Join(slices.Sorted(maps.Keys(mod.native.Entrypoints)), ", "))
				}
			}
		}
		rt.head = st.heads[n]
		if rt.head == nil {
			// An empty head beside the world's: only adoptRuntimes makes
			// it one of the world's heads (snapshots write every head).
			if rt.head, err = cells.NewHead(st.w.cas, schemas.Hash{}, st.w.cfg.Cells); err != nil {
				return nil, nil, fmt.Errorf("workflow %s: cells: %w", n, err)
			}
		}
		out[n] = rt
	}
	return out, mods, nil
}

// adoptRuntimes makes what runtimes bound for a manifest the world's own:
// the heads of workflows the world had none for join its heads, and wfs and
// mods become the live runtimes. Only a manifest being installed gets here;
// one that is only checked (a dry run, a refused or failing apply) leaves
// the world as it was.
func (st *state) adoptRuntimes(wfs map[string]*wfRuntime, mods map[string]*boundModule) {
	for _, n := range slices.Sorted(maps.Keys(wfs)) {
		if st.heads[n] == nil {
			st.addHead(n, wfs[n].head)
		}
	}
	st.wfs, st.mods = wfs, mods
}

// blockers lists what stands between the world and quiescence, sorted.
func (st *state) blockers() []Blocker {
	var out []Blocker
	for _, in := range st.instances {
		if s := in.status(); s == StatusRunning || s == StatusWaiting {
			out = append(out, Blocker{Kind: "instance", Workflow: in.wf, Key: in.key, Status: s})
		}
	}
	for h, it := range st.inflight {
		out = append(out, Blocker{Kind: "intent", Workflow: it.OriginWorkflow, Key: it.OriginKey, Intent: h.String(), Effect: it.Effect})
	}
	if st.pinned > 0 {
		// Instances pinned to an older manifest (at rest, with a state the
		// current one does not accept): a plain apply would leave them no
		// manifest to step under.
		for _, lm := range st.live {
			if lm != st.cur {
				out = append(out, st.pinBlockers(lm)...)
			}
		}
	}
	sortBlockers(out)
	return out
}

// sortBlockers orders blockers by kind, workflow, key and intent.
func sortBlockers(out []Blocker) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Workflow != b.Workflow {
			return a.Workflow < b.Workflow
		}
		if string(a.Key) != string(b.Key) {
			return string(a.Key) < string(b.Key)
		}
		return a.Intent < b.Intent
	})
}
