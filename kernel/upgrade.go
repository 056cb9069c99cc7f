package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Upgrades of cells pinned to an older manifest (DESIGN.md §9a,
// docs/upgrades.md; `aosd upgrade`, `aosd replay --manifest`).
//
// A waiting cell cannot move to the current manifest at rest: its intents
// are in flight, and their receipts will be delivered to whatever code it
// steps under. It moves only when the current manifest's code, replayed
// over the cell's inputs, reproduces what the journal holds: after every
// step the same state hash, and the same intents (records.IntentID field
// by field, all but OriginWorkflowHash, which changes with the code by
// construction; docs/DECISIONS.md says why EffectHash is compared). Only
// then is one move record journaled for the cell and the move applied, in
// the same loop turn: its pin is dropped; its intents in flight keep their
// hashes, so executors' receipts still settle them.
//
// The check runs in a scratch world (ScratchStores): the journal is
// replayed there with the code that wrote it, exactly as opening the world
// does (so every state the check compares with is the state the journal
// names), while a tap (upgradeTap) runs the new code beside every step of
// the cells checked and compares. The new code's warm wasm instance is the
// tap's own and fresh: nothing the check runs reaches the live world's
// modules, whose calls stay those the journal orders.
//
// Which inputs. The replay starts at the newest snapshot taken before the
// oldest step that matters for the cells checked (the step that opened
// the oldest intent still in flight, or the last step), or at genesis. A
// cell created after that point is checked from its creation (its first
// step from no state); one that already had a state there is checked from
// that state ("since": "snapshot"), and every step since, which covers
// every step that opened an intent still in flight. A move changes no
// state, so it does not start a cell's history again: a cell moved before
// is checked over its whole life, and so are the intents it holds that
// older code opened (a check from its last move would take those on
// trust). A cell whose journal holds a fault in that window is reported
// diverged at the fault: the new code would have to be judged against a
// step the journal never completed.
//
// Emitted domain events are not compared: they were delivered when
// journaled and nothing after a move depends on them (DECISIONS.md).

// ErrUpgrade marks an upgrade that could not be checked at all (the
// workflow is not in the current manifest, no selection, a bad status).
var ErrUpgrade = errors.New("kernel: upgrade refused")

// Upgrade outcomes, one per cell (UpgradeCell.Outcome).
const (
	UpgradeMoved     = "moved"      // checked, and the move journaled
	UpgradeWouldMove = "would_move" // checked; a dry run moved nothing
	UpgradeDiverged  = "diverged"   // the new code does not reproduce a step: Divergence says which
	UpgradeNotPinned = "not_pinned" // already on the current manifest
	UpgradeNotFound  = "not_found"  // no such cell
	UpgradeRefused   = "refused"    // failed or parked: Reason says; recover it first
	UpgradeChanged   = "changed"    // it took an input while it was checked: nothing moved, run again
	UpgradeSkipped   = "skipped"    // its status is not the one asked for
)

// UpgradeRequest selects the cells of one workflow an upgrade moves to the
// current manifest.
type UpgradeRequest struct {
	Workflow string
	// Keys are the cells (canonical CBOR keys). Without keys and without
	// All, an unkeyed workflow's one instance.
	Keys [][]byte
	// All: every instance of Workflow pinned to an older manifest.
	All bool
	// Status keeps only the cells with this status ("" any): waiting,
	// completed (pinned at rest), running, parked or failed.
	Status string
	DryRun bool
}

// Divergence is the first record of a cell's history the new code does not
// reproduce.
type Divergence struct {
	Seq   uint64       // the journal's record: the step (or fault) that diverges
	Kind  journal.Kind // its kind
	Input uint64       // the input that step consumed
	// What differs: "state" (Want and Got are the state hashes), "intent"
	// (Field names the first differing field of intent Index; Want and Got
	// are the journaled intent's hash and the new code's), "intents" (how
	// many), "fault" (the new code failed the step, or the journal holds a
	// fault), "migration" (the new workflow's migration cannot take a
	// journaled state), "input" (the new manifest cannot take the input), "workflow"
	// (not in the new manifest), "window" (an intent in flight was opened
	// before the journal the check could read).
	What      string
	Want, Got schemas.Hash
	Field     string
	Index     int
	Msg       string // all of it in words
}

// UpgradeCell is what an upgrade did (or would do) with one cell.
type UpgradeCell struct {
	Workflow string
	Key      []byte
	Outcome  string
	Status   string       // its status when it was selected
	From     schemas.Hash // the manifest it is pinned to (zero: not pinned)
	// Since says where the check started: "creation" or "snapshot";
	// Inputs are the inputs whose steps were checked.
	Since     string
	Inputs    []uint64
	StateHash *schemas.Hash // its state after the move (nil: none)
	// Migrated is the hash of the state the new workflow's migration
	// took (its state before the move); nil when the move keeps the state.
	Migrated   *schemas.Hash
	Seq        uint64 // the move record (Outcome "moved")
	Divergence *Divergence
	Reason     string
}

// UpgradeReport is an upgrade's (or an offline check's) answer.
type UpgradeReport struct {
	Workflow string // "" for an offline check of every workflow
	To       schemas.Hash
	ToName   string
	DryRun   bool
	// Height is the journal height the check replayed to; Start the seq
	// it started after (0: genesis, else a snapshot's); Replayed the
	// records it replayed and Steps the steps of checked cells it ran the
	// new code for.
	Height, Start uint64
	Replayed      int
	Steps         int
	Cells         []UpgradeCell
}

// Diverged counts the cells that diverged.
func (r *UpgradeReport) Diverged() int {
	n := 0
	for i := range r.Cells {
		if r.Cells[i].Outcome == UpgradeDiverged {
			n++
		}
	}
	return n
}

// cellCheck is the tap's progress on one cell.
type cellCheck struct {
	wf     string
	key    []byte
	since  string
	state  []byte // the new code's state after the steps checked
	inputs []uint64
	opened map[schemas.Hash]struct{} // intents the steps checked opened (journaled hashes)
	div    *Divergence
	// fromOld: state is the journal's, not yet migrated for the new code
	// (a check that starts from a snapshot); migrated is the hash of the
	// journaled state after the last step checked when the new workflow's
	// migration changed it (nil: it took it as it was).
	fromOld  bool
	migrated *schemas.Hash
}

func (c *cellCheck) reset(since string, state []byte) {
	c.since, c.state, c.inputs, c.opened, c.div = since, bytes.Clone(state), nil, nil, nil
	c.fromOld, c.migrated = state != nil, nil
}

// upgradeTap runs target's code beside every step a scratch world replays
// for the cells it checks, and compares.
type upgradeTap struct {
	target *manifest.Manifest
	lm     *liveManifest // target, bound in the scratch world (bind)
	err    error         // binding it failed
	// want are the instance ids checked; nil: every cell of every
	// workflow of target (an offline check).
	want  map[string]bool
	cells map[string]*cellCheck
	steps int
}

func newUpgradeTap(target *manifest.Manifest, want map[string]bool) *upgradeTap {
	return &upgradeTap{target: target, want: want, cells: map[string]*cellCheck{}}
}

// cell is in's check, made at its first step; nil when in is not checked.
func (t *upgradeTap) cell(in *instance) *cellCheck {
	if c := t.cells[in.id]; c != nil {
		return c
	}
	if t.want != nil && !t.want[in.id] {
		return nil
	}
	if t.want == nil && t.target.Workflows[in.wf] == nil {
		return nil
	}
	c := &cellCheck{wf: in.wf, key: in.key}
	t.cells[in.id] = c
	return c
}

// bind binds target's modules in the scratch world, once.
func (t *upgradeTap) bind(st *state) *liveManifest {
	if t.lm != nil || t.err != nil {
		return t.lm
	}
	wfs, mods, err := st.runtimes(t.target)
	if err != nil {
		t.err = fmt.Errorf("bind manifest %s (%s): %w", t.target.Name, t.target.Hash, err)
		return nil
	}
	router, err := routing.New(t.target)
	if err != nil {
		closeModules(mods)
		t.err = fmt.Errorf("route manifest %s (%s): %w", t.target.Name, t.target.Hash, err)
		return nil
	}
	resetModules(mods)
	t.lm = &liveManifest{m: t.target, router: router, wfs: wfs, mods: mods, text: t.target.Hash.String()}
	return t.lm
}

// close releases the modules bind bound (after the scratch world closed).
func (t *upgradeTap) close() {
	if t.lm != nil {
		closeModules(t.lm.mods)
	}
}

// stepped checks one journaled step of a checked cell: res is what the
// code that wrote the journal computed (replay has matched its record).
func (t *upgradeTap) stepped(st *state, in *instance, d *delivery, res *stepResult) {
	c := t.cell(in)
	if c == nil {
		return
	}
	switch {
	case res.prev == nil:
		c.reset("creation", nil)
	case c.since == "":
		c.reset("snapshot", res.prev)
	}
	if c.div != nil {
		return
	}
	t.steps++
	c.inputs = append(c.inputs, d.seq)
	if div := t.check(st, in, c, d, res); div != nil {
		div.Seq, div.Kind, div.Input = res.stepSeq, journal.KindStep, d.seq
		c.div = div
	}
}

// faulted notes a journaled fault of a checked cell: the new code cannot
// be judged against a step the journal never completed.
func (t *upgradeTap) faulted(in *instance, seq uint64, reason string) {
	c := t.cell(in)
	if c == nil || c.div != nil {
		return
	}
	if c.since == "" {
		c.since = "snapshot"
	}
	c.div = &Divergence{Seq: seq, Kind: journal.KindFault, Input: in.lastSeq, What: "fault",
		Msg: fmt.Sprintf("the journal holds a fault of this cell at seq %d (%s); a step it never completed cannot be checked", seq, reason)}
}

// check runs the new code over one step and compares it with res.
func (t *upgradeTap) check(st *state, in *instance, c *cellCheck, d *delivery, res *stepResult) *Divergence {
	lm := t.bind(st)
	if lm == nil {
		return &Divergence{What: "workflow", Msg: t.err.Error()}
	}
	rt := lm.wfs[in.wf]
	if rt == nil {
		return &Divergence{What: "workflow", Msg: fmt.Sprintf("workflow %s is not in manifest %s (%s)", in.wf, lm.m.Name, lm.text)}
	}
	value, why := reshape(res.lm, res.rt, lm, rt, d)
	if why != "" {
		return &Divergence{What: "input", Msg: fmt.Sprintf("input %d: %s", d.seq, why)}
	}
	if c.fromOld && rt.def.Migrate != nil {
		// The new code starts from the migration of the state the check
		// starts from (migrate.go).
		ms, _, fault, env := st.migrateState(lm, rt, in.key, c.state)
		if div := migrationDiv("the state the check starts from", fault, env); div != nil {
			return div
		}
		c.state, c.fromOld = ms, false
	}
	input := &modules.Input{Version: 1, State: c.state, Event: modules.EventIn{Schema: rt.def.Event, Value: value, Key: in.key}}
	if rt.ctx {
		input.Ctx = st.context(lm, rt, in, d, res.stepSeq)
	}
	out, fault, env := st.call(rt, input)
	switch {
	case env != nil:
		return &Divergence{What: "fault", Msg: "the new code could not be run: " + env.Error()}
	case fault != "":
		return &Divergence{What: "fault", Msg: "the new code failed the step: " + fault}
	}
	if out.State != nil {
		if err := lm.m.Registry.Validate(rt.def.State, out.State); err != nil {
			return &Divergence{What: "state", Got: schemas.HashBytes(out.State),
				Msg: fmt.Sprintf("the new code's state does not validate against %s: %v", rt.def.State, err)}
		}
	}
	// With a migration, the step must commute with it: the new code's
	// state is the migration of the journaled state (migrate.go).
	want := res.state
	c.migrated = nil
	if want != nil && rt.def.Migrate != nil { // without a migration, the states compare as they are
		ms, _, fault, env := st.migrateState(lm, rt, in.key, want)
		if div := migrationDiv("the journaled state after this step", fault, env); div != nil {
			div.Want = schemas.HashBytes(want)
			return div
		}
		if !bytes.Equal(ms, want) {
			h := schemas.HashBytes(want)
			c.migrated, want = &h, ms
		}
	}
	if div := sameState(want, out.State); div != nil {
		if c.migrated != nil {
			div.Msg = fmt.Sprintf("state hash %s in the journal migrates to %s, but the new code's state is %s",
				c.migrated, stateText(want, div.Want), stateText(out.State, div.Got))
		}
		return div
	}
	if len(out.Effects) != len(res.intents) {
		return &Divergence{What: "intents", Msg: fmt.Sprintf("the journal's step opened %d intents, the new code %d", len(res.intents), len(out.Effects))}
	}
	for i := range out.Effects {
		it, err := st.admit(lm, rt, in, i, &out.Effects[i], res.stepSeq)
		if err != nil {
			return &Divergence{What: "intent", Index: i, Want: res.intents[i].Hash, Field: "effect",
				Msg: fmt.Sprintf("intent %d: the new manifest refuses it: %v", i, err)}
		}
		if f := intentDiff(&res.intents[i].IntentID, &it.IntentID); f != "" {
			return &Divergence{What: "intent", Index: i, Field: f, Want: res.intents[i].Hash, Got: it.Hash,
				Msg: fmt.Sprintf("intent %d (%s) differs in %s", i, res.intents[i].Effect, f)}
		}
	}
	c.state = out.State
	for i := range res.intents {
		if c.opened == nil {
			c.opened = map[schemas.Hash]struct{}{}
		}
		c.opened[res.intents[i].Hash] = struct{}{}
	}
	return nil
}

// migrationDiv is the divergence of a migration that cannot take a state.
func migrationDiv(what, fault string, env *modules.EnvError) *Divergence {
	switch {
	case env != nil:
		return &Divergence{What: "fault", Msg: "the migration of " + what + " could not be run: " + env.Error()}
	case fault != "":
		return &Divergence{What: "migration", Msg: what + ": " + fault}
	}
	return nil
}

// sameState compares the journaled state after a step with the new code's.
func sameState(want, got []byte) *Divergence {
	if want == nil && got == nil {
		return nil
	}
	var w, g schemas.Hash
	if want != nil {
		w = schemas.HashBytes(want)
	}
	if got != nil {
		g = schemas.HashBytes(got)
	}
	if want != nil && got != nil && w == g {
		return nil
	}
	return &Divergence{What: "state", Want: w, Got: g,
		Msg: fmt.Sprintf("state hash %s in the journal, %s from the new code", stateText(want, w), stateText(got, g))}
}

func stateText(b []byte, h schemas.Hash) string {
	if b == nil {
		return "none"
	}
	return h.String()
}

// intentDiff names the first field of a that b does not repeat, all but
// OriginWorkflowHash (the workflow's hash changes with its code by
// construction); "" when they are the same intent.
func intentDiff(a, b *records.IntentID) string {
	switch {
	case a.World != b.World:
		return "world"
	case a.OriginWorkflow != b.OriginWorkflow:
		return "origin_workflow"
	case !bytes.Equal(a.OriginKey, b.OriginKey):
		return "origin_key"
	case a.Effect != b.Effect:
		return "effect"
	case a.EffectHash != b.EffectHash:
		return "effect_hash"
	case !bytes.Equal(a.Params, b.Params):
		return "params"
	case !bytes.Equal(a.IdempotencyKey, b.IdempotencyKey):
		return "idempotency_key"
	case a.IssuerRef != b.IssuerRef:
		return "issuer_ref"
	case a.EmittedAt != b.EmittedAt:
		return "emitted_at"
	case a.Index != b.Index:
		return "index"
	}
	return ""
}

// reshape is a delivery, made for the old workflow (its event, a variant
// arm wrapped), as the new workflow takes it, or why it cannot.
func reshape(olm *liveManifest, ort *wfRuntime, nlm *liveManifest, nrt *wfRuntime, d *delivery) ([]byte, string) {
	value := d.value
	if ort.def.Event != nrt.def.Event {
		schema, inner := d.schema, d.value
		for _, a := range olm.m.Registry.Arms(ort.def.Event) {
			tag, v, ok := routing.Unwrap(d.value)
			if ok && a.Tag == tag {
				schema, inner = a.Schema, v
				break
			}
		}
		var ok bool
		if value, ok = asEvent(nlm, nrt, schema, inner); !ok {
			return nil, fmt.Sprintf("a %s, which workflow %s does not take as its event %s under manifest %s", schema, nrt.def.Name, nrt.def.Event, nlm.m.Name)
		}
	}
	if err := nlm.m.Registry.Validate(nrt.def.Event, value); err != nil {
		return nil, fmt.Sprintf("it does not validate against %s of manifest %s: %v", nrt.def.Event, nlm.m.Name, err)
	}
	return value, ""
}

// asEvent is asWorkflowEvent without the loop's state.
func asEvent(lm *liveManifest, rt *wfRuntime, schema string, value []byte) ([]byte, bool) {
	if rt.def.Event == schema {
		return value, true
	}
	for _, a := range lm.m.Registry.Arms(rt.def.Event) {
		if a.Schema == schema {
			return routing.Wrap(a.Tag, value), true
		}
	}
	return nil, false
}

// upgradeCand is one selected cell while an upgrade runs.
type upgradeCand struct {
	out     UpgradeCell
	id      string
	check   bool   // checked in the scratch world
	lastSeq uint64 // the scratch world's last input of it, when checked
	state   *schemas.Hash
}

// Upgrade moves the cells req selects from the older manifests they are
// pinned to onto the current manifest, each only when the current code
// reproduces its history (see the top of this file). With DryRun it checks
// and moves nothing. A cell that took an input while it was checked is
// left where it is (UpgradeChanged). The moves are journaled in one loop
// turn: one record per cell, made durable before Upgrade returns.
func (w *World) Upgrade(ctx context.Context, req UpgradeRequest) (*UpgradeReport, error) {
	if req.Workflow == "" {
		return nil, fmt.Errorf("%w: no workflow named", ErrUpgrade)
	}
	if req.All && len(req.Keys) > 0 {
		return nil, fmt.Errorf("%w: name keys or all, not both", ErrUpgrade)
	}
	switch req.Status {
	case "", StatusWaiting, StatusCompleted, StatusRunning, StatusParked, StatusFailed:
	default:
		return nil, fmt.Errorf("%w: status %q: want waiting, completed, running, parked or failed", ErrUpgrade, req.Status)
	}
	rep := &UpgradeReport{Workflow: req.Workflow, DryRun: req.DryRun, Cells: []UpgradeCell{}}
	var cands []*upgradeCand
	var target *manifest.Manifest
	var before uint64
	var perr error
	if err := w.do(ctx, func(st *state) {
		if st.cur == nil {
			perr = ErrNoManifest
			return
		}
		target = st.cur.m
		cands, before, perr = st.planUpgrade(&req)
		rep.Height = st.seq
	}); err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	rep.To, rep.ToName = target.Hash, target.Name
	want := map[string]bool{}
	for _, c := range cands {
		if c.check {
			want[c.id] = true
		}
	}
	if len(want) > 0 {
		if err := w.checkUpgrade(ctx, target, want, before, cands, rep); err != nil {
			return nil, err
		}
	}
	if !req.DryRun {
		if err := w.do(ctx, func(st *state) { st.moveChecked(target, cands) }); err != nil {
			return nil, err
		}
		if err := w.brokenErr(); err != nil {
			return nil, err
		}
	}
	for _, c := range cands {
		rep.Cells = append(rep.Cells, c.out)
	}
	return rep, nil
}

// planUpgrade selects the cells of req, says what is already known of each,
// and finds the seq the check's replay must start before.
func (st *state) planUpgrade(req *UpgradeRequest) ([]*upgradeCand, uint64, error) {
	rt := st.cur.wfs[req.Workflow]
	if rt == nil {
		return nil, 0, fmt.Errorf("%w: workflow %s is not in the current manifest %s (%s)", ErrUpgrade, req.Workflow, st.cur.m.Name, st.cur.text)
	}
	var keys [][]byte
	switch {
	case req.All:
		for _, in := range st.instances {
			if in.wf == req.Workflow && in.pin != nil {
				keys = append(keys, in.key)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	case len(req.Keys) > 0:
		keys = req.Keys
	case !rt.keyed:
		keys = [][]byte{nil}
	default:
		return nil, 0, fmt.Errorf("%w: workflow %s is keyed: name the keys of the cells to move, or all", ErrUpgrade, req.Workflow)
	}
	before := st.seq + 1
	var out []*upgradeCand
	for _, key := range keys {
		c := &upgradeCand{id: instanceID(req.Workflow, key), out: UpgradeCell{Workflow: req.Workflow, Key: key}}
		in := st.instances[c.id]
		switch {
		case in == nil:
			_, exists, err := rt.head.Get(key)
			if err != nil {
				st.stop("cell store read for "+req.Workflow, err)
				return nil, 0, st.stopped
			}
			c.out.Outcome, c.out.Status = UpgradeNotFound, ""
			if exists {
				c.out.Outcome, c.out.Status = UpgradeNotPinned, StatusCompleted
			}
		default:
			c.out.Status = in.status()
			switch {
			case req.Status != "" && c.out.Status != req.Status:
				if req.All {
					continue
				}
				c.out.Outcome, c.out.Reason = UpgradeSkipped, fmt.Sprintf("its status is %s, not %s", c.out.Status, req.Status)
			case in.pin == nil:
				c.out.Outcome = UpgradeNotPinned
			case in.failed:
				c.out.From = in.pin.m.Hash
				c.out.Outcome, c.out.Reason = UpgradeRefused, "it failed (aosd failed shows why): recover it first"
			case len(in.parked) > 0 || len(in.mailbox) > 0:
				c.out.From = in.pin.m.Hash
				c.out.Outcome, c.out.Reason = UpgradeRefused, fmt.Sprintf("it holds %d events not yet stepped", len(in.parked)+len(in.mailbox))
			default:
				c.out.From = in.pin.m.Hash
				c.check = true
				before = min(before, in.lastSeq)
				for h := range in.inflight {
					if it := st.inflight[h]; it != nil {
						before = min(before, it.EmittedAt)
					}
				}
			}
		}
		out = append(out, c)
	}
	return out, before, nil
}

// checkUpgrade replays the journal to the report's height in a scratch
// world whose tap checks the cells in want, and fills in each checked
// candidate's outcome.
func (w *World) checkUpgrade(ctx context.Context, target *manifest.Manifest, want map[string]bool, before uint64, cands []*upgradeCand, rep *UpgradeReport) error {
	if w.journal.Height() < rep.Height {
		if _, err := w.journal.Wait(ctx, rep.Height-1); err != nil {
			return err
		}
	}
	sc := ScratchStores(Stores{CAS: w.cas, Journal: w.journal}, rep.Height)
	sc.Journal = &beforeLog{scratchLog: sc.Journal.(*scratchLog), before: before}
	tap := newUpgradeTap(target, want)
	res, err := runCheck(ctx, sc, w.cfg, false, tap, rep)
	if err != nil {
		return err
	}
	for _, c := range cands {
		if !c.check {
			continue
		}
		r := res[c.id]
		c.out.Since, c.out.Inputs, c.out.Divergence, c.out.StateHash, c.lastSeq = r.Since, r.Inputs, r.Divergence, r.StateHash, r.lastSeq
		c.out.Migrated = r.Migrated
		switch {
		case r.Divergence != nil:
			c.out.Outcome = UpgradeDiverged
		case rep.DryRun:
			c.out.Outcome = UpgradeWouldMove
		}
	}
	return nil
}

// checked is a cell's check as runCheck returns it.
type checked struct {
	UpgradeCell
	lastSeq uint64
}

// runCheck opens the scratch world with tap, so replay runs the check, and
// ends each cell's check against the state replay reached: every intent of
// the cell in flight there must be one the check compared. It closes the
// scratch world and the tap's modules.
func runCheck(ctx context.Context, sc Stores, cfg Config, fromGenesis bool, tap *upgradeTap, rep *UpgradeReport) (map[string]*checked, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer tap.close()
	cfg = scratchConfig(cfg)
	cfg.FromGenesis = fromGenesis
	sw, err := open(sc, cfg, nil, tap)
	if err != nil {
		return nil, fmt.Errorf("replay for the upgrade check: %w", err)
	}
	info := sw.OpenInfo()
	rep.Replayed, rep.Steps, rep.Start = int(info.Replayed), tap.steps, info.Checkpoint
	out := map[string]*checked{}
	qerr := sw.do(ctx, func(st *state) {
		ids := make([]string, 0, len(tap.cells))
		for id := range tap.cells {
			ids = append(ids, id)
		}
		if tap.want != nil {
			for id := range tap.want {
				if tap.cells[id] == nil {
					ids = append(ids, id)
				}
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			c := tap.cells[id]
			r := &checked{}
			out[id] = r
			in := st.instances[id]
			if in != nil {
				r.lastSeq = in.lastSeq
			}
			if c == nil {
				r.Divergence = &Divergence{What: "window", Msg: fmt.Sprintf("no step of this cell between seq %d and %d to check", rep.Start, rep.Height)}
				continue
			}
			r.Workflow, r.Key, r.Since, r.Inputs, r.Divergence = c.wf, c.key, c.since, slices.Clone(c.inputs), c.div
			if c.state != nil {
				h := schemas.HashBytes(c.state)
				r.StateHash = &h
			}
			r.Migrated = c.migrated
			if r.Divergence != nil || in == nil {
				continue
			}
			for _, h := range sortedHashes(in.inflight) {
				if _, ok := c.opened[h]; !ok {
					it := st.inflight[h]
					r.Divergence = &Divergence{What: "window", Want: h, Seq: it.EmittedAt, Kind: journal.KindStep,
						Msg: fmt.Sprintf("intent %s in flight was opened at seq %d, before the journal the check could replay (from seq %d)", h, it.EmittedAt, rep.Start)}
					break
				}
			}
		}
	})
	cerr := sw.Close()
	if qerr != nil {
		return nil, qerr
	}
	if cerr != nil {
		return nil, cerr
	}
	return out, nil
}

// moveChecked journals and applies the move of every candidate that
// passed its check and has not changed since: all in this loop turn, so
// the records reach the journal in one append.
func (st *state) moveChecked(target *manifest.Manifest, cands []*upgradeCand) {
	// A batch of moves is an operator's request, not an input: a migration
	// it runs again is bounded by StepTimeout alone. The budget the last
	// input left behind must not bound it: its deadline has long passed
	// when the upgrade comes more than InputTimeout after that input, and
	// every migration would then get a millisecond and fail as the host's.
	st.work = workBudget{}
	for _, c := range cands {
		if !c.check || c.out.Divergence != nil {
			continue
		}
		in := st.instances[c.id]
		why := ""
		switch {
		case st.cur.m.Hash != target.Hash:
			why = fmt.Sprintf("the current manifest changed to %s (%s) while it was checked", st.cur.m.Name, st.cur.text)
		case in == nil || in.pin == nil || in.pin.m.Hash != c.out.From:
			why = "it moved while it was checked"
		case in.failed || len(in.mailbox) > 0 || len(in.parked) > 0 || in.lastSeq != c.lastSeq:
			why = fmt.Sprintf("it took input %d while it was checked", in.lastSeq)
		}
		if why != "" {
			c.out.Outcome, c.out.Reason = UpgradeChanged, why+"; run the upgrade again"
			continue
		}
		rec := &records.MoveRec{Workflow: in.wf, Key: in.key, From: c.out.From, To: target.Hash, Inputs: c.out.Inputs, Since: c.out.Since, StateHash: c.out.StateHash, Migrated: c.out.Migrated}
		seq, err := st.move(in, rec)
		if err != nil {
			c.out.Outcome, c.out.Reason = UpgradeChanged, err.Error()+"; run the upgrade again"
			continue
		}
		if st.stopped != nil {
			return
		}
		c.out.Outcome, c.out.Seq = UpgradeMoved, seq
	}
}

// move journals rec and moves in to the current manifest: its pin is
// dropped, its intents in flight stay as they are. The cell's state must
// be the one rec names (the check computed it), or nothing is journaled.
func (st *state) move(in *instance, rec *records.MoveRec) (uint64, error) {
	rt := st.cur.wfs[in.wf]
	if rt == nil {
		return 0, fmt.Errorf("workflow %s is not in the current manifest", in.wf)
	}
	state, exists, err := rt.head.Get(in.key)
	if err != nil {
		st.stop("cell store read for "+in.wf, err)
		return 0, st.stopped
	}
	if rec.Migrated != nil {
		out, err := st.migrateForMove(rt, in.key, state, exists, rec) // migrate.go
		if err != nil {
			return 0, err
		}
		seq := st.emit(journal.KindMove, schemas.MustMarshal(rec))
		if err := rt.head.PutHashed(in.key, out, *rec.StateHash, st.logical); err != nil {
			st.stop("cell store write for "+in.wf, err)
			return 0, st.stopped
		}
		st.pinTo(in, nil, "")
		st.settle(in)
		return seq, nil
	}
	var now *schemas.Hash
	if exists {
		h := schemas.HashBytes(state)
		now = &h
	}
	if !hashPtrEqual(now, rec.StateHash) {
		return 0, fmt.Errorf("its state is %s, the check reached %s", hashText(now), hashText(rec.StateHash))
	}
	seq := st.emit(journal.KindMove, schemas.MustMarshal(rec))
	st.pinTo(in, nil, "")
	st.settle(in)
	return seq, nil
}

// replayMove re-applies a journaled move: not checked again, but it must
// name the cell's pin, the current manifest and the cell's state.
func (st *state) replayMove(r journal.Record) error {
	var mr records.MoveRec
	if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
	}
	bad := func(msg string) error {
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: mr.Workflow, Key: mr.Key, Msg: msg}
	}
	if st.cur == nil || st.cur.m.Hash != mr.To {
		return bad(fmt.Sprintf("a move to %s, but the current manifest is another", mr.To))
	}
	in := st.lookupInstance(mr.Workflow, mr.Key)
	if in == nil || in.pin == nil || in.pin.m.Hash != mr.From {
		return bad(fmt.Sprintf("a move from %s of a cell not pinned to it", mr.From))
	}
	if _, err := st.move(in, &mr); err != nil {
		return bad(err.Error())
	}
	return nil
}

// ReplayManifest is the offline check (`aosd replay --manifest`): without
// changing anything, it replays the journal of s in a scratch world (from
// genesis when the journal starts there, else from its oldest snapshot)
// and checks m's code against every step of every cell of m's workflows,
// as an upgrade checks a cell. Every cell that stepped in that journal is
// reported: UpgradeWouldMove or UpgradeDiverged. cfg is the configuration
// the world runs with (its builtins and wasm engine).
func ReplayManifest(ctx context.Context, s Stores, cfg Config, m *manifest.Manifest) (*UpgradeReport, error) {
	rep := &UpgradeReport{To: m.Hash, ToName: m.Name, DryRun: true, Height: s.Journal.Height(), Cells: []UpgradeCell{}}
	sc := ScratchStores(s, rep.Height)
	genesis := s.Journal.First() <= 1
	if !genesis {
		first := s.Journal.First()
		// The oldest snapshot the journal still holds: replay starts
		// from the newest one before the one after it.
		var oldest uint64
		if err := s.Journal.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
			if seq >= first {
				oldest = seq
			}
			return true, nil
		}); err != nil {
			return nil, err
		}
		sc.Journal = &beforeLog{scratchLog: sc.Journal.(*scratchLog), before: oldest + 1}
	}
	tap := newUpgradeTap(m, nil)
	res, err := runCheck(ctx, sc, cfg, genesis, tap, rep)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedKeys(res) {
		r := res[id]
		c := r.UpgradeCell
		c.Outcome = UpgradeWouldMove
		if c.Divergence != nil {
			c.Outcome = UpgradeDiverged
		}
		rep.Cells = append(rep.Cells, c)
	}
	return rep, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
