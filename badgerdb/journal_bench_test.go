package badgerdb_test

import (
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// BenchmarkAppend measures durable appends (commit + the tail's fdatasync)
// of one frame of n records with ~150-byte bodies, on disk, and reports the
// syncs per append: one of the tail, and Badger's only at checkpoints.
// guard=off turns the free-space guard off (space.go), to show its cost.
func BenchmarkAppend(b *testing.B) {
	body := make([]byte, 150)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	for _, n := range []int{1, 100, 1000} {
		for _, guard := range []bool{true, false} {
			b.Run(fmt.Sprintf("frame=%d/guard=%s", n, onOff(guard)), func(b *testing.B) {
				benchAppend(b, n, body, guard)
			})
		}
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func benchAppend(b *testing.B, n int, body []byte, guard bool) {
	db := openDisk(b, b.TempDir())
	defer db.Close()
	if !guard {
		db.WithoutGuard()
	}
	j := db.Journal()
	frame := make([]journal.Record, n)
	for k := range frame {
		frame[k] = journal.Record{Kind: journal.KindStep, Body: body}
	}
	b.SetBytes(int64(n * len(body)))
	bs0, ts0 := j.Syncs()
	b.ResetTimer()
	for range b.N {
		next := j.Height() + 1
		for k := range frame {
			frame[k].Seq = next + uint64(k)
		}
		if err := j.Append(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
	bs, ts := j.Syncs()
	b.ReportMetric(float64(ts-ts0)/float64(b.N), "tail-syncs/op")
	b.ReportMetric(float64(bs-bs0)/float64(b.N), "badger-syncs/op")
}
