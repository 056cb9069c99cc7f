package kernel_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMillionCells builds a world of 1,000,000 keyed cells on disk with the
// default cell cache and checks that memory does not grow with the number of
// cells: the instance table holds nothing at rest, cell deltas are
// materialized as they grow, and the heap added by the second 500,000 cells
// stays under a per-cell bound. States read back intact after eviction.
//
// It takes about a minute, so it runs when AOS_LONG=1 (.ci/run sets it, in a
// run without -race).
func TestMillionCells(t *testing.T) {
	if os.Getenv("AOS_LONG") == "" {
		t.Skip("set AOS_LONG=1 to build a 1,000,000-cell world")
	}
	h := newHarness(t, 11, true)
	mustApply(t, h, counterManifest)
	const total, batch = 1_000_000, 1000 // batch: events per Submit in submitCounterCells
	submit := func(from, to int) { submitCounterCells(t, h, from, to) }
	submit(0, total/2)
	half := heapAfterGC()
	if p := os.Getenv("AOS_HEAPPROFILE_HALF"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	submit(total/2, total)
	full := heapAfterGC()
	if p := os.Getenv("AOS_HEAPPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	s, err := h.w.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Instances.Completed != total || s.Instances.Running+s.Instances.Waiting+s.Instances.Failed != 0 {
		t.Fatalf("status %+v, want %d completed cells and nothing else", s.Instances, total)
	}
	stats, err := h.w.CellStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range stats {
		if cs.Dirty > 1<<16+256*batch {
			t.Fatalf("%s: %d dirty cells resident; deltas are not being materialized", cs.Workflow, cs.Dirty)
		}
		if cs.CacheLen > cs.CacheSize {
			t.Fatalf("%s: cache holds %d, capacity %d", cs.Workflow, cs.CacheLen, cs.CacheSize)
		}
	}
	t.Logf("heap after GC: %d MiB at 500k cells, %d MiB at 1M", half>>20, full>>20)
	// The bound is what the configuration allows, independent of the number
	// of cells. Kernel-owned memory is asserted exactly above (dirty cells,
	// cache size, an empty instance table). The rest is Badger: memtable
	// arenas (up to 3 x 64 MiB, set where the world's Badger directory is
	// opened) plus the buffers of a
	// table being built when a flush or compaction is in flight (120 MiB
	// measured for one memtable flush; with block compression on, as before
	// the opener turned it off, a second buffer per table and the
	// decompressed block cache made it ~340 MiB). Without compression blocks
	// are read from the mmap, off the heap. An unmaterialized delta would
	// add ~180 MiB per million cells on top, and keep growing.
	const bound = 512 << 20
	for _, m := range []struct {
		cells int
		heap  uint64
	}{{total / 2, half}, {total, full}} {
		if m.heap > bound {
			t.Fatalf("heap after GC is %d MiB with %d cells, bound %d MiB", m.heap>>20, m.cells, bound>>20)
		}
	}
	for _, i := range []int{0, 1, 123_456, 499_999, 777_777, total - 1} {
		v, err := h.w.Cell(context.Background(), "com.test/counter@1", schemas.MustMarshal(fmt.Sprintf("cell-%07d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"count":%d}`, i%7+1); stateJSON(v) != want {
			t.Fatalf("cell-%07d: state %s, want %s", i, stateJSON(v), want)
		}
	}
}
