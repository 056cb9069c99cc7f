package kernel

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aos-kernel/aos/cells"
)

// Observer receives measurements for metrics. Durations are wall-clock and
// never influence anything the kernel journals or computes. Calls come from
// the loop and committer goroutines and must not block.
type Observer interface {
	Ingested(events int)
	Stepped(workflow string, d time.Duration, failed bool)
	Flushed(records int, d time.Duration, err error)
	// Snapshotted: a snapshot is durable; pause is what the loop spent on
	// it (at its checkpoint and installing the written cells), total the
	// time from the checkpoint to durability.
	Snapshotted(pause, total time.Duration, bytes int)
}

type nopObserver struct{}

func (nopObserver) Ingested(int)                                  {}
func (nopObserver) Stepped(string, time.Duration, bool)           {}
func (nopObserver) Flushed(int, time.Duration, error)             {}
func (nopObserver) Snapshotted(time.Duration, time.Duration, int) {}

// CellStats is one workflow's cell store at a glance.
type CellStats struct {
	Workflow string
	Cells    int
	cells.Stats
}

// CellStats reports every workflow's cell store counters, sorted by workflow.
func (w *World) CellStats(ctx context.Context) ([]CellStats, error) {
	var out []CellStats
	err := w.do(ctx, func(st *state) {
		for name, rt := range st.wfs {
			out = append(out, CellStats{Workflow: name, Cells: rt.head.Len(), Stats: rt.head.Stats()})
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Workflow < out[j].Workflow })
	return out, err
}

// quiet tracks quiescence for WaitQuiescent. Only the loop writes it.
func (w *World) setQuiet(q bool) {
	w.quietMu.Lock()
	defer w.quietMu.Unlock()
	if q == w.quietNow {
		return
	}
	w.quietNow = q
	if q {
		close(w.quietCh)
	} else {
		w.quietCh = make(chan struct{})
	}
}

// WaitQuiescent returns once the world is quiescent (nothing running or
// waiting, no intent in flight) or ctx is done.
func (w *World) WaitQuiescent(ctx context.Context) error {
	if err := w.Sync(ctx); err != nil {
		return err
	}
	w.quietMu.Lock()
	ch := w.quietCh
	w.quietMu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *state) quiescent() bool {
	if len(st.inflight) > 0 {
		return false
	}
	for _, in := range st.instances {
		if s := in.status(); s == StatusRunning || s == StatusWaiting {
			return false
		}
	}
	return true
}

// maybeMaterialize drains cell deltas that outgrew Config.MaterializeAt, one
// MaterializeChunk slice at a time, down to half the threshold; checked every
// MaterializeChunk/16 inputs (256 by default; Stats takes the head's lock),
// so a smaller chunk drains as fast in shorter pauses.
//
// With Config.MaterializeInBackground a slice is a cells.Drain: chosen here,
// written to the CAS by its own goroutine while the loop goes on, and
// installed at a later check. The loop never waits for one unless the delta
// has outgrown four times the threshold anyway; then it installs the slice
// in flight and materializes the whole delta. Reads see the same cells
// whenever a slice is installed, and nothing journaled depends on it; only
// the split between index and delta does. Otherwise the slice is written on
// the loop (MaterializeSome).
func (st *state) maybeMaterialize() {
	if st.stopped != nil {
		return
	}
	st.inputs++
	at, chunk := st.w.cfg.MaterializeAt, st.w.cfg.MaterializeChunk
	if st.inputs%uint64(max(1, chunk/16)) != 0 {
		return
	}
	names := make([]string, 0, len(st.heads))
	for n := range st.heads {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := st.heads[n]
		dirty := h.Stats().Dirty
		if dr := st.drains[n]; dr != nil {
			select {
			case <-dr.Done():
			default:
				if dirty <= 4*at {
					continue // still writing; look again at the next check
				}
			}
			if !st.installDrain(n) {
				return
			}
			dirty = h.Stats().Dirty
		}
		if dirty > at {
			st.draining[n] = true
		}
		if !st.draining[n] {
			continue
		}
		switch {
		case dirty > 4*at:
			if _, err := h.Materialize(); err != nil {
				st.stop("materialize cells of "+n, err)
				return
			}
		case st.w.cfg.MaterializeInBackground:
			if dr := h.PrepareDrain(chunk); dr != nil {
				st.drains[n] = dr
				go dr.Run()
			}
		default:
			if _, err := h.MaterializeSome(chunk); err != nil {
				st.stop("materialize cells of "+n, err)
				return
			}
		}
		if h.Stats().Dirty <= at/2 {
			delete(st.draining, n)
		}
	}
}

// installDrain waits for the drain of head n to finish writing and installs
// it. False: the drain failed and the world stops.
func (st *state) installDrain(n string) bool {
	dr := st.drains[n]
	delete(st.drains, n)
	if _, err := st.heads[n].Install(dr); err != nil {
		st.stop("materialize cells of "+n, err)
		return false
	}
	return true
}

// waitDrains lets every drain in flight finish, so none writes to the store
// after the world is closed. Their slices are installed; an error is
// reported, not raised (the cells are still in the deltas).
func (st *state) waitDrains() error {
	var first error
	for n, dr := range st.drains {
		delete(st.drains, n)
		if _, err := st.heads[n].Install(dr); err != nil && first == nil {
			first = fmt.Errorf("materialize cells of %s: %w", n, err)
		}
	}
	return first
}
