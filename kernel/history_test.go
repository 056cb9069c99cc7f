package kernel_test

import (
	"context"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestCellHistory: CellHistory recomputes exactly one cell's steps in its
// range, each state the one its step record names and each start the state
// of the step before; it starts from a snapshot journaled before the range
// (never one after its first step) and stops replaying at the first input
// after it.
func TestCellHistory(t *testing.T) {
	h := newHarness(t, 7, false)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	send := func(key string, by int) {
		t.Helper()
		if _, err := h.w.Submit(ctx, countEvent(key, by)); err != nil {
			t.Fatal(err)
		}
	}
	send("a", 1)
	send("b", 5)
	send("a", 2)
	snap, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send("a", 3)
	send("b", 1)
	send("a", 5) // 11: emits a Total, which the audit workflow steps on
	send("a", 1)
	send("b", 2)
	key := schemas.MustMarshal("a")
	tr, err := records.Trace(ctx, h.w.Journal(), "com.test/counter@1", key)
	if err != nil {
		t.Fatal(err)
	}
	var steps []records.TraceEntry
	for _, e := range tr {
		if e.Kind == journal.KindStep {
			steps = append(steps, e)
		}
	}
	if len(steps) != 5 {
		t.Fatalf("%d steps of a", len(steps))
	}
	stores := kernel.Stores{CAS: h.w.CAS(), Journal: h.w.Journal()}
	for _, c := range []struct {
		name     string
		from, to int // indexes into steps
		snapshot uint64
	}{
		{"across the snapshot", 1, 3, 0},
		{"after the snapshot", 2, 3, snap.Seq},
		{"one step", 4, 4, snap.Seq},
	} {
		res, err := kernel.CellHistory(ctx, stores, h.config(), kernel.HistoryQuery{Workflow: "com.test/counter@1", Key: key,
			From: steps[c.from].Seq, To: steps[c.to].Seq})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Opened.Snapshot != c.snapshot {
			t.Errorf("%s: replay started from snapshot %d, want %d", c.name, res.Opened.Snapshot, c.snapshot)
		}
		if end := res.Opened.Checkpoint + res.Opened.Replayed; end <= steps[c.to].Seq || end >= h.w.Journal().Height() {
			t.Errorf("%s: replay read to seq %d; want it past step %d and short of the end %d", c.name, end, steps[c.to].Seq, h.w.Journal().Height())
		}
		want := steps[c.from : c.to+1]
		if len(res.Steps) != len(want) {
			t.Fatalf("%s: %d steps, want %d: %+v", c.name, len(res.Steps), len(want), res.Steps)
		}
		for i, s := range res.Steps {
			if s.Seq != want[i].Seq || schemas.HashBytes(s.State) != *want[i].StateHash {
				t.Errorf("%s: step %d: seq %d state %x; want seq %d state %s", c.name, i, s.Seq, s.State, want[i].Seq, want[i].StateHash)
			}
			if prev := steps[c.from+i-1]; schemas.HashBytes(s.Prev) != *prev.StateHash {
				t.Errorf("%s: step %d started from %x, want the state of step %d", c.name, s.Seq, s.Prev, prev.Seq)
			}
		}
	}
	if _, err := kernel.CellHistory(ctx, stores, h.config(), kernel.HistoryQuery{Workflow: "com.test/counter@1", Key: key, From: 5, To: 4}); err == nil {
		t.Fatal("a range from after to: no error")
	}
}
