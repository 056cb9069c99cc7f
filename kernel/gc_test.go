package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// uniqueCells submits cells cell-0000000.. whose states all differ
// ({count: i+100}), so a deleted cell's state is nobody else's.
func uniqueCells(t *testing.T, h *harness, from, to int, by func(i int) int) {
	t.Helper()
	const batch = 1000
	for start := from; start < to; start += batch {
		evs := make([]kernel.Event, 0, batch)
		for i := start; i < min(start+batch, to); i++ {
			evs = append(evs, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":"cell-%07d","by":%d}`, i, by(i)))})
		}
		if _, err := h.w.Submit(context.Background(), evs...); err != nil {
			t.Fatal(err)
		}
	}
}

// indexNodes lists every node of the index at root.
func indexNodes(t *testing.T, store cas.Store, root schemas.Hash) map[schemas.Hash]bool {
	t.Helper()
	out := map[schemas.Hash]bool{}
	stack := []schemas.Hash{root}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if h.IsZero() || out[h] {
			continue
		}
		out[h] = true
		data, err := store.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		nodes, _, err := cells.Refs(data)
		if err != nil {
			t.Fatal(err)
		}
		stack = append(stack, nodes...)
	}
	return out
}

func counterRoot(t *testing.T, store cas.Store, obj schemas.Hash) schemas.Hash {
	t.Helper()
	data, err := store.Get(obj)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Workflows {
		if w.Name == "com.test/counter@1" {
			return w.Root
		}
	}
	t.Fatal("no counter workflow in the snapshot")
	return schemas.Hash{}
}

// TestGCAfterDeletingHalf: a world of n cells (1,000,000 with AOS_LONG=1)
// deletes every other one; after a snapshot, a collection keeping only
// that snapshot frees the deleted cells' states and the index nodes only
// the old snapshot used, keeps every live cell (each is read back), and the
// world reopens from its snapshot into the same state. A second collection
// runs while the world keeps writing and snapshotting, and loses nothing.
func TestGCAfterDeletingHalf(t *testing.T) {
	n := 10_000
	if os.Getenv("AOS_LONG") != "" {
		n = 1_000_000
	}
	h := newHarnessWith(t, 21, true, func(h *harness) {
		h.extra = func(c *kernel.Config) {
			c.SnapshotEvery, c.SnapshotInterval = -1, -1
			c.MaterializeAt, c.MaterializeChunk = 256, 256 // the live index moves on between snapshots
		}
	})
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	uniqueCells(t, h, 0, n, func(i int) int { return i + 100 })
	a, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uniqueCells(t, h, 0, n, func(i int) int {
		if i%2 == 0 {
			return 0 // by 0: the counter deletes the cell
		}
		return 2 * n // odd cells change too, to states no first state has: {count: i+100+2n}
	})
	b, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Cells no snapshot holds yet, already in the live index: the live
	// head is a root too.
	const extra = 1000
	uniqueCells(t, h, 3*n, 3*n+extra, func(i int) int { return i + 100 })
	store := h.w.CAS()
	oldNodes := indexNodes(t, store, counterRoot(t, store, a.Object))
	newNodes := indexNodes(t, store, counterRoot(t, store, b.Object))
	before, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	if err := store.Iterate(func(schemas.Hash, int) error { total++; return nil }); err != nil {
		t.Fatal(err)
	}

	bars := map[string]*countBar{}
	res, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1, Progress: func(label string, total uint64) kernel.ProgressBar {
		b := &countBar{total: total}
		bars[label] = b
		return b
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The bars end at the collection's own counts.
	if m, s := bars["gc: mark"], bars["gc: sweep"]; m == nil || s == nil || m.n != uint64(res.Marked) ||
		s.n != s.total || s.n != uint64(res.FreedObjects+res.KeptWritten) {
		t.Fatalf("progress: mark %+v, sweep %+v, result %+v", m, s, res)
	}
	if len(res.Snapshots) != 1 || res.Snapshots[0] != b.Seq || res.KeptObjects+res.FreedObjects != total || res.KeptWritten != 0 {
		t.Fatalf("gc result %+v, %d objects before", res, total)
	}
	state := func(count int) schemas.Hash {
		return schemas.HashBytes(schemas.MustMarshal(map[string]any{"count": count}))
	}
	for i := 0; i < n; i++ {
		has := func(h schemas.Hash) bool {
			ok, err := store.Has(h)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		// Every first state is gone (the even cells were deleted, the
		// odd ones rewritten); the odd cells' current states stay.
		if has(state(i + 100)) {
			t.Fatalf("cell %d: its old state survived the collection", i)
		}
		if i%2 == 1 && !has(state(i+100+2*n)) {
			t.Fatalf("cell %d: its live state was collected", i)
		}
	}
	for node := range oldNodes {
		ok, _ := store.Has(node)
		if ok != newNodes[node] {
			t.Fatalf("index node %s: present %v after gc, in the kept index %v", node, ok, newNodes[node])
		}
	}
	// Every live cell reads back.
	rows, err := h.w.Cells(ctx, "com.test/counter@1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n/2+extra {
		t.Fatalf("%d cells after gc, want %d", len(rows), n/2+extra)
	}
	for _, r := range rows {
		c, err := h.w.Cell(ctx, "com.test/counter@1", r.Key)
		if err != nil || c.StateHash == nil || *c.StateHash != r.StateHash {
			t.Fatalf("cell %s after gc: %v", r.Key, err)
		}
	}
	h.reopen()
	if h.w.OpenInfo().Snapshot != b.Seq || h.w.OpenInfo().Replayed == 0 {
		t.Fatalf("reopened from %+v, want snapshot %d", h.w.OpenInfo(), b.Seq)
	}
	after, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(before, after); d != "" {
		t.Fatalf("state changed across gc and reopen: %s", d)
	}

	// A collection while the world writes: new cells, deletions and a
	// snapshot in flight; afterwards every cell reads back and the world
	// reopens into the state it had.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		uniqueCells(t, h, n, n+n/4, func(i int) int { return i + 100 })
		if _, err := h.w.Snapshot(ctx); err != nil {
			t.Error(err)
		}
		uniqueCells(t, h, n, n+n/8, func(int) int { return 0 })
	}()
	if _, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err = h.w.Cells(ctx, "com.test/counter@1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := h.w.Cell(ctx, "com.test/counter@1", r.Key); err != nil {
			t.Fatalf("cell %s after a collection beside writers: %v", r.Key, err)
		}
	}
	h.reopen()
	again, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(live, again); d != "" {
		t.Fatalf("state changed across a concurrent gc and reopen: %s", d)
	}
}

// TestGCJournalRetention: gc with DropJournal archives and drops the
// journal before the oldest kept snapshot's checkpoint; the world reopens
// from that snapshot, a replay from genesis says the journal is truncated,
// and the archive holds exactly the dropped records.
func TestGCJournalRetention(t *testing.T) {
	h := newHarnessWith(t, 22, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	})
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	var snaps []kernel.SnapshotResult
	for round := range 3 {
		uniqueCells(t, h, round*500, (round+1)*500, func(i int) int { return i + 100 })
		res, err := h.w.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, res)
	}
	uniqueCells(t, h, 0, 100, func(int) int { return 1 })
	original := allRecords(t, h.w)
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	aw := journal.NewArchiveWriter(&buf)
	res, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 2, DropJournal: true, Archive: aw.Frame})
	if err != nil {
		t.Fatal(err)
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	first := h.w.Journal().First()
	if res.Journal == nil || res.Journal.Records == 0 || first != res.Journal.First || first > snaps[1].Checkpoint || first <= 1 {
		t.Fatalf("retention: %+v, first %d, oldest kept checkpoint %d", res.Journal, first, snaps[1].Checkpoint)
	}
	n := 0
	if err := journal.ReadArchive(&buf, func(r journal.Record) (bool, error) {
		o := original[r.Seq-1]
		if r.Seq != o.Seq || r.Kind != o.Kind || !bytes.Equal(r.Body, o.Body) {
			t.Fatalf("archived record %d differs from the journal's", r.Seq)
		}
		n++
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if uint64(n) != first-1 {
		t.Fatalf("archive holds %d records, %d were dropped", n, first-1)
	}
	h.reopen()
	if info := h.w.OpenInfo(); info.Snapshot != snaps[2].Seq {
		t.Fatalf("reopened with %+v", info)
	}
	again, err := h.w.State(ctx)
	if err != nil || snapshot.Diff(live, again) != "" {
		t.Fatalf("state after retention and reopen: %v", err)
	}
	cfg := h.config()
	cfg.FromGenesis = true
	if _, err := kernel.Open(h.db.Stores(), cfg); !errors.Is(err, kernel.ErrTruncated) {
		t.Fatalf("replay from genesis after retention: %v", err)
	}
}

// countBar is a kernel.ProgressBar that counts what it is told.
type countBar struct{ n, total uint64 }

func (b *countBar) Add(n uint64) { b.n += n }
func (b *countBar) Finish()      {}
