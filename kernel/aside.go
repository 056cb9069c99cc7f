package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Setting a module aside. A wasm step the wall clock stops (StepTimeout, or
// what is left of the input's InputTimeout) fails its instance with an
// environmental fault, which replay adopts. A module whose steps keep
// timing out would stall the world once per input sent to it, so once
// Config.SetAsideAfter of its steps in a row have timed out, the loop sets
// it aside: it journals a module record (records.ModuleRec, action
// "aside") naming the workflows that run on it, and from there their
// inputs are parked for their instances (park.go), in order and visibly,
// instead of being stepped. What waited in those instances' mailboxes is
// parked at once, so the rest of the cascade goes on without them.
//
// The decision is the host's (it rests on wall time), so it is never made
// again: replay adopts the record where the journal has it, and the count of
// timeouts in a row is the running world's only, not journaled, starting at
// zero when the world opens.
//
// An operator resumes the module (World.ResumeModule, `aosd modules resume`,
// POST /v1/modules/{module}/resume): a module record (action "resume")
// stamped like a recover, after which every instance held by it that is not
// failed takes its parked events again, in journal order, the instances in
// the order their first parked event was journaled. Applying a manifest
// that replaces the module (drops it, or changes its def) resumes it the
// same way, right after the manifest record. Instances that failed (the
// ones whose steps timed out, say) keep their parked events until they are
// recovered.

// ErrNotAside: a resume of a module that is not set aside.
var ErrNotAside = errors.New("kernel: module is not set aside")

// asideModule is a module set aside.
type asideModule struct {
	name      string
	hash      schemas.Hash // its def's hash when it was set aside
	seq       uint64       // the module record that set it aside
	reason    string
	workflows []string // the workflows it holds, sorted
}

// noteStep counts, live, the wall-clock stops of a wasm module's steps in a
// row: env is the step's environmental failure (nil when it ran to an
// output or a business fault). Once the count reaches
// Config.SetAsideAfter the module is set aside.
func (st *state) noteStep(rt *wfRuntime, in *instance, inputSeq uint64, env *modules.EnvError) {
	if st.replaying || rt == nil || rt.mod == nil || rt.mod.runner == nil {
		return
	}
	name := rt.mod.def.Name
	if env == nil || env.Cause != "timeout" {
		if len(st.timeouts) > 0 {
			delete(st.timeouts, name)
		}
		return
	}
	if st.timeouts == nil {
		st.timeouts = map[string]int{}
	}
	st.timeouts[name]++
	n := st.timeouts[name]
	if limit := st.w.cfg.SetAsideAfter; limit <= 0 || n < limit || st.aside[name] != nil {
		return
	}
	delete(st.timeouts, name)
	reason := fmt.Sprintf("%d steps in a row were stopped by the wall-clock limit (the last: workflow %s key %s, input %d); "+
		"its workflows' inputs are parked until the module is resumed (aosd modules resume %s) or replaced by an apply",
		n, in.wf, keyText(in.key), inputSeq, name)
	st.setAside(rt.mod, reason)
}

// setAside journals that module b is set aside and holds its workflows.
func (st *state) setAside(b *boundModule, reason string) {
	var wfs []string
	for _, n := range slices.Sorted(maps.Keys(st.wfs)) {
		if st.wfs[n].mod == b {
			wfs = append(wfs, n)
		}
	}
	if wfs == nil {
		wfs = []string{}
	}
	rec := records.ModuleRec{Module: b.def.Name, Hash: b.def.Hash, Action: records.ModuleAside, Workflows: wfs, Reason: reason}
	seq := st.emit(journal.KindModule, schemas.MustMarshal(&rec))
	st.hold(&asideModule{name: b.def.Name, hash: b.def.Hash, seq: seq, reason: reason, workflows: wfs})
	st.w.cfg.Logger.Warn("module set aside", "module", b.def.Name, "seq", seq, "workflows", wfs, "reason", reason)
}

// hold sets a aside: its workflows' instances take nothing until it is
// resumed, and what waits in their mailboxes now is parked. Each instance's
// order is kept, so the order the instances are visited in does not matter.
func (st *state) hold(a *asideModule) {
	if st.aside == nil {
		st.aside, st.held = map[string]*asideModule{}, map[string]*asideModule{}
	}
	st.aside[a.name] = a
	for _, wf := range a.workflows {
		st.held[wf] = a
	}
	for _, in := range st.instances {
		if st.held[in.wf] == a && len(in.mailbox) > 0 {
			in.parked = append(in.mailbox, in.parked...)
			in.mailbox = nil
		}
	}
}

// replayAside adopts a journaled set-aside: the live world decided it on
// wall time, which replay never judges.
func (st *state) replayAside(r journal.Record, rec *records.ModuleRec) error {
	if st.aside[rec.Module] != nil {
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: fmt.Sprintf("module %s is set aside again (it is aside since seq %d)", rec.Module, st.aside[rec.Module].seq)}
	}
	seq := st.emit(journal.KindModule, r.Body)
	st.hold(&asideModule{name: rec.Module, hash: rec.Hash, seq: seq, reason: rec.Reason, workflows: rec.Workflows})
	return nil
}

// ResumeResult says what a resume did.
type ResumeResult struct {
	Seq       uint64 // the module record
	Delivered uint64 // parked events delivered again
	Instances int    // instances they were delivered to
}

// ResumeModule lets a module set aside run again: a journaled module
// record, after which every instance it held that is not failed takes its
// parked events, in order; they run to idle before it returns. A module
// that is not set aside is refused (ErrNotAside), journaling nothing.
func (w *World) ResumeModule(ctx context.Context, module string) (ResumeResult, error) {
	var res ResumeResult
	var rerr error
	err := w.do(ctx, func(st *state) {
		res, rerr = st.resumeModule(module, "resumed by an operator", nil)
		st.maybeMaterialize()
	})
	if err != nil {
		return ResumeResult{}, err
	}
	return res, rerr
}

// resumeModule journals a resume of module and delivers the parked events
// of the instances it held. stamp is nil live and the journaled one in
// replay (which recomputes the record and must find it equal).
func (st *state) resumeModule(module, reason string, stamp *records.Stamp) (ResumeResult, error) {
	a := st.aside[module]
	if a == nil {
		return ResumeResult{}, fmt.Errorf("%w: module %s (see `aosd modules` for the modules set aside)", ErrNotAside, module)
	}
	st.beginInput()
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	var ins []*instance
	var n uint64
	for _, in := range st.instances {
		if st.held[in.wf] == a && !in.failed && len(in.parked) > 0 {
			ins = append(ins, in)
			n += uint64(len(in.parked))
		}
	}
	// The instances in the order their first parked event was journaled,
	// so the oldest waiting work goes first (ids break ties: one event
	// parked for several instances).
	sort.Slice(ins, func(i, j int) bool {
		a, b := ins[i].parked[0].seq, ins[j].parked[0].seq
		if a != b {
			return a < b
		}
		return ins[i].id < ins[j].id
	})
	rec := records.ModuleRec{Module: a.name, Hash: a.hash, Action: records.ModuleResume, Workflows: a.workflows, Reason: reason, Parked: n, Stamp: stamp}
	seq := st.emit(journal.KindModule, schemas.MustMarshal(&rec))
	if stamp.LogicalNs > st.logical {
		st.logical = stamp.LogicalNs
	}
	delete(st.aside, a.name)
	for _, wf := range a.workflows {
		if st.held[wf] == a {
			delete(st.held, wf)
		}
	}
	delete(st.timeouts, a.name)
	if !st.replaying {
		st.w.cfg.Logger.Info("module resumed", "module", a.name, "seq", seq, "parked", n, "reason", reason)
	}
	for _, in := range ins {
		ds := in.parked
		in.parked = nil
		st.redeliver(in, nil, ds)
	}
	if !st.replaying {
		st.runToIdle()
	}
	for _, in := range ins {
		st.settle(in)
	}
	return ResumeResult{Seq: seq, Delivered: n, Instances: len(ins)}, nil
}

// resumeReplaced resumes, after an apply made m current, every module set
// aside that m drops or changes: the code that kept timing out is gone.
func (st *state) resumeReplaced(m *manifest.Manifest) {
	for _, name := range slices.Sorted(maps.Keys(st.aside)) {
		a := st.aside[name]
		def := m.Modules[name]
		if def != nil && def.Hash == a.hash {
			continue
		}
		what := "drops it"
		if def != nil {
			what = "changes it (def " + def.Hash.String() + ")"
		}
		if _, err := st.resumeModule(name, fmt.Sprintf("manifest %s %s", m.Hash, what), nil); err != nil || st.stopped != nil {
			return
		}
	}
}

// ModuleInfo is one module: of the current manifest, or set aside and no
// longer in it.
type ModuleInfo struct {
	Name string
	Kind string       // "wasm" or "builtin"; "" for a module no longer in the manifest
	Hash schemas.Hash // its def's hash (when set aside: the one set aside)
	// InManifest: the current manifest has this module (with this hash).
	InManifest bool
	// Aside: the module is set aside since the module record at AsideSeq,
	// for Reason; Workflows are the workflows it holds.
	Aside     bool
	AsideSeq  uint64
	Reason    string
	Workflows []string // the workflows that run on it (or that it holds, when aside)
	// Waiting is how many parked events wait for a resume (those of
	// instances it holds that are not failed), in Instances instances.
	Waiting   uint64
	Instances int
	// TimeoutsInARow is how many of its latest steps the wall clock
	// stopped (the running world's count; at Config.SetAsideAfter it is
	// set aside).
	TimeoutsInARow int
}

// Modules lists the modules of the current manifest and those set aside
// that left it, sorted by name.
func (w *World) Modules(ctx context.Context) ([]ModuleInfo, error) {
	var out []ModuleInfo
	err := w.do(ctx, func(st *state) { out = st.modules() })
	return out, err
}

func (st *state) modules() []ModuleInfo {
	byName := map[string]*ModuleInfo{}
	if st.man != nil {
		for name, def := range st.man.Modules {
			mi := &ModuleInfo{Name: name, Kind: def.Runtime.Kind, Hash: def.Hash, InManifest: true, Workflows: []string{},
				TimeoutsInARow: st.timeouts[name]}
			byName[name] = mi
		}
		for _, n := range slices.Sorted(maps.Keys(st.wfs)) {
			if mi := byName[st.wfs[n].mod.def.Name]; mi != nil {
				mi.Workflows = append(mi.Workflows, n)
			}
		}
	}
	for name, a := range st.aside {
		mi := byName[name]
		if mi == nil { // the manifest dropped it since (an apply resumes it right after)
			mi = &ModuleInfo{Name: name, Hash: a.hash}
			byName[name] = mi
		}
		mi.Aside, mi.AsideSeq, mi.Reason, mi.Workflows = true, a.seq, a.reason, a.workflows
	}
	for _, in := range st.instances {
		a := st.held[in.wf]
		if a == nil || in.failed || len(in.parked) == 0 {
			continue
		}
		mi := byName[a.name]
		mi.Waiting += uint64(len(in.parked))
		mi.Instances++
	}
	out := make([]ModuleInfo, 0, len(byName))
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[n])
	}
	return out
}
