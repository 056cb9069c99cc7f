package kernel

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// BenchmarkFenceMemory measures what remembering the default 65,536 settled
// intents costs on the heap, per intent (the B/intent metric), with the
// intents' effect names shared as they are with their intent records.
func BenchmarkFenceMemory(b *testing.B) {
	const n = 65_536
	hs := make([]schemas.Hash, n)
	for i := range hs {
		binary.BigEndian.PutUint64(hs[i][:], uint64(i))
		hs[i] = schemas.HashBytes(hs[i][:8])
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := &intentFence{}
		for i, h := range hs {
			f.noteSettled(h, settledIntent{effect: "com.acme/payment.charge@1", seq: uint64(i)}, n)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if f.rememberedSettled() != n {
			b.Fatalf("remembers %d", f.rememberedSettled())
		}
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "B/intent")
		runtime.KeepAlive(f)
	}
}

// TestFenceEvictsOldestFirst: beyond capacity the oldest settled intents are
// forgotten, in settlement order, also when the capacity shrinks.
func TestFenceEvictsOldestFirst(t *testing.T) {
	var f intentFence
	h := func(i int) schemas.Hash { return schemas.HashBytes([]byte{byte(i), byte(i >> 8)}) }
	for i := range 3000 {
		f.noteSettled(h(i), settledIntent{seq: uint64(i)}, 1000)
	}
	if f.rememberedSettled() != 1000 || len(f.fifo) > 2000 {
		t.Fatalf("remembers %d in a fifo of %d", f.rememberedSettled(), len(f.fifo))
	}
	for i := range 3000 {
		if _, ok := f.lookup(h(i)); ok != (i >= 2000) {
			t.Fatalf("intent %d remembered: %v", i, ok)
		}
	}
	f.noteSettled(h(3000), settledIntent{seq: 3000}, 10) // the limit was lowered
	for i := 2000; i <= 3000; i++ {
		if _, ok := f.lookup(h(i)); ok != (i > 2990) {
			t.Fatalf("after shrinking, intent %d remembered: %v", i, ok)
		}
	}
}
