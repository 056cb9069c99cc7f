package cells_test

import (
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

// writeCounter is a cas.Store that counts the objects handed to it to
// write (Put and PutBatch; PutMissing goes through Has and PutBatch here).
type writeCounter struct {
	cas.Store
	objects atomic.Int64
}

func (c *writeCounter) Put(data []byte) (schemas.Hash, error) {
	c.objects.Add(1)
	return c.Store.Put(data)
}

func (c *writeCounter) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	c.objects.Add(int64(len(objs)))
	return c.Store.PutBatch(objs)
}

// TestWriteMissingOnly: a head set to write only missing objects, building
// an index version another head already wrote to the same store, by each
// way of materializing, reaches the same root and writes nothing; after
// some of that version's nodes and states are deleted (what a collection
// does to an old snapshot's index), it writes exactly those back, and the
// index is whole again. Switched back off, it writes every object again.
func TestWriteMissingOnly(t *testing.T) {
	const n = 3000
	mem := cas.NewMemory()
	store := &writeCounter{Store: mem}
	fill := func(h *cells.Head) {
		t.Helper()
		for i := range n {
			if err := h.Put(cellKey(i), cellState(i, 1), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	newHead := func(missingOnly bool) *cells.Head {
		t.Helper()
		h, err := cells.NewHead(store, cells.EmptyRoot, cells.Config{})
		if err != nil {
			t.Fatal(err)
		}
		h.WriteMissingOnly(missingOnly)
		fill(h)
		return h
	}
	ways := map[string]func(h *cells.Head) schemas.Hash{
		"Materialize": func(h *cells.Head) schemas.Hash {
			r, err := h.Materialize()
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		"MaterializeSome": func(h *cells.Head) schemas.Hash {
			for h.Stats().Dirty > 0 {
				if _, err := h.MaterializeSome(700); err != nil {
					t.Fatal(err)
				}
			}
			return h.Root()
		},
		"Drain": func(h *cells.Head) schemas.Hash {
			dr := h.PrepareDrain(n)
			dr.Run()
			if _, err := h.Install(dr); err != nil {
				t.Fatal(err)
			}
			return h.Root()
		},
	}
	for name, way := range ways {
		t.Run(name, func(t *testing.T) {
			// The versions MaterializeSome goes through on the way are the
			// live world's too: a head writing them all goes first.
			mem = cas.NewMemory()
			store.Store = mem
			store.objects.Store(0)
			want := way(newHead(false))
			nodes, states := reachable(t, mem, want)
			if store.objects.Load() < int64(len(nodes)+len(states)) {
				t.Fatalf("the first head wrote %d objects, its index has %d nodes and %d states", store.objects.Load(), len(nodes), len(states))
			}
			store.objects.Store(0)
			if got := way(newHead(true)); got != want {
				t.Fatalf("root %s, want %s", got, want)
			}
			if w := store.objects.Load(); w != 0 {
				t.Fatalf("wrote %d objects of an index the store holds", w)
			}
			// Delete every third node and state, as a collection would
			// have swept an old index.
			var gone []schemas.Hash
			i := 0
			for _, set := range []map[schemas.Hash]int{nodes, states} {
				for h := range set {
					if i%3 == 0 {
						gone = append(gone, h)
					}
					i++
				}
			}
			if err := mem.Delete(gone); err != nil {
				t.Fatal(err)
			}
			store.objects.Store(0)
			h := newHead(true)
			if got := way(h); got != want {
				t.Fatalf("root %s, want %s", got, want)
			}
			if w := store.objects.Load(); w != int64(len(gone)) {
				t.Fatalf("wrote %d objects, %d were missing", w, len(gone))
			}
			if _, err := h.Index().Verify(); err != nil {
				t.Fatalf("index after writing the missing objects back: %v", err)
			}
			if nn, ss := reachable(t, mem, want); len(nn) != len(nodes) || len(ss) != len(states) {
				t.Fatalf("%d nodes and %d states reachable, want %d and %d", len(nn), len(ss), len(nodes), len(states))
			}
			store.objects.Store(0)
			h = newHead(true)
			h.WriteMissingOnly(false)
			way(h)
			if w := store.objects.Load(); w < int64(len(nodes)) {
				t.Fatalf("switched off, wrote %d objects, want every node (%d) at least", w, len(nodes))
			}
		})
	}
}
