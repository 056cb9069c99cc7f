//go:build linux

package badgerdb_test

import (
	"os"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
)

// BenchmarkReadJournalResident reads the whole journal of the world store
// in AOS_BENCH_STORE (a Badger directory, opened in place: give it a copy
// of a killed world, e.g. one BenchmarkOpenAfterKill built) and reports
// how much the process's resident file pages (RssFile) grew over the read,
// with the release every 64 MiB of frames (release=on) and without it
// (release=off, what every journal read did before), and the read's rate.
// The store's mapped pages are released before each read, so each starts
// from the same baseline.
//
//	AOS_BENCH_STORE=/tmp/copy go test ./badgerdb -run '^$' -bench ReadJournalResident -benchtime 3x
func BenchmarkReadJournalResident(b *testing.B) {
	dir := os.Getenv("AOS_BENCH_STORE")
	if dir == "" {
		b.Skip("set AOS_BENCH_STORE to a world store directory (a copy: it is opened in place)")
	}
	db := openDisk(b, dir)
	defer db.Close()
	j := db.Journal()
	for _, on := range []bool{false, true} {
		name := "release=off"
		if on {
			name = "release=on"
		}
		b.Run(name, func(b *testing.B) {
			every := int64(1 << 62)
			if on {
				every = 64 << 20
			}
			old := badgerdb.SetReleaseEvery(every)
			defer badgerdb.SetReleaseEvery(old)
			var grown, peak float64
			var recs int
			var el time.Duration
			for b.Loop() {
				j.ReleaseMapped()
				before := procRSSFileMB()
				smpPeak := before
				recs = 0
				t0 := time.Now()
				if err := j.Read(1, func(journal.Record) (bool, error) {
					if recs++; recs%65536 == 0 {
						smpPeak = max(smpPeak, procRSSFileMB())
					}
					return true, nil
				}); err != nil {
					b.Fatal(err)
				}
				el = time.Since(t0)
				smpPeak = max(smpPeak, procRSSFileMB())
				grown, peak = smpPeak-before, smpPeak
			}
			if uint64(recs) != j.Height()-j.First()+1 {
				b.Fatalf("read %d records of a journal of %d", recs, j.Height()-j.First()+1)
			}
			b.ReportMetric(grown, "rss-file-grown-MB")
			b.ReportMetric(peak, "rss-file-peak-MB")
			b.ReportMetric(float64(recs)/el.Seconds(), "records/s")
			b.Logf("%s: read %d records in %v; resident file pages peaked %.0f MB above the start (%.0f MB)", name, recs, el.Round(time.Millisecond), grown, peak)
		})
	}
}

// procRSSFileMB is RssFile of /proc/self/status in MB (-1 when unreadable).
func procRSSFileMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	return parseStatusMB(string(data), "RssFile:")
}
