package kernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
)

// cutLog is a journal whose records before first were dropped, as
// retention will drop the segments before a retained snapshot: First says
// so and reads start there.
type cutLog struct {
	kernel.Log
	first uint64
}

func (l cutLog) First() uint64 { return l.first }

func (l cutLog) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	return l.Log.Read(max(from, l.first), fn)
}

// TestVerifyWithRuns: SnapshotOnly runs the replay from the latest snapshot
// alone; over a journal cut before the snapshot, the genesis run reports
// ErrTruncated's message (and the report is not OK) while the snapshot run
// still reaches the live state.
func TestVerifyWithRuns(t *testing.T) {
	h := newHarnessWith(t, 7, false, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	})
	ctx := context.Background()
	mustApply(t, h, counterManifest)
	for i := range 6 {
		if _, err := h.w.Submit(ctx, countEvent("k", i+1)); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := h.w.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stores := h.db.Stores()

	rep, err := kernel.VerifyWith(ctx, stores, h.config(), live, kernel.VerifyOptions{SnapshotOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Runs) != 1 || rep.Runs[0].From != "snapshot" || rep.Runs[0].Opened.Snapshot == 0 || rep.Runs[0].State != rep.Live {
		t.Fatalf("snapshot-only verify: %+v", rep)
	}

	snap := rep.Runs[0].Opened.Checkpoint
	cut := kernel.Stores{CAS: stores.CAS, Journal: cutLog{Log: stores.Journal, first: snap}}
	rep, err = kernel.Verify(ctx, cut, h.config(), live)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Runs) != 2 {
		t.Fatalf("verify over a cut journal: %+v", rep)
	}
	g, s := rep.Runs[0], rep.Runs[1]
	if !strings.Contains(g.Err, kernel.ErrTruncated.Error()) || !g.State.IsZero() {
		t.Errorf("genesis run over a cut journal: %+v, want %q", g, kernel.ErrTruncated)
	}
	if s.Err != "" || s.Diff != "" || s.State != rep.Live {
		t.Errorf("snapshot run over a cut journal: %+v", s)
	}
}
