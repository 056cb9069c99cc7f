package kernel_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// casCounter is a CAS port that counts the objects it is handed to write
// and the presence checks it answers. It is not a cas.MissingPutter, so a
// cas.PutMissing through it asks Has and writes what is missing with
// PutBatch, both counted.
type casCounter struct {
	cas.Store
	written, has atomic.Int64
}

func (c *casCounter) Put(data []byte) (schemas.Hash, error) {
	c.written.Add(1)
	return c.Store.Put(data)
}

func (c *casCounter) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	c.written.Add(int64(len(objs)))
	return c.Store.PutBatch(objs)
}

func (c *casCounter) Has(h schemas.Hash) (bool, error) {
	c.has.Add(1)
	return c.Store.Has(h)
}

// snapshottedCounterWorld is a closed on-disk counter world whose journal
// holds four snapshots, each after bumping a different mix of cells.
func snapshottedCounterWorld(t *testing.T) *harness {
	h := newHarnessWith(t, 21, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	})
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	for round := range 4 {
		for i := range 300 {
			if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("k%03d", (i*(round+1))%250), round+1)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.w.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// TestReplayWritesOnlyMissingCellObjects: a replay from genesis re-creates
// the cell index versions the live world's snapshots wrote. Over a store
// that holds them all it writes none of them (it checks each; a scratch
// world keeps none of them in memory), and it
// replays to the same state as the live world; once it is open, the world
// writes its own new objects without checking (nothing asks Has). After a
// collection swept the older snapshots' indexes, the same replay finds
// those objects missing, writes them back, and re-computes every snapshot
// byte for byte (Config.VerifySnapshots), reading its cells through them.
func TestReplayWritesOnlyMissingCellObjects(t *testing.T) {
	ctx := context.Background()
	h := snapshottedCounterWorld(t)
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	snaps := 4
	replay := func() (*kernel.World, *casCounter) {
		t.Helper()
		stores := h.db.Stores()
		counter := &casCounter{Store: stores.CAS}
		stores.CAS = counter
		cfg := h.config()
		cfg.FromGenesis, cfg.VerifySnapshots = true, true
		w, err := kernel.Open(stores, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if w.VerifiedSnapshots() != snaps {
			t.Fatalf("replay verified %d snapshots, want %d", w.VerifiedSnapshots(), snaps)
		}
		got, err := w.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d := snapshot.Diff(live, got); d != "" {
			t.Fatalf("replayed state differs from the live one: %s", d)
		}
		return w, counter
	}
	// A scratch world (replay --verify, shadow) replaying from genesis
	// keeps in memory only what the world's store lacks: nothing here.
	scratch := kernel.ScratchStores(h.db.Stores(), h.db.Journal().Height())
	scfg := h.config()
	scfg.FromGenesis, scfg.VerifySnapshots = true, true
	sw, err := kernel.Open(scratch, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if n, b := scratch.CAS.(*cas.Overlay).Written(); n != 0 || sw.VerifiedSnapshots() != snaps {
		t.Fatalf("a scratch replay kept %d objects (%d bytes) in memory and verified %d snapshots; want none kept, %d verified", n, b, sw.VerifiedSnapshots(), snaps)
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	w, counter := replay()
	if n, has := counter.written.Load(), counter.has.Load(); n != 0 || has == 0 {
		t.Fatalf("replay over a store holding every object: wrote %d objects after %d presence checks; want none written, after checks", n, has)
	}
	counter.has.Store(0)
	for i := range 50 {
		if _, err := w.Submit(ctx, countEvent(fmt.Sprintf("new%02d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n, has := counter.written.Load(), counter.has.Load(); n == 0 || has != 0 {
		t.Fatalf("the opened world wrote %d objects and checked %d: want writes without checks", n, has)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	snaps++
	// The world again: collect everything but the newest snapshot's index
	// (and the live head's, the same).
	h.open()
	res, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.FreedObjects == 0 {
		t.Fatal("the collection freed nothing: the older snapshots' indexes were not garbage")
	}
	live, err = h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	w, counter = replay()
	defer w.Close()
	if n := counter.written.Load(); n == 0 {
		t.Fatal("replay after a collection wrote no objects back")
	}
}
