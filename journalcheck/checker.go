package journalcheck

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The model the check keeps while it reads: what the kernel's loop keeps
// of the same journal, reduced to what the rules need. Its memory is the
// live part of the world (instances with deliveries, intents or a failure,
// pending intents with their last frame seq, the step whose output is
// being read) and a bounded memory of settled intents; nothing grows with
// the journal.

// delivery is one input waiting in an instance's mailbox.
type delivery struct {
	seq  uint64
	kind journal.Kind // event, receipt, frame, cancel or recover (a retry)
	// optional marks a stream frame: the kernel delivers it only when the
	// origin workflow's event takes frames, which a journal does not say.
	optional bool
	stamp    *records.Stamp // the stamp the delivery carries (nil: unknown)
	depth    uint64         // cascade depth of the event (0 for inputs from outside)
}

// failure is what a failed instance keeps.
type failure struct {
	fault, input uint64
	// skipped counts the events the instance did not take while failed
	// under limits from before parking (journals written then).
	skipped uint64
	// retry is the failed delivery kept for a retry; nil when the input
	// never reached the instance.
	retry *delivery
	// retryUnknown: the failed input was a receipt, which the kernel keeps
	// for a retry only if the workflow could take it; the journal does not
	// say, so a retry of it is not judged.
	retryUnknown bool
}

// instance is a workflow instance that is not at rest.
type instance struct {
	id      string
	wf      string
	key     []byte
	mailbox []delivery
	// parked are the deliveries kept for it while it cannot take them
	// (failed, or its workflow held by a module set aside), in order.
	parked  []delivery
	intents map[schemas.Hash]struct{}
	failed  *failure
}

// intent is a pending intent.
type intent struct {
	id        string // its origin instance
	effect    string
	lastFrame uint64
}

// settled is a settled intent the check remembers.
type settled struct {
	seq       uint64 // the record that settled it
	byReceipt bool
	cancelled bool // settled by an operator's cancel record
}

// output is the step whose emitted events and intents are read next.
type output struct {
	step    uint64
	wf      string
	key     []byte
	wfHash  schemas.Hash
	emitted []uint64
	intents []schemas.Hash
	next    int            // index into emitted, then intents
	parent  *records.Stamp // the consumed input's stamp (nil: unknown)
	depth   uint64
}

// lookup is a consumed input that was not in its instance's mailbox: what
// the record is decides the rule, once the pass is over (finish).
type lookup struct {
	v     Violation
	input uint64
}

type checker struct {
	opt Options
	rep *Report

	prev        uint64 // the last seq read
	hasManifest bool
	manifest    schemas.Hash
	// live are the live manifests (an apply --pin keeps the one it
	// replaces live; a plain apply leaves only itself; a retire removes
	// one; a snapshot lists them); nil before the first manifest.
	live    map[schemas.Hash]bool
	logical uint64 // the highest logical time stamped so far

	insts   map[string]*instance
	busy    map[string]*instance // instances with a non-empty mailbox
	pending map[schemas.Hash]*intent
	settled map[schemas.Hash]settled
	fifo    []schemas.Hash // settled, oldest first; fifo[head:] are remembered
	head    int

	out *output

	lastCheckpoint    uint64
	checkpointSnapped bool

	// world is the world's identity from its world record (or the seed
	// snapshot) on; "" before it. What the journal binds to a world must
	// name this one.
	world string
	// parking: the limits in force keep events for instances that cannot
	// take them (max_parked_per_instance > 0); false in journals written
	// before parking, where a failed instance skipped them.
	parking bool
	// held maps each workflow held by a module set aside to that module;
	// aside maps the modules set aside to the workflows they hold.
	held  map[string]string
	aside map[string][]string

	lookups []lookup
}

func newChecker(opt Options) *checker {
	return &checker{opt: opt, rep: &Report{}, insts: map[string]*instance{}, busy: map[string]*instance{},
		pending: map[schemas.Hash]*intent{}, settled: map[schemas.Hash]settled{},
		held: map[string]string{}, aside: map[string][]string{}}
}

func instanceID(wf string, key []byte) string { return wf + "\x00" + string(key) }

func (c *checker) instance(wf string, key []byte) *instance {
	id := instanceID(wf, key)
	in := c.insts[id]
	if in == nil {
		in = &instance{id: id, wf: wf, key: key}
		c.insts[id] = in
	}
	return in
}

// rest forgets an instance at rest, as the kernel's table does.
func (c *checker) rest(in *instance) {
	if len(in.mailbox) == 0 {
		delete(c.busy, in.id)
		if len(in.intents) == 0 && in.failed == nil && len(in.parked) == 0 {
			delete(c.insts, in.id)
		}
	}
}

// holds says whether in cannot take a delivery now: it is failed, its
// workflow is held by a module set aside, or deliveries already wait for it.
func (c *checker) holds(in *instance) bool {
	return in.failed != nil || len(in.parked) > 0 || c.held[in.wf] != ""
}

// offer delivers d to in, or parks it when in holds (a failed instance
// under limits from before parking skips it instead).
func (c *checker) offer(in *instance, d delivery) {
	switch {
	case !c.holds(in):
		c.deliver(in, d)
	case in.failed != nil && !c.parking:
		in.failed.skipped++
	default:
		in.parked = append(in.parked, d)
	}
}

// parkedRange is how many deliveries are parked for in: at least the ones
// the kernel parks for sure, at most with the stream frames too (the
// kernel parks a frame only if the workflow takes frames, which the
// journal does not say).
func parkedRange(ds []delivery) (lo, hi uint64) {
	for _, d := range ds {
		hi++
		if d.optional {
			continue
		}
		lo++
	}
	return lo, hi
}

// limits notes whether the limits in force park events.
func (c *checker) limits(l *records.Limits) {
	if l != nil {
		c.parking = l.MaxParkedPerInstance > 0
	}
}

func (c *checker) violate(seq uint64, rule, wf string, key []byte, format string, a ...any) {
	c.add(Violation{Seq: seq, Rule: rule, Workflow: wf, Key: key, Detail: fmt.Sprintf(format, a...)})
}

// record checks one record and applies it to the model.
func (c *checker) record(r journal.Record) {
	c.rep.Records++
	if r.Seq != c.prev+1 {
		c.violate(r.Seq, RuleSeqGap, "", nil, "record %d follows record %d; seqs must rise by one", r.Seq, c.prev)
	}
	c.prev = r.Seq
	v, err := records.Decode(r)
	if err != nil || v == nil {
		what := fmt.Sprintf("unknown record kind %q", r.Kind)
		if err != nil {
			what = fmt.Sprintf("the %s record does not decode: %v", r.Kind, err)
		}
		c.violate(r.Seq, RuleRecordDecode, "", nil, "%s", what)
		c.out = nil
		return
	}
	if c.out != nil && c.takeOutput(r.Seq, v) {
		return
	}
	switch rec := v.(type) {
	case *records.ManifestRec:
		c.manifestRec(r.Seq, rec)
		c.limits(rec.Limits)
	case *records.ConfigRec:
		c.idle(r.Seq, "a limits change")
		c.limits(&rec.Limits)
	case *records.CheckpointRec:
		c.idle(r.Seq, "a checkpoint")
		c.lastCheckpoint, c.checkpointSnapped = r.Seq, false
	case *records.SnapshotRec:
		c.idle(r.Seq, "a snapshot record")
		c.snapshotRec(r.Seq, rec)
	case *records.WorldRec:
		c.idle(r.Seq, "the world record")
		c.worldRec(r.Seq, rec)
	case *records.EventRec:
		c.needManifest(r.Seq, "an event")
		if rec.Origin != nil {
			c.violate(r.Seq, RuleEventOrigin, rec.Origin.Workflow, rec.Origin.Key,
				"an event emitted by step %d, but it is not among the records that follow that step", rec.Origin.Step)
			c.deliverEvent(r.Seq, rec, rec.Origin.Depth)
			return
		}
		c.idle(r.Seq, "an ingress event")
		c.freshStamp(r.Seq, &rec.Stamp, "", nil)
		c.deliverEvent(r.Seq, rec, 0)
	case *records.StepRec:
		c.needManifest(r.Seq, "a step")
		c.stepRec(r.Seq, rec)
	case *records.FaultRec:
		c.needManifest(r.Seq, "a fault")
		c.faultRec(r.Seq, rec)
	case *records.IntentRec:
		c.needManifest(r.Seq, "an intent")
		c.violate(r.Seq, RuleStepOutput, rec.OriginWorkflow, rec.OriginKey,
			"intent %s does not follow the step that lists it", rec.Hash)
		c.open(r.Seq, rec)
	case *records.ReceiptRec:
		c.needManifest(r.Seq, "a receipt")
		c.idle(r.Seq, "a receipt")
		c.receiptRec(r.Seq, rec)
	case *records.DropRec:
		c.needManifest(r.Seq, "a drop")
		c.idle(r.Seq, "a drop")
		c.bound(r.Seq, "the dropped receipt for intent "+rec.Receipt.Intent.String(), rec.Receipt.World, "", nil)
		if it := c.pending[rec.Receipt.Intent]; it != nil {
			in := c.insts[it.id]
			c.violate(r.Seq, RuleDropPending, in.wf, in.key,
				"a receipt for intent %s was dropped, but the intent was pending: it should have been admitted and delivered", rec.Receipt.Intent)
		}
	case *records.FrameRec:
		c.needManifest(r.Seq, "a stream frame")
		c.idle(r.Seq, "a stream frame")
		c.frameRec(r.Seq, rec)
	case *records.RecoverRec:
		c.needManifest(r.Seq, "a recover")
		c.idle(r.Seq, "a recover")
		c.recoverRec(r.Seq, rec)
	case *records.ModuleRec:
		c.needManifest(r.Seq, "a module record")
		c.moduleRec(r.Seq, rec)
	case *records.RetireRec:
		c.needManifest(r.Seq, "a retire")
		c.idle(r.Seq, "a retire")
		delete(c.live, rec.Hash)
	case *records.CancelRec:
		c.needManifest(r.Seq, "a cancel")
		c.idle(r.Seq, "a cancel")
		c.cancelRec(r.Seq, rec)
	case *records.MoveRec:
		c.needManifest(r.Seq, "a move")
		if rec.Since != "rest" {
			// An upgrade's move is an operator's input, taken only at an
			// idle world; a migration at rest follows the step that
			// brought its cell to rest, inside that input's cascade.
			c.idle(r.Seq, "a move")
		}
		c.moveRec(r.Seq, rec)
	}
}

// needManifest reports a record that cannot come before the first manifest.
func (c *checker) needManifest(seq uint64, what string) {
	if !c.hasManifest {
		c.violate(seq, RuleManifestFirst, "", nil, "%s before any manifest was applied", what)
	}
}

// idle is a point where the world takes an input from outside (or journals
// a manifest, limits, a checkpoint or a snapshot): every earlier input has
// run to idle, so no mailbox holds a delivery. Frames the workflow did not
// take are forgotten here.
func (c *checker) idle(seq uint64, what string) {
	for _, id := range c.busyIDs() {
		in := c.busy[id]
		for _, d := range in.mailbox {
			if !d.optional {
				c.violate(d.seq, RuleUndelivered, in.wf, in.key,
					"%s %d was delivered to this instance, but no step or fault consumed it before %s at seq %d", d.kind, d.seq, what, seq)
				break
			}
		}
		in.mailbox = nil
		c.rest(in)
	}
}

// busyIDs are the ids of the busy instances, sorted: violations must not
// depend on map order.
func (c *checker) busyIDs() []string {
	if len(c.busy) == 0 {
		return nil
	}
	ids := make([]string, 0, len(c.busy))
	for id := range c.busy {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// end is the journal's end: a durable journal ends between two inputs,
// each run to idle.
func (c *checker) end() {
	if o := c.out; o != nil {
		c.violate(o.step, RuleStepOutput, o.wf, o.key, "the journal ends inside the output of step %d: %d of its %d events and intents follow it",
			o.step, o.next, len(o.emitted)+len(o.intents))
		c.out = nil
	}
	c.idle(c.prev+1, "the journal's end")
}

func (c *checker) manifestRec(seq uint64, rec *records.ManifestRec) {
	// An apply --pin (rec.Pin) is made whatever is in flight: what is in
	// flight stays on the manifest it was on (kernel/pins.go).
	if c.hasManifest && !rec.Pin {
		var running []string
		for _, id := range c.busyIDs() {
			in := c.busy[id]
			if slices.ContainsFunc(in.mailbox, func(d delivery) bool { return !d.optional }) {
				running = append(running, fmt.Sprintf("%s key %s", in.wf, records.KeyJSON(in.key)))
			}
		}
		if len(running) > 0 || len(c.pending) > 0 {
			what := fmt.Sprintf("%d intents in flight", len(c.pending))
			if h, it := c.anyPending(); it != nil {
				in := c.insts[it.id]
				what += fmt.Sprintf(" (such as %s of %s key %s)", h, in.wf, records.KeyJSON(in.key))
			}
			if len(running) > 0 {
				what += fmt.Sprintf(" and %d instances running (such as %s)", len(running), running[0])
			}
			c.violate(seq, RuleApplyNotQuiescent, "", nil, "manifest %s applied while the world was not quiescent: %s", rec.Hash, what)
		}
	}
	c.idle(seq, "a manifest")
	if !rec.Pin || c.live == nil {
		c.live = map[schemas.Hash]bool{}
	}
	if c.live != nil {
		c.live[rec.Hash] = true
	}
	c.hasManifest, c.manifest = true, rec.Hash
}

// moveRec checks a move (aosd upgrade, kernel/upgrade.go): to the current
// manifest, from another live one, of an instance with nothing in its
// mailbox, after every input it names. Whether the instance was pinned to
// from, and whether the current code reproduced its steps, needs the
// code: replay judges that (it refuses a move of an instance not pinned to
// from, and the upgrade checked the steps before journaling it).
func (c *checker) moveRec(seq uint64, rec *records.MoveRec) {
	switch {
	case rec.To != c.manifest:
		c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move to manifest %s, but the current manifest is %s", rec.To, c.manifest)
	case rec.From == rec.To:
		c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move from manifest %s to itself", rec.From)
	case !c.live[rec.From]:
		c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move from manifest %s, which is not live (never applied, replaced by a plain apply, or retired)", rec.From)
	case rec.Since == "rest" && (len(rec.Inputs) > 0 || rec.Migrated == nil || rec.StateHash == nil):
		c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move at rest (since \"rest\") must migrate a state (migrated and state_hash) and name no input")
	case rec.Since != "rest" && len(rec.Inputs) == 0:
		c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move that names no input checked")
	}
	for i, in := range rec.Inputs {
		if in >= seq || (i > 0 && in <= rec.Inputs[i-1]) {
			c.violate(seq, RuleMove, rec.Workflow, rec.Key, "a move whose inputs %v do not rise before it", rec.Inputs)
			break
		}
	}
}

// anyPending is the smallest pending intent hash, to name one.
func (c *checker) anyPending() (schemas.Hash, *intent) {
	var best schemas.Hash
	var bit *intent
	for h, it := range c.pending {
		if bit == nil || string(h[:]) < string(best[:]) {
			best, bit = h, it
		}
	}
	return best, bit
}

func (c *checker) snapshotRec(seq uint64, rec *records.SnapshotRec) {
	switch {
	case c.lastCheckpoint == 0:
		c.violate(seq, RuleSnapshotCheckpoint, "", nil, "the snapshot names checkpoint %d, but no checkpoint comes before it", rec.Checkpoint)
	case rec.Checkpoint != c.lastCheckpoint:
		c.violate(seq, RuleSnapshotCheckpoint, "", nil, "the snapshot names checkpoint %d, but the latest checkpoint is %d", rec.Checkpoint, c.lastCheckpoint)
	case c.checkpointSnapped:
		c.violate(seq, RuleSnapshotCheckpoint, "", nil, "checkpoint %d already has a snapshot record", rec.Checkpoint)
	}
	c.checkpointSnapped = true
}

// freshStamp checks a stamp the loop took from its clock for the record at
// seq (ingress events, receipts, frames, recovers).
func (c *checker) freshStamp(seq uint64, s *records.Stamp, wf string, key []byte) {
	if s.Height != seq-1 {
		c.violate(seq, RuleStampHeight, wf, key, "the stamp says journal height %d; the record's seq is %d", s.Height, seq)
	}
	if s.LogicalNs <= c.logical {
		c.violate(seq, RuleStampTime, wf, key, "logical time %d does not rise above %d, stamped before", s.LogicalNs, c.logical)
	}
	c.logical = max(c.logical, s.LogicalNs)
	if c.hasManifest && s.ManifestHash != c.manifest {
		c.violate(seq, RuleStampManifest, wf, key, "the stamp names manifest %s; the current manifest is %s", s.ManifestHash, c.manifest)
	}
}

// childStamp checks the stamp of an event a step emitted: its step's input
// stamp, with entropy derived from it and the event's seq.
func (c *checker) childStamp(seq uint64, s, parent *records.Stamp, wf string, key []byte) {
	c.logical = max(c.logical, s.LogicalNs)
	if s.Height != seq-1 {
		c.violate(seq, RuleStampHeight, wf, key, "the stamp says journal height %d; the record's seq is %d", s.Height, seq)
	}
	if parent == nil {
		return
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seq)
	want := schemas.HashBytes(append(append([]byte(nil), parent.Entropy...), buf[:]...))
	switch {
	case s.NowNs != parent.NowNs || s.LogicalNs != parent.LogicalNs:
		c.violate(seq, RuleStampChild, wf, key, "the emitted event's time (%d, logical %d) is not its step's input's (%d, logical %d)",
			s.NowNs, s.LogicalNs, parent.NowNs, parent.LogicalNs)
	case s.ManifestHash != parent.ManifestHash:
		c.violate(seq, RuleStampChild, wf, key, "the emitted event's stamp names manifest %s, its step's input %s", s.ManifestHash, parent.ManifestHash)
	case string(s.Entropy) != string(want[:]):
		c.violate(seq, RuleStampChild, wf, key, "the emitted event's entropy is not derived from its step's input's entropy and its seq")
	}
}

// deliverEvent puts an event into the mailbox of each target, or parks it
// for a target that holds (a failed one skips it under old limits).
func (c *checker) deliverEvent(seq uint64, rec *records.EventRec, depth uint64) {
	stamp := &rec.Stamp
	for _, t := range rec.Targets {
		c.offer(c.instance(t.Workflow, t.Key), delivery{seq: seq, kind: journal.KindEvent, stamp: stamp, depth: depth})
	}
}

func (c *checker) deliver(in *instance, d delivery) {
	in.mailbox = append(in.mailbox, d)
	c.busy[in.id] = in
}

// consume takes the delivery of input off in's mailbox for the step or
// fault at seq. Frames before it were not taken by the workflow. It
// returns nil when input was not there (the violation is reported).
func (c *checker) consume(in *instance, seq, input uint64, what string) *delivery {
	for len(in.mailbox) > 0 && in.mailbox[0].optional && in.mailbox[0].seq != input {
		in.mailbox = in.mailbox[1:]
	}
	if input >= seq {
		c.violate(seq, RuleStepInput, in.wf, in.key, "%s consumes seq %d, which does not come before it", what, input)
		return nil
	}
	i := slices.IndexFunc(in.mailbox, func(d delivery) bool { return d.seq == input })
	if i < 0 {
		if len(c.rep.Violations)+len(c.lookups) >= c.opt.MaxViolations {
			c.rep.Omitted++ // it would not be listed: no need to classify it
			return nil
		}
		c.lookups = append(c.lookups, lookup{input: input, v: Violation{Seq: seq, Workflow: in.wf, Key: in.key, Detail: what}})
		return nil
	}
	d := in.mailbox[i]
	if i > 0 && !in.mailbox[0].optional {
		c.violate(seq, RuleStepInput, in.wf, in.key, "%s consumes seq %d, but %s %d, delivered to the instance before it, is still waiting",
			what, input, in.mailbox[0].kind, in.mailbox[0].seq)
	}
	in.mailbox = slices.Delete(in.mailbox, i, i+1)
	if len(in.mailbox) == 0 {
		in.mailbox = nil
	}
	return &d
}

// classify words a consumed input that was not in the mailbox by what the
// record at that seq is.
func (c *checker) classify(ctx context.Context, j Journal, l lookup) Violation {
	v := l.v
	v.Rule = RuleStepInput
	what := v.Detail
	if ctx.Err() != nil || l.input < c.rep.From {
		v.Detail = fmt.Sprintf("%s consumes seq %d, which was not delivered to this instance", what, l.input)
		return v
	}
	r, err := journal.ReadAt(j, l.input)
	switch {
	case err != nil:
		v.Detail = fmt.Sprintf("%s consumes seq %d, which the journal does not hold", what, l.input)
	case r.Kind == journal.KindDrop:
		v.Rule = RuleDropDelivered
		v.Detail = fmt.Sprintf("%s consumes the drop record %d: a dropped receipt is never delivered", what, l.input)
	default:
		v.Detail = fmt.Sprintf("%s consumes the %s record %d, which was not waiting for this instance (not delivered to it, or consumed already)", what, r.Kind, l.input)
	}
	return v
}

func (c *checker) stepRec(seq uint64, rec *records.StepRec) {
	in := c.instance(rec.Workflow, rec.Key)
	o := &output{step: seq, wf: rec.Workflow, key: rec.Key, wfHash: rec.WorkflowHash, emitted: rec.Emitted, intents: rec.Intents}
	if in.failed != nil {
		c.violate(seq, RuleStepAfterFailure, rec.Workflow, rec.Key, "a step of an instance failed by the fault at seq %d, which no recover has answered", in.failed.fault)
	} else if d := c.consume(in, seq, rec.Input, "the step"); d != nil {
		o.parent, o.depth = d.stamp, d.depth
	}
	c.rest(in)
	for i, e := range rec.Emitted {
		if want := seq + 1 + uint64(i); e != want {
			c.violate(seq, RuleStepOutput, rec.Workflow, rec.Key, "the step lists event %d as its emitted event %d; the events a step emits follow it directly (want %d)", e, i, want)
			break
		}
	}
	if len(rec.Emitted)+len(rec.Intents) > 0 {
		c.out = o
	}
}

func (c *checker) faultRec(seq uint64, rec *records.FaultRec) {
	switch rec.Class {
	case "", "environmental", "budget":
	default:
		c.violate(seq, RuleFaultClass, rec.Workflow, rec.Key, "unknown fault class %q", rec.Class)
	}
	in := c.instance(rec.Workflow, rec.Key)
	if in.failed != nil {
		c.violate(seq, RuleStepAfterFailure, rec.Workflow, rec.Key, "a fault of an instance failed by the fault at seq %d, which no recover has answered", in.failed.fault)
		c.rest(in)
		return
	}
	d := c.consume(in, seq, rec.Input, "the fault")
	f := &failure{fault: seq, input: rec.Input}
	if d != nil {
		f.retry = d
		f.retryUnknown = d.kind == journal.KindReceipt || d.kind == journal.KindCancel
	}
	if c.parking {
		in.parked = append(in.mailbox, in.parked...)
	} else {
		f.skipped = uint64(len(in.mailbox))
	}
	in.failed, in.mailbox = f, nil
	for _, h := range sortedHashes(in.intents) {
		c.settle(h, seq, false)
	}
	in.intents = nil
	c.rest(in)
}

func sortedHashes(m map[schemas.Hash]struct{}) []schemas.Hash {
	out := make([]schemas.Hash, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b schemas.Hash) int { return compareHash(a, b) })
	return out
}

func compareHash(a, b schemas.Hash) int {
	switch {
	case string(a[:]) < string(b[:]):
		return -1
	case string(a[:]) > string(b[:]):
		return 1
	}
	return 0
}

// takeOutput reads the record at seq as the next output of the step
// before it. It returns false when the record is not that output (which is
// then reported) and must be checked on its own.
func (c *checker) takeOutput(seq uint64, v any) bool {
	o := c.out
	if o.next < len(o.emitted) {
		ev, ok := v.(*records.EventRec)
		if !ok || ev.Origin == nil {
			c.violate(seq, RuleStepOutput, o.wf, o.key, "step %d lists event %d as emitted, but seq %d is %s", o.step, o.emitted[o.next], seq, describe(v))
			c.out = nil
			return false
		}
		c.emittedEvent(seq, ev)
	} else {
		it, ok := v.(*records.IntentRec)
		if !ok {
			c.violate(seq, RuleStepOutput, o.wf, o.key, "step %d lists intent %s, but seq %d is %s", o.step, o.intents[o.next-len(o.emitted)], seq, describe(v))
			c.out = nil
			return false
		}
		c.openedIntent(seq, it)
	}
	if o.next++; o.next == len(o.emitted)+len(o.intents) {
		c.out = nil
	}
	return true
}

// describe names a decoded record for a message.
func describe(v any) string {
	switch rec := v.(type) {
	case *records.EventRec:
		if rec.Origin != nil {
			return fmt.Sprintf("an event emitted by step %d", rec.Origin.Step)
		}
		return "an ingress event"
	case *records.StepRec:
		return "a step"
	case *records.FaultRec:
		return "a fault"
	case *records.IntentRec:
		return "an intent"
	case *records.ReceiptRec:
		return "a receipt"
	case *records.DropRec:
		return "a drop"
	case *records.FrameRec:
		return "a stream frame"
	case *records.ManifestRec:
		return "a manifest"
	case *records.ConfigRec:
		return "a limits change"
	case *records.RecoverRec:
		return "a recover"
	case *records.CheckpointRec:
		return "a checkpoint"
	case *records.SnapshotRec:
		return "a snapshot record"
	case *records.ModuleRec:
		return "a module record"
	case *records.RetireRec:
		return "a retire"
	case *records.MoveRec:
		return "a move"
	}
	return fmt.Sprintf("a %T", v)
}

// emittedEvent checks an event the step before it emitted.
func (c *checker) emittedEvent(seq uint64, ev *records.EventRec) {
	o := c.out
	org := ev.Origin
	switch {
	case seq != o.emitted[o.next]:
		c.violate(seq, RuleStepOutput, o.wf, o.key, "step %d lists event %d as its emitted event %d, but that event is at seq %d", o.step, o.emitted[o.next], o.next, seq)
	case org.Step != o.step || org.Workflow != o.wf || string(org.Key) != string(o.key):
		c.violate(seq, RuleEventOrigin, o.wf, o.key, "the event names step %d of %s key %s as its origin, but follows step %d of this instance",
			org.Step, org.Workflow, records.KeyJSON(org.Key), o.step)
	case o.parent != nil && org.Depth != o.depth+1:
		c.violate(seq, RuleEventOrigin, o.wf, o.key, "the event's cascade depth is %d; its step's input was at depth %d", org.Depth, o.depth)
	}
	c.childStamp(seq, &ev.Stamp, o.parent, o.wf, o.key)
	c.deliverEvent(seq, ev, org.Depth)
}

// openedIntent checks an intent the step before it opened.
func (c *checker) openedIntent(seq uint64, it *records.IntentRec) {
	o := c.out
	i := o.next - len(o.emitted)
	if want := o.intents[i]; it.Hash != want {
		c.violate(seq, RuleIntentHash, o.wf, o.key, "step %d lists intent %s as its intent %d, but the record is intent %s", o.step, want, i, it.Hash)
	}
	switch {
	case it.OriginWorkflow != o.wf || string(it.OriginKey) != string(o.key):
		c.violate(seq, RuleIntentOrigin, o.wf, o.key, "intent %s names %s key %s as its origin, but follows step %d of this instance",
			it.Hash, it.OriginWorkflow, records.KeyJSON(it.OriginKey), o.step)
	case it.OriginWorkflowHash != o.wfHash:
		c.violate(seq, RuleIntentOrigin, o.wf, o.key, "intent %s names workflow hash %s; its step ran %s", it.Hash, it.OriginWorkflowHash, o.wfHash)
	case it.EmittedAt != o.step || it.Index != uint64(i):
		c.violate(seq, RuleIntentOrigin, o.wf, o.key, "intent %s says it was emitted at seq %d as effect %d; it is effect %d of step %d",
			it.Hash, it.EmittedAt, it.Index, i, o.step)
	}
	c.open(seq, it)
}

// worldRec takes the world's identity, journaled once.
func (c *checker) worldRec(seq uint64, rec *records.WorldRec) {
	if err := records.CheckWorldID(rec.ID); err != nil {
		c.violate(seq, RuleWorldRecord, "", nil, "%v", err)
	}
	if c.world != "" {
		c.violate(seq, RuleWorldRecord, "", nil, "a second world record (%s): the world is %s already", rec.ID, c.world)
		return
	}
	c.world = rec.ID
}

// bound checks the world a record binds (an intent) or names (a receipt,
// drop or frame): the journal's identity once its world record is read,
// none before (intents opened and receipts signed before the world had
// one).
func (c *checker) bound(seq uint64, what, world, wf string, key []byte) {
	switch {
	case world == c.world:
	case c.world == "":
		c.violate(seq, RuleWorldBinding, wf, key, "%s names world %s, but the journal has no world record before it", what, world)
	default:
		name := "world " + world
		if world == "" {
			name = "no world"
		}
		c.violate(seq, RuleWorldBinding, wf, key, "%s names %s; the journal's world is %s", what, name, c.world)
	}
}

// open checks an intent's identity and makes it pending.
func (c *checker) open(seq uint64, it *records.IntentRec) {
	wf, key := it.OriginWorkflow, it.OriginKey
	c.bound(seq, "intent "+it.Hash.String(), it.World, wf, key)
	if got := schemas.HashBytes(records.EncodeIntentID(nil, &it.IntentID)); got != it.Hash {
		c.violate(seq, RuleIntentHash, wf, key, "intent %s: its identity hashes to %s", it.Hash, got)
	}
	if _, ok := c.pending[it.Hash]; ok {
		c.violate(seq, RuleIntentDuplicate, wf, key, "intent %s is opened again while pending", it.Hash)
		return
	}
	if s, ok := c.settled[it.Hash]; ok {
		c.violate(seq, RuleIntentDuplicate, wf, key, "intent %s is opened again after the record at seq %d settled it", it.Hash, s.seq)
		return
	}
	in := c.instance(wf, key)
	if in.intents == nil {
		in.intents = map[schemas.Hash]struct{}{}
	}
	in.intents[it.Hash] = struct{}{}
	c.pending[it.Hash] = &intent{id: in.id, effect: it.Effect}
}

// settle ends a pending intent, remembering the last RememberSettled.
func (c *checker) settle(h schemas.Hash, seq uint64, byReceipt bool) {
	delete(c.pending, h)
	if _, ok := c.settled[h]; !ok {
		c.fifo = append(c.fifo, h)
	}
	c.settled[h] = settled{seq: seq, byReceipt: byReceipt}
	for len(c.fifo)-c.head > c.opt.RememberSettled {
		delete(c.settled, c.fifo[c.head])
		c.head++
	}
	if c.head > 1024 && c.head > len(c.fifo)/2 {
		n := copy(c.fifo, c.fifo[c.head:])
		c.fifo, c.head = c.fifo[:n], 0
	}
}

func (c *checker) receiptRec(seq uint64, rec *records.ReceiptRec) {
	h := rec.Receipt.Intent
	c.bound(seq, "the receipt for intent "+h.String(), rec.Receipt.World, "", nil)
	it := c.pending[h]
	if it == nil {
		c.freshStamp(seq, &rec.Stamp, "", nil)
		s, ok := c.settled[h]
		switch {
		case !ok:
			c.violate(seq, RuleReceiptUnknownIntent, "", nil, "a receipt for intent %s, which is not pending: never opened (or settled more than %d settlements ago)", h, c.opt.RememberSettled)
		case s.cancelled:
			c.violate(seq, RuleReceiptAfterCancel, "", nil, "a receipt for intent %s, which the cancel at seq %d settled: a receipt for a cancelled intent is refused", h, s.seq)
		case s.byReceipt:
			c.violate(seq, RuleReceiptTwice, "", nil, "a second receipt for intent %s, which the receipt at seq %d settled", h, s.seq)
		default:
			c.violate(seq, RuleReceiptAfterFailure, "", nil, "a receipt for intent %s, which the fault at seq %d settled when its instance failed: a late receipt is journaled as a drop", h, s.seq)
		}
		return
	}
	in := c.insts[it.id]
	c.freshStamp(seq, &rec.Stamp, in.wf, in.key)
	if rec.Receipt.Effect != it.effect {
		c.violate(seq, RuleReceiptEffect, in.wf, in.key, "the receipt for intent %s is for effect %s; the intent is for %s", h, rec.Receipt.Effect, it.effect)
	}
	c.settle(h, seq, true)
	delete(in.intents, h)
	c.offer(in, delivery{seq: seq, kind: journal.KindReceipt, stamp: &rec.Stamp})
}

// cancelRec checks an operator's cancel: of a pending intent, naming its
// effect and origin. It settles the intent, and the cancellation is
// delivered to the origin instance (a step takes it, or a fault says the
// workflow could not).
func (c *checker) cancelRec(seq uint64, rec *records.CancelRec) {
	h := rec.Intent
	it := c.pending[h]
	if it == nil {
		c.freshStamp(seq, &rec.Stamp, rec.Workflow, rec.Key)
		detail := fmt.Sprintf("a cancel of intent %s, which is not pending: never opened (or settled more than %d settlements ago)", h, c.opt.RememberSettled)
		if s, ok := c.settled[h]; ok {
			detail = fmt.Sprintf("a cancel of intent %s, which the record at seq %d settled", h, s.seq)
		}
		c.violate(seq, RuleCancelNotPending, rec.Workflow, rec.Key, "%s", detail)
		return
	}
	in := c.insts[it.id]
	c.freshStamp(seq, &rec.Stamp, in.wf, in.key)
	if rec.Effect != it.effect || rec.Workflow != in.wf || string(rec.Key) != string(in.key) {
		c.violate(seq, RuleCancelMismatch, in.wf, in.key, "the cancel of intent %s names effect %s of workflow %s; the intent is for %s, opened by that instance",
			h, rec.Effect, rec.Workflow, it.effect)
	}
	c.settle(h, seq, false)
	c.settled[h] = settled{seq: seq, cancelled: true}
	delete(in.intents, h)
	c.offer(in, delivery{seq: seq, kind: journal.KindCancel, stamp: &rec.Stamp})
}

func (c *checker) frameRec(seq uint64, rec *records.FrameRec) {
	if rec.Signature != nil { // frames journaled before frames were signed name nothing
		c.bound(seq, "the stream frame for intent "+rec.Intent.String(), rec.World, "", nil)
	}
	it := c.pending[rec.Intent]
	if it == nil {
		c.freshStamp(seq, &rec.Stamp, "", nil)
		c.violate(seq, RuleFrameNotPending, "", nil, "a stream frame for intent %s, which is not pending", rec.Intent)
		return
	}
	in := c.insts[it.id]
	c.freshStamp(seq, &rec.Stamp, in.wf, in.key)
	if rec.Seq <= it.lastFrame {
		c.violate(seq, RuleFrameSeqNotRising, in.wf, in.key, "stream frame %d for intent %s does not follow frame %d", rec.Seq, rec.Intent, it.lastFrame)
	}
	if rec.Effect != "" && rec.Effect != it.effect {
		c.violate(seq, RuleFrameEffect, in.wf, in.key, "the stream frame for intent %s is for effect %s; the intent is for %s", rec.Intent, rec.Effect, it.effect)
	}
	it.lastFrame = max(it.lastFrame, rec.Seq)
	c.offer(in, delivery{seq: seq, kind: journal.KindFrame, optional: true, stamp: &rec.Stamp})
}

func (c *checker) recoverRec(seq uint64, rec *records.RecoverRec) {
	c.freshStamp(seq, &rec.Stamp, rec.Workflow, rec.Key)
	switch rec.Action {
	case "retry", "reset", "skip":
	default:
		c.violate(seq, RuleRecoverAction, rec.Workflow, rec.Key, "unknown recover action %q (retry, reset or skip)", rec.Action)
	}
	in := c.insts[instanceID(rec.Workflow, rec.Key)]
	if in == nil || in.failed == nil {
		c.violate(seq, RuleRecoverNotFailed, rec.Workflow, rec.Key, "a recover (%s of fault %d) for an instance that is not failed", rec.Action, rec.Fault)
		return
	}
	f := in.failed
	lo, hi := parkedRange(in.parked)
	if rec.Fault != f.fault {
		c.violate(seq, RuleRecoverStaleFault, rec.Workflow, rec.Key, "the recover answers fault %d; the instance is failed by the fault at seq %d", rec.Fault, f.fault)
	} else if rec.Input != f.input || rec.Skipped != f.skipped {
		c.violate(seq, RuleRecoverMismatch, rec.Workflow, rec.Key, "the recover says input %d and %d skipped; fault %d failed input %d and %d events were skipped since",
			rec.Input, rec.Skipped, f.fault, f.input, f.skipped)
	} else if rec.Parked < lo || rec.Parked > hi || (rec.DropParked && rec.Parked == 0) {
		c.violate(seq, RuleRecoverMismatch, rec.Workflow, rec.Key, "the recover says %d parked events (dropped: %t); %s were parked for the instance",
			rec.Parked, rec.DropParked, countRange(lo, hi))
	}
	in.failed = nil
	parked := in.parked
	in.parked = nil
	if rec.DropParked {
		parked = nil
	}
	var first *delivery
	if rec.Action == "retry" {
		if f.retry == nil && !f.retryUnknown {
			c.violate(seq, RuleRecoverAction, rec.Workflow, rec.Key, "a retry of fault %d, whose input %d never reached the instance: there is nothing to deliver again", f.fault, f.input)
		}
		d := delivery{seq: seq, kind: journal.KindRecover}
		if f.retry != nil {
			d.stamp, d.depth = f.retry.stamp, f.retry.depth
		}
		first = &d
	}
	c.redeliver(in, first, parked)
	c.rest(in)
}

// redeliver gives an instance that no longer fails first (when not nil) and
// then ds: to its mailbox, or back to its parked list while a module set
// aside holds its workflow.
func (c *checker) redeliver(in *instance, first *delivery, ds []delivery) {
	all := ds
	if first != nil {
		all = append([]delivery{*first}, ds...)
	}
	if len(all) == 0 {
		return
	}
	if c.held[in.wf] != "" {
		in.parked = append(all, in.parked...)
		return
	}
	in.mailbox = append(in.mailbox, all...)
	c.busy[in.id] = in
}

func countRange(lo, hi uint64) string {
	if lo == hi {
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d (stream frames included)", lo, hi)
}

// moduleRec checks a module set aside or resumed (records.ModuleRec).
func (c *checker) moduleRec(seq uint64, rec *records.ModuleRec) {
	switch rec.Action {
	case records.ModuleAside:
		// Inside the cascade of the input whose step timed out: not an
		// idle point. What waits for the held workflows' instances is
		// parked from here.
		if wfs, ok := c.aside[rec.Module]; ok {
			c.violate(seq, RuleModuleAction, "", nil, "module %s is set aside again; it holds %v already", rec.Module, wfs)
			return
		}
		c.aside[rec.Module] = rec.Workflows
		for _, wf := range rec.Workflows {
			c.held[wf] = rec.Module
		}
		for _, id := range c.busyIDs() {
			in := c.busy[id]
			if c.held[in.wf] == rec.Module {
				in.parked = append(in.mailbox, in.parked...)
				in.mailbox = nil
				c.rest(in)
			}
		}
	case records.ModuleResume:
		c.idle(seq, "a module resumed")
		if rec.Stamp == nil {
			c.violate(seq, RuleModuleAction, "", nil, "a resume of module %s without a stamp", rec.Module)
		} else {
			c.freshStamp(seq, rec.Stamp, "", nil)
		}
		wfs, ok := c.aside[rec.Module]
		if !ok {
			c.violate(seq, RuleModuleAction, "", nil, "a resume of module %s, which is not set aside", rec.Module)
			return
		}
		if !slices.Equal(wfs, rec.Workflows) {
			c.violate(seq, RuleModuleResume, "", nil, "the resume of module %s names workflows %v; it was set aside holding %v", rec.Module, rec.Workflows, wfs)
		}
		delete(c.aside, rec.Module)
		var lo, hi uint64
		ids := make([]string, 0, len(c.insts))
		for id, in := range c.insts {
			if c.held[in.wf] == rec.Module && in.failed == nil && len(in.parked) > 0 {
				ids = append(ids, id)
			}
		}
		for _, wf := range wfs {
			if c.held[wf] == rec.Module {
				delete(c.held, wf)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			in := c.insts[id]
			l, h := parkedRange(in.parked)
			lo, hi = lo+l, hi+h
			ds := in.parked
			in.parked = nil
			c.redeliver(in, nil, ds)
		}
		if rec.Parked < lo || rec.Parked > hi {
			c.violate(seq, RuleModuleResume, "", nil, "the resume of module %s says %d parked events; %s were parked for the instances it held that are not failed",
				rec.Module, rec.Parked, countRange(lo, hi))
		}
	default:
		c.violate(seq, RuleModuleAction, "", nil, "unknown module action %q (aside or resume)", rec.Action)
	}
}
