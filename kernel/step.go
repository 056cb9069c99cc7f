package kernel

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Instance statuses (DESIGN.md §9).
const (
	StatusRunning   = "running"   // mailbox work pending
	StatusWaiting   = "waiting"   // intents in flight
	StatusCompleted = "completed" // at rest
	StatusFailed    = "failed"    // sticky
	// StatusParked: not failed, but events wait for it (parked) because
	// its workflow's module is set aside (aside.go).
	StatusParked = "parked"
)

// instance is one workflow instance (a cell, or an unkeyed workflow). Only
// instances that are not plainly at rest are kept in the table: running,
// waiting or failed. A completed instance is its cell and nothing more, so a
// million idle cells cost no table memory.
type instance struct {
	id       string
	wf       string
	key      []byte
	mailbox  []delivery
	parked   []delivery // events it cannot take now, in the order it will take them (park.go)
	queued   bool
	failed   bool
	reason   string
	lastSeq  uint64
	inflight map[schemas.Hash]struct{}
	fault    *failure      // while failed: what failed (recover.go)
	pin      *liveManifest // the older manifest it steps under; nil: the current one (pins.go)
	pinWhy   string        // why it stays pinned at rest (pins.go)
	kh       schemas.Hash  // cells.KeyHash(key): its place in cell listings (cellpage.go)
}

func (in *instance) status() string {
	switch {
	case in.failed:
		return StatusFailed
	case len(in.mailbox) > 0:
		return StatusRunning
	case len(in.inflight) > 0:
		return StatusWaiting
	case len(in.parked) > 0:
		return StatusParked
	default:
		return StatusCompleted
	}
}

type delivery struct {
	seq       uint64 // the event record consumed
	schema    string // as delivered (the workflow's event schema)
	value     []byte
	stamp     *records.Stamp
	eventHash schemas.Hash
	depth     uint64
}

func instanceID(wf string, key []byte) string { return wf + "\x00" + string(key) }

func (st *state) instance(wf string, key []byte) *instance {
	id := instanceID(wf, key)
	if in, ok := st.instances[id]; ok {
		return in
	}
	in := &instance{id: id, wf: wf, key: key}
	st.instances[id] = in
	st.listInstance(in)
	return in
}

// settle drops an instance at rest from the table. One pinned to an older
// manifest moves to the current one first, or stays (pins.go).
func (st *state) settle(in *instance) {
	if in.status() == StatusCompleted && !in.queued {
		if in.pin != nil && st.tryMove(in) {
			return
		}
		delete(st.instances, in.id)
		st.unlistInstance(in)
	}
}

// runToIdle steps ready instances in round-robin order until no mailbox has
// work: each ready instance takes one step per round, so a hot key cannot
// starve the others.
//
// Everything it runs counts against the current input's work budget; once
// the budget is spent, the instances still holding work are failed with a
// budget fault instead of stepped, so one input cannot hold the loop (and
// every other client) for ever or grow memory without bound.
func (st *state) runToIdle() {
	for i := 0; i < len(st.ready); i++ {
		if reason, over := st.budgetReason(); over {
			rest := st.ready[i:]
			st.ready = st.ready[:0]
			st.stopCascade(rest, reason, FaultBudget)
			return
		}
		if reason, over := st.overTime(); over {
			rest := st.ready[i:]
			st.ready = st.ready[:0]
			st.stopCascade(rest, reason, FaultEnvironmental)
			return
		}
		in := st.ready[i]
		st.ready[i] = nil
		if len(in.mailbox) == 0 || in.failed {
			// Its work was parked (its module was set aside meanwhile)
			// or it failed: nothing to step.
			in.queued = false
			st.settle(in)
			continue
		}
		d := in.mailbox[0]
		st.step(in, &d)
		if st.stopped != nil {
			st.ready = st.ready[:0] // the world stops: nothing of this turn stands
			return
		}
		if len(in.mailbox) > 0 && !in.failed {
			st.ready = append(st.ready, in)
			continue
		}
		in.queued = false
		st.settle(in)
	}
	st.ready = st.ready[:0]
}

// stepResult is what one step produced, validated but not yet applied.
type stepResult struct {
	fault    string
	env      *modules.EnvError // the host stopped the step: fault is its reason
	storage  error             // the store failed: the world stops, nothing is journaled
	state    []byte
	prev     []byte // the state the step started from (nil: none)
	events   []emitted
	intents  []records.IntentRec
	rt       *wfRuntime
	lm       *liveManifest // the manifest rt is of
	stepSeq  uint64
	deleting bool
}

type emitted struct {
	rec     records.EventRec
	targets []routing.Target
}

// step runs one delivery on one instance and applies the result.
func (st *state) step(in *instance, d *delivery) {
	t0 := time.Now()
	st.work.steps++
	res := st.exec(in, d, st.seq+1)
	if res.storage != nil {
		st.stop("step", res.storage)
		return
	}
	st.w.cfg.Observer.Stepped(in.wf, time.Since(t0), res.fault != "")
	in.mailbox = in.mailbox[1:]
	if len(in.mailbox) == 0 {
		in.mailbox = nil
	}
	in.lastSeq = d.seq
	if res.env != nil {
		if st.replaying {
			// The journal says this step succeeded or failed on its own;
			// the host failing now proves nothing about it. Stop rather
			// than journal a different history.
			st.replayErr = &ReplayError{Seq: st.seq + 1, Kind: journal.KindStep, Workflow: in.wf, Key: in.key,
				Msg: "environmental failure while replaying (the world was not changed; reopen to retry): " + res.env.Error()}
			return
		}
		st.failDelivery(in, d.seq, d, res.fault, FaultEnvironmental)
		st.noteStep(res.rt, in, d.seq, res.env) // aside.go
		return
	}
	st.noteStep(res.rt, in, d.seq, nil)
	if res.fault != "" {
		st.failDelivery(in, d.seq, d, res.fault, FaultBusiness)
		return
	}
	rec := records.StepRec{Input: d.seq, Workflow: in.wf, WorkflowHash: res.rt.def.Hash, Key: in.key}
	var stateHash schemas.Hash
	if res.state != nil {
		stateHash = schemas.HashBytes(res.state)
		rec.StateHash = &stateHash
	}
	for i := range res.events {
		rec.Emitted = append(rec.Emitted, res.stepSeq+1+uint64(i))
	}
	for i := range res.intents {
		rec.Intents = append(rec.Intents, res.intents[i].Hash)
	}
	st.emit(journal.KindStep, records.EncodeStep(&rec))
	if st.w.hist != nil {
		st.w.hist.stepped(in.wf, in.key, res.stepSeq, res.prev, res.state)
	}
	if st.w.upg != nil {
		st.w.upg.stepped(st, in, d, &res)
	}
	if res.state != nil {
		if err := res.rt.head.PutHashed(in.key, res.state, stateHash, d.stamp.LogicalNs); err != nil {
			st.stop("cell store write for "+in.wf, err)
			return
		}
	} else if res.deleting {
		if err := res.rt.head.Delete(in.key); err != nil {
			st.stop("cell store delete for "+in.wf, err)
			return
		}
	}
	for i := range res.events {
		e := &res.events[i]
		st.emitEvent(&e.rec, e.targets, d.depth+1)
	}
	for i := range res.intents {
		it := &res.intents[i]
		st.emit(journal.KindIntent, records.EncodeIntentID(&it.Hash, &it.IntentID))
		if in.inflight == nil {
			in.inflight = map[schemas.Hash]struct{}{}
		}
		in.inflight[it.Hash] = struct{}{}
		st.inflight[it.Hash] = it
		if !st.replaying {
			st.opened = append(st.opened, st.openIntent(it))
		}
	}
}

// exec runs the module and validates everything it returned. It changes no
// state, so replay can call it and compare. The instance steps under its
// manifest: the current one, or the older one it is pinned to (pins.go).
func (st *state) exec(in *instance, d *delivery, stepSeq uint64) (res stepResult) {
	res.stepSeq = stepSeq
	lm := st.cur
	if in.pin != nil {
		lm = in.pin
	}
	rt := lm.wfs[in.wf]
	if rt == nil {
		res.fault = fmt.Sprintf("workflow %s is not in the current manifest", in.wf)
		return res
	}
	res.rt = rt
	if d.stamp.ManifestHash != lm.m.Hash {
		// Kept across an apply (a parked event, a failed input), or
		// stamped under another live manifest: the manifest the instance
		// steps under must still take it.
		if why := st.undeliverableUnder(lm, in.wf, fmt.Sprintf("input %d", d.seq), d); why != "" {
			res.fault = why
			return res
		}
	}
	prev, exists, fault, err := st.readState(lm, rt, in, d) // schema_epoch.go
	if err != nil {
		res.storage = fmt.Errorf("cell store read for %s: %w", in.wf, err)
		return res
	}
	if fault != "" {
		// A cell at rest whose state the current manifest does not
		// accept stays on an older live manifest that does (pins.go),
		// and takes the input as that manifest's workflow takes it.
		alt := (*liveManifest)(nil)
		if len(st.live) > 1 && lm == st.cur {
			alt, d = st.fallbackPin(in, prev, d)
		}
		if alt == nil {
			res.fault = fault
			return res
		}
		st.pinTo(in, alt, fault)
		lm, rt = alt, alt.wfs[in.wf]
		res.rt = rt
	}
	res.lm = lm
	input := &modules.Input{Version: 1, State: prev, Event: modules.EventIn{Schema: d.schema, Value: d.value, Key: in.key}}
	if rt.ctx {
		input.Ctx = st.context(lm, rt, in, d, stepSeq)
	}
	out, fault, env := st.call(rt, input)
	if env != nil {
		res.env, res.fault = env, envReason(env)
		return res
	}
	if fault != "" {
		res.fault = fault
		return res
	}
	if err := st.validateOutput(lm, rt, in, d, out, &res); err != nil {
		res.fault = err.Error()
		return res
	}
	res.deleting = out.State == nil && exists
	res.prev = prev
	return res
}

func (st *state) context(lm *liveManifest, rt *wfRuntime, in *instance, d *delivery, stepSeq uint64) []byte {
	ent := childStamp(d.stamp, stepSeq).Entropy
	return encodeContext(&sys.Context{
		NowNs: d.stamp.NowNs, LogicalNowNs: d.stamp.LogicalNs, Entropy: ent,
		JournalHeight: stepSeq - 1, EventHash: d.eventHash.String(), ManifestHash: lm.text,
		Workflow: in.wf, WorkflowHash: rt.hashText, Key: in.key, CellMode: rt.keyed,
	})
}

func (st *state) validateOutput(lm *liveManifest, rt *wfRuntime, in *instance, d *delivery, out *modules.Output, res *stepResult) error {
	lim := &st.limits
	reg := lm.m.Registry
	size := len(out.State)
	if len(out.DomainEvents) > lim.MaxDomainEvents {
		return fmt.Errorf("step emitted %d domain events, limit %d", len(out.DomainEvents), lim.MaxDomainEvents)
	}
	if len(out.Effects) > lim.MaxEffects {
		return fmt.Errorf("step emitted %d effects, limit %d", len(out.Effects), lim.MaxEffects)
	}
	if out.State != nil {
		if err := reg.Validate(rt.def.State, out.State); err != nil {
			return fmt.Errorf("state does not validate against %s: %v", rt.def.State, err)
		}
		res.state = out.State
	}
	if len(out.DomainEvents) > 0 && d.depth+1 > uint64(lim.MaxCascadeDepth) {
		return fmt.Errorf("emitted events would exceed the cascade depth limit %d", lim.MaxCascadeDepth)
	}
	next := res.stepSeq + 1
	var parking map[string]int // events this step parks, by instance (park.go)
	for i, e := range out.DomainEvents {
		size += len(e.Value)
		if !reg.Has(e.Schema) {
			return fmt.Errorf("domain event %d: unknown schema %q", i, e.Schema)
		}
		if err := reg.Validate(e.Schema, e.Value); err != nil {
			return fmt.Errorf("domain event %d (%s): %v", i, e.Schema, err)
		}
		// A step routes what it emits with its own manifest's router;
		// each target then takes the event under its own manifest.
		targets, err := lm.router.Route(e.Schema, e.Value)
		if err != nil {
			return fmt.Errorf("domain event %d: %v", i, err)
		}
		targets, perr := st.underPins(lm, e.Schema, e.Value, targets)
		if perr != nil {
			return fmt.Errorf("domain event %d: %v", i, perr)
		}
		var full *instance
		var n int
		if full, n, parking = st.fullTarget(targets, parking); full != nil {
			return errors.New(st.emittedFull(i, e.Schema, full, n))
		}
		rec := records.EventRec{Schema: e.Schema, Value: e.Value, Stamp: childStamp(d.stamp, next),
			Origin: &records.OriginRec{Workflow: in.wf, Key: in.key, Step: res.stepSeq, Depth: d.depth + 1}}
		res.events = append(res.events, emitted{rec: rec, targets: targets})
		next++
	}
	for i, e := range out.Effects {
		size += len(e.Params)
		it, err := st.admit(lm, rt, in, i, &e, res.stepSeq)
		if err != nil {
			return fmt.Errorf("effect %d (%s): %v", i, e.Effect, err)
		}
		res.intents = append(res.intents, it)
	}
	if size > lim.MaxOutputBytes {
		return fmt.Errorf("step output is %d bytes, limit %d", size, lim.MaxOutputBytes)
	}
	return nil
}

// admit checks an effect against the workflow's declaration and the manifest,
// validates its params, and computes the intent identity (DESIGN.md §7).
func (st *state) admit(lm *liveManifest, rt *wfRuntime, in *instance, idx int, e *modules.EffectOut, stepSeq uint64) (records.IntentRec, error) {
	if !slices.Contains(rt.def.EffectsEmitted, e.Effect) {
		return records.IntentRec{}, fmt.Errorf("not in %s effects_emitted", rt.def.Name)
	}
	def := lm.m.Effects[e.Effect]
	if def == nil {
		return records.IntentRec{}, fmt.Errorf("not an effect of manifest %s", lm.m.Name)
	}
	if err := lm.m.Registry.Validate(def.Params, e.Params); err != nil {
		return records.IntentRec{}, fmt.Errorf("params do not validate against %s: %v", def.Params, err)
	}
	id := records.IntentID{World: st.world, OriginWorkflow: in.wf, OriginWorkflowHash: rt.def.Hash, OriginKey: in.key,
		Effect: e.Effect, EffectHash: def.Hash, Params: e.Params, IdempotencyKey: e.IdempotencyKey,
		IssuerRef: e.IssuerRef, EmittedAt: stepSeq, Index: uint64(idx)}
	return records.IntentRec{Hash: schemas.HashBytes(records.EncodeIntentID(nil, &id)), IntentID: id}, nil
}

// effectDef finds the effect of an intent in the manifest its origin steps
// under (which holds the sys/ ones too).
func (st *state) effectDef(it *records.IntentRec) *manifest.EffectDef {
	return st.intentManifest(it).m.Effects[it.Effect]
}

// intentManifest is the manifest the origin of an intent in flight steps
// under: its receipts are validated and delivered under it (pins.go).
func (st *state) intentManifest(it *records.IntentRec) *liveManifest {
	if st.pinned > 0 {
		if in := st.lookupInstance(it.OriginWorkflow, it.OriginKey); in != nil && in.pin != nil {
			return in.pin
		}
	}
	return st.cur
}
