package kernel

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkIdempotencyTableMemory measures the key table's heap per
// remembered key at the default count limit (keys are held as fixed-size
// ids, so their length does not matter): the figure docs/API.md states.
// Run with -benchtime=1x.
func BenchmarkIdempotencyTableMemory(b *testing.B) {
	lim := limitsWithDefaults(Limits{})
	n := lim.MaxIdempotencyKeys
	keys := make([]idemID, n)
	for i := range keys {
		keys[i] = idemKeyID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i))
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var t idemTable
		for i := range keys {
			t.note(&keys[i], idemEntry{seq: uint64(i + 1), logical: uint64(i + 1)}, &lim)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if t.len() != n {
			b.Fatalf("%d keys remembered, want %d", t.len(), n)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/key")
		runtime.KeepAlive(&t)
	}
}

// TestIdempotencyTableBounded: past the count limit the table holds exactly
// the newest keys and its FIFO does not grow without bound.
func TestIdempotencyTableBounded(t *testing.T) {
	lim := limitsWithDefaults(Limits{MaxIdempotencyKeys: 100})
	var tb idemTable
	for i := range 100_000 {
		k := idemKeyID(fmt.Sprint("k", i))
		tb.note(&k, idemEntry{seq: uint64(i + 1), logical: uint64(i + 1)}, &lim)
	}
	if tb.len() != 100 || len(tb.byKey) != 100 {
		t.Fatalf("%d keys in the FIFO, %d in the map; want 100", tb.len(), len(tb.byKey))
	}
	if cap(tb.fifo) > 4*1024 {
		t.Fatalf("FIFO capacity %d for 100 live keys", cap(tb.fifo))
	}
	for i := 99_900; i < 100_000; i++ {
		if e, ok := tb.lookup(idemKeyID(fmt.Sprint("k", i))); !ok || e.seq != uint64(i+1) {
			t.Fatalf("key k%d: %+v %v", i, e, ok)
		}
	}
	if _, ok := tb.lookup(idemKeyID("k99899")); ok {
		t.Fatal("key k99899 is remembered past the limit")
	}
}
