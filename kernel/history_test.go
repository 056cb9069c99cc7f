package kernel_test

import (
	"context"
	"errors"
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

// TestCellHistoryTruncated: with the journal cut by retention and no usable
// snapshot before the range, CellHistory fails with ErrTruncated rather
// than recompute from a guess.
func TestCellHistoryTruncated(t *testing.T) {
	h := newHarness(t, 8, true)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	for i := range 3 {
		if _, err := h.w.Submit(ctx, countEvent("a", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := h.w.Snapshot(ctx); err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
	}
	if _, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1, DropJournal: true}); err != nil {
		t.Fatal(err)
	}
	first := h.w.Journal().First()
	if first <= 1 {
		t.Fatalf("retention kept the journal from %d", first)
	}
	_, err := kernel.CellHistory(ctx, kernel.Stores{CAS: h.w.CAS(), Journal: h.w.Journal()}, h.config(),
		kernel.HistoryQuery{Workflow: "com.test/counter@1", Key: schemas.MustMarshal("a"), From: first, To: first})
	if !errors.Is(err, kernel.ErrTruncated) {
		t.Fatalf("history before the kept snapshot: %v, want ErrTruncated", err)
	}
}

// TestStatusJournaledSinceOpen: Status counts the records made durable
// since the world was opened, by kind; what replay read at open is not
// counted.
func TestStatusJournaledSinceOpen(t *testing.T) {
	h := newHarness(t, 9, false)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	if _, err := h.w.Submit(ctx, countEvent("a", 1), countEvent("b", 2)); err != nil {
		t.Fatal(err)
	}
	st, err := h.w.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Journaled[journal.KindEvent] != 2 || st.Journaled[journal.KindStep] != 2 || st.Journaled[journal.KindManifest] != 1 {
		t.Fatalf("journaled %v; want 2 events, 2 steps, 1 manifest", st.Journaled)
	}
	h.reopen()
	if st, err = h.w.Status(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range journal.Kinds() {
		if n, ok := st.Journaled[k]; !ok || n != 0 {
			t.Fatalf("after reopening, journaled[%s] = %d (present %v); want 0", k, n, ok)
		}
	}
}
