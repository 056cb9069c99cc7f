package cells_test

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

// probeStore counts Gets and calls onGet (when set) before each.
type probeStore struct {
	cas.Store
	gets  atomic.Int64
	onGet func(schemas.Hash)
}

func (s *probeStore) Get(h schemas.Hash) ([]byte, error) {
	s.gets.Add(1)
	if s.onGet != nil {
		s.onGet(h)
	}
	return s.Store.Get(h)
}

// coldHead materializes cells 0..n-1 (version 1) and opens a fresh head
// over the root, so nothing is cached but what the head reads.
func coldHead(t *testing.T, n, cacheSize int) (*cells.Head, *probeStore) {
	t.Helper()
	store := &probeStore{Store: cas.NewMemory()}
	w, err := cells.NewHead(store, cells.EmptyRoot, cells.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Put(cellKey(i), cellState(i, 1), 1); err != nil {
			t.Fatal(err)
		}
	}
	root, err := w.Materialize()
	if err != nil {
		t.Fatal(err)
	}
	h, err := cells.NewHead(store, root, cells.Config{CacheSize: cacheSize})
	if err != nil {
		t.Fatal(err)
	}
	return h, store
}

// TestPrefetchServesTheNextGet: after Prefetch, a Get of the same cell reads
// nothing from the CAS, whether the index holds the cell (it is in the hot
// cache) or not (it is noted absent), and returns what it would have.
func TestPrefetchServesTheNextGet(t *testing.T) {
	h, store := coldHead(t, 2000, 256)
	absent := func(i int) []byte {
		return schemas.MustMarshal("absent-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	for i := range 100 {
		if err := h.Prefetch(cellKey(i * 7)); err != nil {
			t.Fatal(err)
		}
		if err := h.Prefetch(absent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if s := h.Stats(); s.Prefetched != 200 || s.CacheLen != 100 {
		t.Fatalf("after prefetching 100 present and 100 missing cells: %+v", s)
	}
	before := store.gets.Load()
	for i := range 100 {
		got, ok, err := h.Get(cellKey(i * 7))
		if err != nil || !ok || !bytes.Equal(got, cellState(i*7, 1)) {
			t.Fatalf("cell %d after prefetch: %x %v %v", i*7, got, ok, err)
		}
		if _, ok, err := h.Get(absent(i)); ok || err != nil {
			t.Fatalf("absent cell %d after prefetch: %v %v", i, ok, err)
		}
	}
	if n := store.gets.Load() - before; n != 0 {
		t.Fatalf("Gets of 200 prefetched cells read the CAS %d times, want 0", n)
	}
	// The probe works: a cell nobody prefetched is read from the CAS.
	if _, ok, err := h.Get(cellKey(1)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if store.gets.Load() == before {
		t.Fatal("a cold Get read nothing from the CAS: the probe counts nothing")
	}
}

// TestPrefetchLeavesDirtyCellsAlone: a cell in the delta is not read.
func TestPrefetchLeavesDirtyCellsAlone(t *testing.T) {
	h, store := coldHead(t, 100, 16)
	if err := h.Put(cellKey(3), cellState(3, 2), 2); err != nil {
		t.Fatal(err)
	}
	before := store.gets.Load()
	if err := h.Prefetch(cellKey(3)); err != nil {
		t.Fatal(err)
	}
	if store.gets.Load() != before || h.Stats().Prefetched != 0 {
		t.Fatalf("prefetch of a dirty cell read the CAS or cached it: %+v", h.Stats())
	}
	if got, _, _ := h.Get(cellKey(3)); !bytes.Equal(got, cellState(3, 2)) {
		t.Fatal("the delta lost to a prefetch")
	}
}

// TestPrefetchNeverCachesAStaleCell: a cell written while Prefetch reads
// its state is not cached with the old state, whether the write is still in
// the delta or already materialized into a new index.
func TestPrefetchNeverCachesAStaleCell(t *testing.T) {
	oldState := schemas.HashBytes(cellState(5, 1))
	t.Run("deleted-meanwhile", func(t *testing.T) {
		h, store := coldHead(t, 100, 16)
		store.onGet = func(s schemas.Hash) {
			if s == oldState {
				store.onGet = nil
				if err := h.Delete(cellKey(5)); err != nil {
					t.Error(err)
				}
			}
		}
		if err := h.Prefetch(cellKey(5)); err != nil {
			t.Fatal(err)
		}
		if store.onGet != nil {
			t.Fatal("the prefetch never read the cell's state: the test tests nothing")
		}
		if _, err := h.Materialize(); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := h.Get(cellKey(5)); ok || err != nil {
			t.Fatalf("deleted cell reads %x (ok %v, %v) after a prefetch raced the delete", got, ok, err)
		}
	})
	t.Run("rewritten-and-materialized-meanwhile", func(t *testing.T) {
		h, store := coldHead(t, 100, 1)
		store.onGet = func(s schemas.Hash) {
			if s == oldState {
				store.onGet = nil
				if err := h.Put(cellKey(5), cellState(5, 2), 2); err != nil {
					t.Error(err)
				}
				if _, err := h.Materialize(); err != nil {
					t.Error(err)
				}
				// Push the fresh copy out of the one-cell cache.
				if _, _, err := h.Get(cellKey(6)); err != nil {
					t.Error(err)
				}
			}
		}
		if err := h.Prefetch(cellKey(5)); err != nil {
			t.Fatal(err)
		}
		if store.onGet != nil {
			t.Fatal("the prefetch never read the cell's state: the test tests nothing")
		}
		if got, _, err := h.Get(cellKey(5)); err != nil || !bytes.Equal(got, cellState(5, 2)) {
			t.Fatalf("rewritten cell reads %x (%v), want version 2: a prefetch cached the old state", got, err)
		}
	})
}

// TestPrefetchedAbsenceEnds: a cell Prefetch found missing reads back once
// it is written, before and after the write is materialized, and a cell
// created while Prefetch looks for it is not noted missing.
func TestPrefetchedAbsenceEnds(t *testing.T) {
	t.Run("written-after", func(t *testing.T) {
		h, _ := coldHead(t, 100, 1)
		k := schemas.MustMarshal("new")
		if err := h.Prefetch(k); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := h.Get(k); ok {
			t.Fatal("a missing cell reads back")
		}
		if err := h.Put(k, cellState(0, 9), 9); err != nil {
			t.Fatal(err)
		}
		for i := range 3 { // newer writes, so the one-cell cache holds another
			if err := h.Put(cellKey(i), cellState(i, 9), 9); err != nil {
				t.Fatal(err)
			}
		}
		if got, ok, _ := h.Get(k); !ok || !bytes.Equal(got, cellState(0, 9)) {
			t.Fatalf("written cell reads %x %v", got, ok)
		}
		if _, err := h.Materialize(); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := h.Get(k); !ok || !bytes.Equal(got, cellState(0, 9)) {
			t.Fatalf("written and materialized cell reads %x %v %v: still noted missing", got, ok, err)
		}
	})
	t.Run("created-and-materialized-meanwhile", func(t *testing.T) {
		h, store := coldHead(t, 100, 1)
		k := schemas.MustMarshal("new")
		store.onGet = func(schemas.Hash) {
			store.onGet = nil
			if err := h.Put(k, cellState(0, 9), 9); err != nil {
				t.Error(err)
			}
			if _, err := h.Materialize(); err != nil {
				t.Error(err)
			}
			if _, _, err := h.Get(cellKey(6)); err != nil { // push k out of the one-cell cache
				t.Error(err)
			}
		}
		if err := h.Prefetch(k); err != nil {
			t.Fatal(err)
		}
		if store.onGet != nil {
			t.Fatal("the prefetch read nothing: the test tests nothing")
		}
		if got, ok, err := h.Get(k); !ok || !bytes.Equal(got, cellState(0, 9)) {
			t.Fatalf("created cell reads %x %v %v: a prefetch noted it missing", got, ok, err)
		}
	})
}

// TestPrefetchBesideWriter: a goroutine prefetches while the writer puts,
// deletes and materializes (the kernel's replay); every cell then reads
// what the writer last wrote. Run with -race.
func TestPrefetchBesideWriter(t *testing.T) {
	seed := testSeed(t)
	r := newRand(seed)
	const n = 400
	h, _ := coldHead(t, n, 32)
	want := map[int][]byte{}
	for i := range n {
		want[i] = cellState(i, 1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i = (i + 13) % n {
			select {
			case <-stop:
				return
			default:
			}
			if err := h.Prefetch(cellKey(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for round := range 3000 {
		i := r.IntN(n)
		switch r.IntN(10) {
		case 0:
			if err := h.Delete(cellKey(i)); err != nil {
				t.Fatal(err)
			}
			delete(want, i)
		case 1:
			if _, err := h.Materialize(); err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, err := h.MaterializeSome(1 + r.IntN(20)); err != nil {
				t.Fatal(err)
			}
		default:
			s := cellState(i, round+2)
			if err := h.Put(cellKey(i), s, uint64(round)); err != nil {
				t.Fatal(err)
			}
			want[i] = s
		}
		if round%5 == 0 { // reads too, so the cache turns over
			if _, _, err := h.Get(cellKey(r.IntN(n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if h.Stats().Prefetched == 0 {
		t.Fatal("nothing was prefetched: the test tests nothing")
	}
	check := func(when string) {
		for i := range n {
			got, ok, err := h.Get(cellKey(i))
			if err != nil || ok != (want[i] != nil) || !bytes.Equal(got, want[i]) {
				t.Fatalf("%s: cell %d reads %x (ok %v, %v), want %x", when, i, got, ok, err, want[i])
			}
		}
	}
	check("before materializing")
	if _, err := h.Materialize(); err != nil {
		t.Fatal(err)
	}
	check("after materializing")
}
