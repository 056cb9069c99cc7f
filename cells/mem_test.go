package cells_test

import (
	"bytes"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
)

// Head memory bound for the million-cell test, derived from its parts:
//
//	hot cache: 4096 cells x (state 18 B + key ~14 B + entry/LRU bookkeeping ~250 B) ~ 1.2 MiB
//	branch cache: 4096 decoded branches x ~1 KiB                                ~ 4 MiB
//	delta after Materialize: empty map                                            ~ 0
//
// so ~5 MiB; the assertion allows 16 MiB for allocator slack and map growth. It
// does not depend on the number of cells: the index lives in the CAS.
const headBoundBytes = 16 << 20

// TestHeadMemoryMillionCells builds a 1,000,000-cell world through a Head in
// batches of 100,000 (each materialized) on the in-memory CAS, then measures
// the heap the Head itself retains: heap with the Head alive minus heap after
// dropping it (the CAS's objects are live in both measurements).
func TestHeadMemoryMillionCells(t *testing.T) {
	const cellsTotal, batch = 1_000_000, 100_000
	if os.Getenv("AOS_LONG") == "" {
		t.Skip("builds a million cells (~6 s; minutes under -race): set AOS_LONG=1 (.ci/run's long step does, without -race)")
	}
	start := time.Now()
	store := cas.NewMemory()
	h, err := cells.NewHead(store, cells.EmptyRoot, cells.Config{CacheSize: cells.DefaultCacheSize})
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < cellsTotal; b += batch {
		for i := b; i < b+batch; i++ {
			if err := h.Put(cellKey(i), cellState(i, 0), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Materialize(); err != nil {
			t.Fatal(err)
		}
	}
	build := time.Since(start)
	if n := h.Len(); n != cellsTotal {
		t.Fatalf("Len %d, want %d", n, cellsTotal)
	}
	// Fill the hot and branch caches with cold reads spread over the world.
	for i := 0; i < cellsTotal; i += cellsTotal / 20000 {
		st, ok, err := h.Get(cellKey(i))
		if err != nil || !ok || !bytes.Equal(st, cellState(i, 0)) {
			t.Fatalf("cell %d: %v %v", i, ok, err)
		}
	}
	s := h.Stats()
	if s.CacheLen != cells.DefaultCacheSize {
		t.Fatalf("cache not full: %+v", s)
	}

	withHead := heapAlloc()
	runtime.KeepAlive(h)
	h = nil
	without := heapAlloc()
	runtime.KeepAlive(store) // the CAS is live in both measurements
	used := int64(withHead) - int64(without)
	t.Logf("built %d cells in %v; head retains %.2f MiB (%.1f B/cell), stats %+v",
		cellsTotal, build.Round(time.Millisecond), float64(used)/(1<<20), float64(used)/cellsTotal, s)
	if used > headBoundBytes {
		t.Fatalf("head retains %d bytes with a %d-cell cache, bound %d", used, cells.DefaultCacheSize, headBoundBytes)
	}
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
