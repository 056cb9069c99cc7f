package kernel

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/routing"
)

// Parking: events for an instance that cannot take them now are kept for
// it, in journal order, instead of being lost. An instance cannot take
// events while it is failed (until an operator recovers it, recover.go) or
// while the module of its workflow is set aside (until an operator resumes
// it, aside.go); and while events wait for it, later ones wait behind them,
// so it never takes them out of order.
//
// Which events wait is a function of the journal: an event record names its
// targets, a fault record fails its instance, a module record sets a module
// aside, and the limits in force say whether parking is on. Replay rebuilds
// every parked list by running the same code on the same records, snapshots
// carry them, and `aosd journal check` models them (journalcheck).
//
// Parking is bounded per instance by Limits.MaxParkedPerInstance. Ingress
// that would park beyond it is refused (ErrParkedFull), journaling nothing;
// a step whose emitted event would is a business fault of the emitting
// instance (the same for every replay: the parked counts are the
// journal's), so its input is kept for a retry and nothing is lost. Receipts
// and stream frames for an instance whose module is set aside are parked
// whatever the bound: refusing them would lose them, and they are bounded by
// the intents the instance opened.
//
// A journal written before parking (its limits have no
// max_parked_per_instance) replays as it ran: events for a failed instance
// are skipped (counted, never delivered). Opening such a world journals the
// current limits, and parking is on from there.

// ErrParkedFull: an ingress event would park one event more than
// Limits.MaxParkedPerInstance for an instance that cannot take it now.
// Nothing is journaled; recover the instance (or resume its module), or
// raise the limit, then send again.
var ErrParkedFull = errors.New("kernel: parked events at their limit")

// Target is one instance an event was addressed to. Key is canonical CBOR
// (nil for an unkeyed workflow).
type Target struct {
	Workflow string
	Key      []byte
}

// parking says whether events for a failed instance are kept: false only
// under limits journaled before parking existed.
func (st *state) parking() bool { return st.limits.MaxParkedPerInstance > 0 }

// holds says whether in cannot take a delivery now: it is failed, its
// workflow's module is set aside, or events already wait for it.
func (st *state) holds(in *instance) bool {
	return in.failed || len(in.parked) > 0 || (len(st.held) > 0 && st.held[in.wf] != nil)
}

// keeps says whether a delivery in holds is parked (true) or, for a
// failed instance under limits from before parking, skipped.
func (st *state) keeps(in *instance) bool { return st.parking() || !in.failed }

// park keeps d for in, which holds (or counts it skipped under old limits).
// It reports whether d was parked.
func (st *state) park(in *instance, d delivery) bool {
	if !st.keeps(in) {
		in.skipEvent()
		return false
	}
	in.parked = append(in.parked, d)
	return true
}

// parkMailbox moves what waits in in's mailbox to the front of its parked
// list (it holds now: it failed, or its module was set aside), or counts it
// skipped under old limits.
func (st *state) parkMailbox(in *instance) {
	if len(in.mailbox) == 0 {
		return
	}
	if !st.keeps(in) {
		if in.fault != nil {
			in.fault.skipped += uint64(len(in.mailbox))
		}
	} else {
		in.parked = append(in.mailbox, in.parked...)
	}
	in.mailbox = nil
}

// lookupInstance finds the instance of (wf, key) in the table without
// allocating its id (the map lookup of a converted byte slice does not).
func (st *state) lookupInstance(wf string, key []byte) *instance {
	st.idBuf = append(append(append(st.idBuf[:0], wf...), 0), key...)
	return st.instances[string(st.idBuf)]
}

// fullTarget finds a target that would park one event more than the limit:
// extra counts what the same call parks already, by instance id (nil until
// one is held). It returns the instance and how many events it would hold,
// or nil.
func (st *state) fullTarget(targets []routing.Target, extra map[string]int) (*instance, int, map[string]int) {
	if st.failed.len() == 0 && len(st.held) == 0 {
		// Nothing holds (an instance not failed has parked events only
		// while its module is aside): the common case costs no lookup.
		return nil, 0, extra
	}
	for _, t := range targets {
		in := st.lookupInstance(t.Workflow, t.Key)
		if in == nil || !st.holds(in) || !st.keeps(in) {
			continue
		}
		if extra == nil {
			extra = map[string]int{}
		}
		extra[in.id]++
		if n := len(in.parked) + extra[in.id]; n > st.limits.MaxParkedPerInstance {
			return in, n, extra
		}
	}
	return nil, 0, extra
}

// holdReason says why in holds, and what an operator does about it.
func (st *state) holdReason(in *instance) (why, fix string) {
	switch {
	case in.failed:
		return fmt.Sprintf("is failed (fault at seq %d, %s: %s)", in.fault.seq, FaultClassName(in.fault.class), in.reason),
			fmt.Sprintf("recover it (aosd failed retry|skip|reset %s %s, or POST /v1/failed/{workflow}/recover)", in.wf, keyText(in.key))
	case st.held[in.wf] != nil:
		a := st.held[in.wf]
		return fmt.Sprintf("waits for module %s, set aside at seq %d", a.name, a.seq),
			fmt.Sprintf("resume the module (aosd modules resume %s, or POST /v1/modules/{module}/resume)", a.name)
	default:
		return "has events parked before this one", "recover or resume what holds it"
	}
}

// refuseParked is ingress's refusal of an event whose target is full.
func (st *state) refuseParked(schema string, in *instance, n int) error {
	why, fix := st.holdReason(in)
	return fmt.Errorf("%w: event %s for workflow %s key %s: the instance %s and already holds %d parked events, "+
		"the limit (max_parked_per_instance %d); nothing was journaled: %s, or raise the limit, then send again",
		ErrParkedFull, schema, in.wf, keyText(in.key), why, n-1, st.limits.MaxParkedPerInstance, fix)
}

// emittedFull is the fault of a step whose emitted event i would park one
// event more than the limit for in.
func (st *state) emittedFull(i int, schema string, in *instance, n int) string {
	why, fix := st.holdReason(in)
	return fmt.Sprintf("domain event %d (%s) is for workflow %s key %s, which %s and already holds %d parked events, "+
		"the limit (max_parked_per_instance %d): %s, then retry this instance",
		i, schema, in.wf, keyText(in.key), why, n-1, st.limits.MaxParkedPerInstance, fix)
}

// redeliver gives in, which no longer fails, first (when not nil) and then
// ds, in order: to its mailbox, or back to its parked list while its
// module is set aside. Live, the caller runs the world to idle.
func (st *state) redeliver(in *instance, first *delivery, ds []delivery) {
	if first == nil && len(ds) == 0 {
		return
	}
	all := ds
	if first != nil {
		all = append([]delivery{*first}, ds...)
	}
	if st.held[in.wf] != nil {
		in.parked = append(all, in.parked...)
		return
	}
	in.mailbox = append(in.mailbox, all...)
	if !in.queued && !st.replaying {
		in.queued = true
		st.ready = append(st.ready, in)
	}
}
