package kernel

import (
	"fmt"
	"time"
)

// FaultBudget is the fault class of an instance whose pending work was cut
// off because the external input that caused it used up its work budget
// (Limits.MaxStepsPerInput, MaxRecordsPerInput, MaxBytesPerInput). It is
// deterministic: the counts are a function of the journal and the limits
// journaled with the world, so replay recomputes the reason and the record
// must match byte for byte; but the step it names never ran, so replay does
// not run it either.
const FaultBudget = "budget"

// workBudget counts what the current external input has caused so far. It
// starts at each driver record that comes from outside the world (an ingress
// event, a receipt, a stream frame, an operator's recover) and counts every
// record journaled and every step run until the next one. Replay starts and
// counts at the same records, so the counts are the same.
type workBudget struct {
	input   uint64 // seq of the driver record, 0 before the first
	steps   int
	records int
	bytes   int
	stopped string // the reason pending work was cut off, once it was
	// deadline is when the input's wall-clock budget (Config.InputTimeout)
	// is spent; zero in replay and without one. It is the host's, never
	// journaled: what it cuts off is an environmental fault.
	deadline time.Time
	timedOut string // the reason pending work was cut off when the deadline passed
}

// beginInput starts a new budget for the driver record about to be
// journaled (its seq is st.seq+1).
func (st *state) beginInput() {
	st.work = workBudget{input: st.seq + 1}
	if d := st.w.cfg.InputTimeout; d > 0 && !st.replaying {
		st.work.deadline = time.Now().Add(d)
	}
}

// overTime says, live, whether the current input has spent its wall-clock
// budget, with the reason of the environmental fault that then fails every
// instance still holding its work (computed once, like budgetReason).
// Replay never asks: it adopts those faults from the journal.
func (st *state) overTime() (string, bool) {
	w := &st.work
	if w.deadline.IsZero() || time.Now().Before(w.deadline) {
		return "", false
	}
	if w.timedOut == "" {
		w.timedOut = fmt.Sprintf("stopped by the host (input %d ran past its wall-clock budget of %s, environmental, not re-run on replay); "+
			"this instance's pending events were not run: they are parked, and a retry delivers them after the input it was cut off at",
			w.input, st.w.cfg.InputTimeout)
	}
	return w.timedOut, true
}

// stepLimit is the wall-clock limit of the next wasm step: StepTimeout, or
// what is left of the input's budget when that is less (at least a
// millisecond: overTime stops the input before a step when none is left),
// and whether it is the latter. Zero means none.
func (st *state) stepLimit() (d time.Duration, input bool) {
	d = st.w.cfg.StepTimeout
	if d < 0 {
		d = 0
	}
	if w := &st.work; !w.deadline.IsZero() {
		left := max(time.Until(w.deadline), time.Millisecond)
		if d == 0 || left < d {
			d, input = left, true
		}
	}
	return d, input
}

// overBudget says which per-input limit the current input has reached, or "".
func (st *state) overBudget() string {
	lim := &st.limits
	w := &st.work
	switch {
	case lim.MaxStepsPerInput > 0 && w.steps >= lim.MaxStepsPerInput:
		return fmt.Sprintf("%d steps (limit %d)", w.steps, lim.MaxStepsPerInput)
	case lim.MaxRecordsPerInput > 0 && w.records >= lim.MaxRecordsPerInput:
		return fmt.Sprintf("%d journal records (limit %d)", w.records, lim.MaxRecordsPerInput)
	case lim.MaxBytesPerInput > 0 && w.bytes >= lim.MaxBytesPerInput:
		return fmt.Sprintf("%d journal bytes (limit %d)", w.bytes, lim.MaxBytesPerInput)
	}
	return ""
}

// budgetReason is the fault reason of every instance cut off for the current
// input: computed once, when the budget first runs out, so each of their
// fault records carries the same text live and on replay. ok is false when
// the budget has not run out.
func (st *state) budgetReason() (string, bool) {
	if st.work.stopped != "" {
		return st.work.stopped, true
	}
	what := st.overBudget()
	if what == "" {
		return "", false
	}
	st.work.stopped = fmt.Sprintf("input %d exceeded its work budget after %s; "+
		"this instance's pending events were not run (a cascade that does not end, or a fan-out larger than the limits: "+
		"raise the limits with `aosd limits set`, fix the workflow, then retry the instance)", st.work.input, what)
	return st.work.stopped, true
}

// stopCascade fails every instance that still has work from the current
// input, in ready-queue order (deterministic: the order the input's events
// reached the mailboxes), with a fault of class (FaultBudget, or
// FaultEnvironmental when the wall-clock budget ran out).
func (st *state) stopCascade(rest []*instance, reason, class string) {
	for _, in := range rest {
		in.queued = false
		if in.failed || len(in.mailbox) == 0 {
			st.settle(in)
			continue
		}
		st.failInstanceClass(in, in.mailbox[0].seq, reason, class)
	}
}
