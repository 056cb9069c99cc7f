package cells_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

func entryFor(i, v int) cells.Entry {
	st := cellState(i, v)
	return cells.Entry{Key: cellKey(i), StateHash: schemas.HashBytes(st), Size: uint64(len(st)), LastActive: uint64(v)}
}

func mustVerify(t *testing.T, ix *cells.CellIndex) {
	t.Helper()
	if _, err := ix.Verify(); err != nil {
		t.Fatalf("verify %s: %v", ix.Root(), err)
	}
}

func TestIndexEmpty(t *testing.T) {
	store := cas.NewMemory()
	ix, err := cells.LoadIndex(store, cells.EmptyRoot)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Root() != cells.EmptyRoot || !ix.Root().IsZero() || ix.Len() != 0 {
		t.Fatalf("empty index: root %s len %d", ix.Root(), ix.Len())
	}
	if _, ok, err := ix.Lookup([]byte("x")); ok || err != nil {
		t.Fatalf("lookup in empty index: %v %v", ok, err)
	}
	// Deleting absent keys from an empty index writes nothing.
	ix2, err := ix.Apply([]cells.Change{{Entry: cells.Entry{Key: []byte("x")}, Delete: true}})
	if err != nil || ix2.Root() != cells.EmptyRoot {
		t.Fatalf("delete from empty: %s %v", ix2.Root(), err)
	}
	n := 0
	store.Iterate(func(schemas.Hash, int) error { n++; return nil })
	if n != 0 {
		t.Fatalf("%d objects written for an empty index", n)
	}
	if _, err := cells.LoadIndex(store, schemas.HashBytes([]byte("nope"))); !errors.Is(err, cas.ErrNotFound) {
		t.Fatalf("load missing root: %v", err)
	}
}

func TestIndexApplyDuplicate(t *testing.T) {
	ix, _ := cells.LoadIndex(cas.NewMemory(), cells.EmptyRoot)
	_, err := ix.Apply([]cells.Change{{Entry: entryFor(1, 1)}, {Entry: entryFor(1, 2)}})
	if !errors.Is(err, cells.ErrDuplicateChange) {
		t.Fatalf("got %v, want ErrDuplicateChange", err)
	}
}

// TestIndexHistoryIndependence: whatever batches and order the changes come in,
// including inserting extra cells and deleting them again, the root is the one
// a direct build of the final set gives, and shrinking to nothing gives EmptyRoot.
func TestIndexHistoryIndependence(t *testing.T) {
	seed := testSeed(t)
	for round, size := range []int{1, 31, 32, 33, 600, 5000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r := newRand(seed + uint64(round))
			store := cas.NewMemory()
			final := make([]cells.Entry, size)
			for i := range final {
				final[i] = entryFor(i, r.IntN(3))
			}
			want, err := cells.BuildIndex(store, final)
			if err != nil {
				t.Fatal(err)
			}
			mustVerify(t, want)
			if want.Len() != size {
				t.Fatalf("built %d cells, len %d", size, want.Len())
			}

			// Random history: cells arrive in shuffled batches with stale versions
			// and extras that are deleted later, in other batches.
			ix, _ := cells.LoadIndex(store, cells.EmptyRoot)
			var ops []cells.Change
			for i, e := range final {
				if r.IntN(2) == 0 {
					ops = append(ops, cells.Change{Entry: entryFor(i, 7)})
				}
				ops = append(ops, cells.Change{Entry: e})
			}
			for i := size; i < size+size/2+40; i++ {
				ops = append(ops, cells.Change{Entry: entryFor(i, 1)}, cells.Change{Entry: entryFor(i, 0), Delete: true})
			}
			// Keep each key's changes in order but interleave keys randomly.
			perKey := map[string][]cells.Change{}
			var keys []string
			for _, c := range ops {
				k := string(c.Entry.Key)
				if _, ok := perKey[k]; !ok {
					keys = append(keys, k)
				}
				perKey[k] = append(perKey[k], c)
			}
			for len(keys) > 0 {
				batch := []cells.Change{}
				n := 1 + r.IntN(size+1)
				if size <= 600 && r.IntN(2) == 0 {
					n = 1 + r.IntN(8) // many small batches too
				}
				inBatch := map[string]bool{}
				for range n {
					if len(keys) == 0 {
						break
					}
					j := r.IntN(len(keys))
					k := keys[j]
					if inBatch[k] {
						continue
					}
					inBatch[k] = true
					batch = append(batch, perKey[k][0])
					perKey[k] = perKey[k][1:]
					if len(perKey[k]) == 0 {
						keys[j] = keys[len(keys)-1]
						keys = keys[:len(keys)-1]
					}
				}
				if ix, err = ix.Apply(batch); err != nil {
					t.Fatal(err)
				}
				mustVerify(t, ix)
			}
			if ix.Root() != want.Root() || ix.Len() != size {
				t.Fatalf("history root %s (len %d), direct build %s (len %d)", ix.Root(), ix.Len(), want.Root(), size)
			}

			// Every entry reads back; Ascend is in key-hash order and complete.
			for i, e := range final {
				got, ok, err := ix.Lookup(cellKey(i))
				if err != nil || !ok || got.StateHash != e.StateHash || got.LastActive != e.LastActive || !bytes.Equal(got.Key, e.Key) {
					t.Fatalf("lookup %d: %+v %v %v", i, got, ok, err)
				}
			}
			var prev schemas.Hash
			n := 0
			err = ix.Ascend(func(e cells.Entry) (bool, error) {
				kh := e.KeyHash()
				if n > 0 && bytes.Compare(prev[:], kh[:]) >= 0 {
					return false, fmt.Errorf("ascend out of order at %d", n)
				}
				prev = kh
				n++
				return true, nil
			})
			if err != nil || n != size {
				t.Fatalf("ascend: %d entries, %v", n, err)
			}

			// Delete in random batches down to nothing.
			perm := r.Perm(size)
			for len(perm) > 0 {
				k := min(len(perm), 1+r.IntN(size/3+1))
				var batch []cells.Change
				for _, i := range perm[:k] {
					batch = append(batch, cells.Change{Entry: cells.Entry{Key: cellKey(i)}, Delete: true})
				}
				perm = perm[k:]
				if ix, err = ix.Apply(batch); err != nil {
					t.Fatal(err)
				}
				mustVerify(t, ix)
				rest := make([]cells.Entry, 0, len(perm))
				for _, i := range perm {
					rest = append(rest, final[i])
				}
				if len(perm) < 100 || r.IntN(4) == 0 {
					direct, err := cells.BuildIndex(store, rest)
					if err != nil {
						t.Fatal(err)
					}
					if direct.Root() != ix.Root() {
						t.Fatalf("after deletes to %d cells: root %s, direct build %s", len(perm), ix.Root(), direct.Root())
					}
				}
			}
			if ix.Root() != cells.EmptyRoot || ix.Len() != 0 {
				t.Fatalf("deleting everything left root %s len %d", ix.Root(), ix.Len())
			}
		})
	}
}

// TestIndexUpdateCost: changing one cell of a large index writes one node per
// level, not O(cells).
func TestIndexUpdateCost(t *testing.T) {
	store := cas.NewMemory()
	es := make([]cells.Entry, 20000)
	for i := range es {
		es[i] = entryFor(i, 0)
	}
	ix, err := cells.BuildIndex(store, es)
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		store.Iterate(func(schemas.Hash, int) error { n++; return nil })
		return n
	}
	before := count()
	ix2, err := ix.Apply([]cells.Change{{Entry: entryFor(123, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	written := count() - before
	if written < 2 || written > 6 { // 20,000 cells: depth 3-4
		t.Fatalf("one change wrote %d nodes", written)
	}
	// A no-op change writes nothing and keeps the root.
	ix3, err := ix2.Apply([]cells.Change{{Entry: entryFor(123, 1)}, {Entry: cells.Entry{Key: []byte("absent")}, Delete: true}})
	if err != nil || ix3.Root() != ix2.Root() || count()-before != written {
		t.Fatalf("no-op apply changed the store or root: %v", err)
	}
}

func TestChildrenAndRefs(t *testing.T) {
	store := cas.NewMemory()
	es := make([]cells.Entry, 500)
	for i := range es {
		es[i] = entryFor(i, 0)
		if _, err := store.Put(cellState(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := cells.BuildIndex(store, es)
	if err != nil {
		t.Fatal(err)
	}
	nodes, states := reachable(t, store, ix.Root())
	if len(states) != len(es) {
		t.Fatalf("reachable states %d, want %d", len(states), len(es))
	}
	verified, _ := ix.Verify()
	if len(nodes) != verified {
		t.Fatalf("reachable nodes %d, Verify read %d", len(nodes), verified)
	}
	for h := range nodes {
		data, _ := store.Get(h)
		all, err := cells.Children(data)
		ns, ss, _ := cells.Refs(data)
		if err != nil || len(all) != len(ns)+len(ss) {
			t.Fatalf("Children(%s) = %d, %v; Refs %d+%d", h, len(all), err, len(ns), len(ss))
		}
	}
	if _, err := cells.Children(cellState(1, 0)); err == nil {
		t.Fatal("Children accepted a state as a node")
	}
	// A sweep from the root keeps everything the index needs.
	if n := sweep(t, store, ix.Root()); n != 0 {
		t.Fatalf("sweep of a single build deleted %d objects", n)
	}
	mustVerify(t, ix)
}
