package kernel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/schemas"
)

// TestReplayReadsAhead: replay prefetches the cell of every step it is
// about to run, so with the read-ahead in lockstep every cell read of a
// replay is answered from memory — cells the index holds (replayed after a
// snapshot) and cells it does not (replayed from genesis) alike — and the
// replay still recomputes every record. With the read-ahead off the same
// replays read the index (the probe works).
func TestReplayReadsAhead(t *testing.T) {
	h := newHarness(t, 7, true)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	const cells = 300
	for round := range 3 {
		for i := range cells {
			if round == 1 && i == 0 {
				if _, err := h.w.Snapshot(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("k%03d", i), 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	reads := func(genesis bool) (fromMemory, fromIndex, prefetched uint64) {
		t.Helper()
		h.extra = func(c *kernel.Config) { c.FromGenesis = genesis }
		h.reopen()
		info := h.w.OpenInfo()
		if genesis != (info.Snapshot == 0) {
			t.Fatalf("genesis %v, but opened from snapshot record %d", genesis, info.Snapshot)
		}
		cs, err := h.w.CellStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			fromMemory += c.Stats.CacheHits
			fromIndex += c.Stats.CacheMisses
			prefetched += c.Stats.Prefetched
		}
		if v, err := h.w.Cell(ctx, "com.test/counter@1", schemas.MustMarshal("k007")); err != nil || decodeCount(v.State).Count != 3 {
			t.Fatalf("cell k007 after replay: %+v %v", v, err)
		}
		return fromMemory, fromIndex, prefetched
	}
	defer kernel.ReadAheadLockstep()()
	for _, genesis := range []bool{false, true} {
		mem, ix, pre := reads(genesis)
		t.Logf("genesis %v: %d reads from memory, %d from the index, %d prefetched", genesis, mem, ix, pre)
		if ix != 0 || pre < cells {
			t.Errorf("genesis %v: replay read %d cells from the index (want 0) and prefetched %d (want at least %d)", genesis, ix, pre, cells)
		}
		undo := kernel.ReadAheadOff()
		_, ix, pre = reads(genesis)
		undo()
		if ix == 0 || pre != 0 {
			t.Errorf("genesis %v, read-ahead off: %d cells read from the index, %d prefetched: the probe does not work", genesis, ix, pre)
		}
	}
}

// TestReplayDrainsAtCheckpoints: at each replayed checkpoint, replay writes
// the cells dirty there off the loop, as the live world's snapshot did (a
// cells.Drain per head, installed by the next checkpoint at the latest),
// instead of waiting for the delta to outgrow MaterializeAt and writing it
// in slices on the loop. The replayed world is the same either way.
func TestReplayDrainsAtCheckpoints(t *testing.T) {
	h := newHarness(t, 8, true)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	for round := range 3 {
		for i := range 50 {
			if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("k%02d", i), 1)); err != nil {
				t.Fatal(err)
			}
		}
		if round < 2 {
			if _, err := h.w.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.extra = func(c *kernel.Config) { c.FromGenesis = true }
	h.reopen()
	cs, err := h.w.CellStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var drains uint64
	for _, c := range cs {
		drains += c.Stats.DrainsTotal
	}
	if drains == 0 {
		t.Fatal("replay through two checkpoints installed no drain: it wrote no cells off the loop")
	}
	for i := range 50 {
		v, err := h.w.Cell(ctx, "com.test/counter@1", schemas.MustMarshal(fmt.Sprintf("k%02d", i)))
		if err != nil || decodeCount(v.State).Count != 3 {
			t.Fatalf("cell k%02d after replay: %+v %v", i, v, err)
		}
	}
}
