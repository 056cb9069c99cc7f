package kernel_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// readWorld is a world on disk with 100,000 events over 10,000 keys (each
// event is two journal records: the event and its step).
func readWorld(b *testing.B) *harness {
	h := newHarnessWith(b, 1, true, nil)
	mustApply(b, h, counterManifest)
	batch := make([]kernel.Event, 0, 1000)
	for i := 0; i < readEvents; i++ {
		batch = append(batch, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":"key-%05d","by":1}`, i%readKeys))})
		if len(batch) == cap(batch) {
			if _, err := h.w.Submit(context.Background(), batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return h
}

const readKeys, readEvents = 10000, 100000

// BenchmarkTrace: one cell's timeline out of the journal of readWorld.
//
//	go test ./kernel -run '^$' -bench 'Trace|Reopen' -benchtime 5x
func BenchmarkTrace(b *testing.B) {
	h := readWorld(b)
	key := schemas.MustMarshal("key-00042")
	b.ResetTimer()
	for b.Loop() {
		tr, err := records.Trace(context.Background(), h.w.Journal(), "com.test/counter@1", key)
		if err != nil {
			b.Fatal(err)
		}
		if len(tr) != 2*readEvents/readKeys {
			b.Fatalf("%d entries, want %d", len(tr), 2*readEvents/readKeys)
		}
	}
}

// BenchmarkReopen: closing and reopening readWorld, which replays its whole
// journal (no snapshots yet).
func BenchmarkReopen(b *testing.B) {
	h := readWorld(b)
	want, err := h.w.Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		h.reopen()
	}
	b.StopTimer()
	got, err := h.w.Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if got.JournalHeight != want.JournalHeight || got.JournalHeight < 2*readEvents {
		b.Fatalf("after reopen height %d, want %d", got.JournalHeight, want.JournalHeight)
	}
	b.ReportMetric(float64(got.JournalHeight)/(float64(b.Elapsed().Seconds())/float64(b.N)), "records/s")
}
