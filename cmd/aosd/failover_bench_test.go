package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/internal/pgtest"
)

// BenchmarkFailover measures a failover on a world of many records: from
// the SIGKILL of the owner to the first event a client (sending one event
// after another through the standby, each resent until acknowledged) has
// acknowledged by the new owner. The nodes run with aosd serve's default
// lease and standby poll (3 s, 1 s), so the figure includes waiting for the
// lease to lapse. AOS_FAILOVER_RECORDS sets the world's size (default
// 1,000,000 records; the loader logs how long it took), and each run of
// the benchmark fails over AOS_FAILOVER_ROUNDS times (default 3) on the
// one world it loaded, each killed node coming back as the standby. The
// nodes snapshot at aosd's default (AOS_SNAPSHOT_EVERY unset), so a new
// owner replays up to that many records after the latest snapshot. It is
// a measurement, not a pass/fail timing:
//
//	go test -run '^$' -bench BenchmarkFailover -benchtime 1x -timeout 60m ./cmd/aosd
func BenchmarkFailover(b *testing.B) {
	records := uint64(1_000_000)
	if v := os.Getenv("AOS_FAILOVER_RECORDS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			b.Fatalf("AOS_FAILOVER_RECORDS=%q: want a number of records", v)
		}
		records = n
	}
	rounds := 3
	if v := os.Getenv("AOS_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("AOS_FAILOVER_ROUNDS=%q: want a number of failovers", v)
		}
		rounds = n
	}
	w := newNodeWorld(b, pgtest.Start(b), 2)
	for _, n := range w.nodes {
		n.env = []string{} // aosd's default snapshot policy
	}
	defaults := []string{"--lease", "3s", "--standby-poll", "1s"}
	w.nodes[0].start(b, defaults...)
	w.owner(b, 0)
	w.nodes[1].start(b, defaults...)
	ok(b, w.nodes[0].dir, "apply", built.Path(b, "counter"))

	t0 := time.Now()
	height := loadRecords(b, w, records)
	b.Logf("loaded %d records in %s (%.0f records/s)", height, time.Since(t0).Round(time.Millisecond), float64(height)/time.Since(t0).Seconds())

	var total time.Duration
	var epoch uint64
	b.ResetTimer()
	for i := range b.N * rounds {
		owner, st := w.owner(b, max(epoch, 1)-1)
		standby := w.nodes[0]
		if standby == owner {
			standby = w.nodes[1]
		}
		killed := time.Now()
		owner.kill(b)
		var acked time.Time
		for try := 0; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			seq, err := w.sendEvent(ctx, standby, "bench", fmt.Sprintf("failover-%d-%d", i, try))
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			if seq != 0 {
				acked = time.Now()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := acked.Sub(killed)
		total += d
		_, nst := w.owner(b, st.Cluster.Epoch)
		epoch = nst.Cluster.Epoch
		b.Logf("failover %d: SIGKILL of %s to the first acknowledged event on %s: %s (epoch %d -> %d)",
			i+1, owner.id, standby.id, d.Round(time.Millisecond), st.Cluster.Epoch, epoch)
		b.StopTimer()
		owner.start(b, defaults...) // back as the standby
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N*rounds), "ms/failover")
	b.ReportMetric(0, "ns/op")
	for _, n := range w.nodes {
		n.stop(b)
	}
}

// loadRecords sends counter events in batches of 1,000 through the owner
// from 8 goroutines until the journal holds at least n records, and
// returns the height.
func loadRecords(tb testing.TB, w *nodeWorld, n uint64) uint64 {
	tb.Helper()
	owner, _ := w.owner(tb, 0)
	var height atomic.Uint64
	var batch atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for height.Load() < n && failed.Load() == nil {
				i := batch.Add(1)
				evs := make([]map[string]any, 1000)
				for j := range evs {
					evs[j] = map[string]any{"schema": countEv, "value": map[string]any{"key": fmt.Sprintf("k%d", (g+j)%64), "by": 1}}
				}
				body, _ := json.Marshal(evs)
				code, b, err := crashHTTP(context.Background(), owner.address(), w.tok, "POST", "/v1/events", body)
				var ans struct {
					Seqs []uint64 `json:"seqs"`
				}
				if err != nil || code != 200 || json.Unmarshal(b, &ans) != nil || len(ans.Seqs) == 0 {
					failed.CompareAndSwap(nil, fmt.Sprintf("batch %d: %d %v %.200s", i, code, err, b))
					return
				}
				for {
					h := height.Load()
					last := ans.Seqs[len(ans.Seqs)-1]
					if last <= h || height.CompareAndSwap(h, last) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		tb.Fatal(f)
	}
	return height.Load()
}
