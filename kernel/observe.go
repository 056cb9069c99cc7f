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
}

type nopObserver struct{}

func (nopObserver) Ingested(int)                        {}
func (nopObserver) Stepped(string, time.Duration, bool) {}
func (nopObserver) Flushed(int, time.Duration, error)   {}

// CellStats is one workflow's cell store at a glance.
type CellStats struct {
	Workflow string `json:"workflow"`
	Cells    int    `json:"cells"`
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

// maybeMaterialize drains cell deltas that outgrew Config.MaterializeAt,
// one MaterializeChunk slice per check, down to half the threshold; checked
// every MaterializeChunk/16 inputs (256 by default; Stats takes the head's
// lock), so a smaller chunk drains as fast in shorter pauses. A delta growing faster than
// slices drain it (over four times the threshold) is materialized whole.
func (st *state) maybeMaterialize() {
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
		if dirty > at {
			st.draining[n] = true
		}
		if !st.draining[n] {
			continue
		}
		var err error
		if dirty > 4*at {
			_, err = h.Materialize()
		} else {
			_, err = h.MaterializeSome(chunk)
		}
		if err != nil {
			panic(fmt.Sprintf("kernel: materialize cells of %s: %v", n, err))
		}
		if h.Stats().Dirty <= at/2 {
			delete(st.draining, n)
		}
	}
}
