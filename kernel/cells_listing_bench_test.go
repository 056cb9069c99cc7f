package kernel_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
)

// BenchmarkCellListing measures `aosd cells ls` against a world of 1,000,000
// cells on Badger (built once, ~1-2 minutes, logged), and what listing does
// to stepping:
//
//   - page/*: the latency of one page (World.CellPage, what GET
//     /v1/cells/{workflow} serves) from the start and from random cursors
//     (middle pages), with 100 and 10,000 rows; p50, p99 and max.
//   - submit/*: the latency of one event submitted alone (a counter update of
//     a random existing cell, durable when Submit returns), from one client,
//     with no listing, then while other goroutines page through the cells,
//     paced (100 pages a second) or back to back; p50, p99 and max. Back to
//     back, a lister is a busy goroutine on a 2-core machine: what it costs
//     the submitter is CPU as much as the loop.
//
// Timings are reported, never asserted. AOS_LISTING_CELLS=N (at least
// 20,000) builds a smaller world to try it out. Run it alone, once:
//
//	go test ./kernel -run '^$' -bench CellListing -benchtime 1x -timeout 30m
func BenchmarkCellListing(b *testing.B) {
	cellsTotal := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("AOS_LISTING_CELLS")); err == nil && n >= 20_000 {
		cellsTotal = n // a smaller world, to try the benchmark out
	}
	h := newHarness(b, 17, true)
	mustApply(b, h, counterManifest)
	start := time.Now()
	submitCounterCells(b, h, 0, cellsTotal)
	b.Logf("built %d cells on Badger in %v", cellsTotal, time.Since(start).Round(time.Second))
	if stats, err := h.w.CellStats(context.Background()); err == nil {
		for _, s := range stats {
			b.Logf("%s: %d cells, %d dirty (in the delta)", s.Workflow, s.Cells, s.Dirty)
		}
	}
	const wf = "com.test/counter@1"
	r := rand.New(rand.NewPCG(7, 11))
	randomCursor := func() string {
		var c [32]byte
		for i := 0; i < len(c); i += 8 {
			v := r.Uint64()
			for j := range 8 {
				c[i+j] = byte(v >> (8 * j))
			}
		}
		return hex.EncodeToString(c[:])
	}
	for _, c := range []struct {
		name   string
		limit  int
		pages  int
		middle bool
	}{
		{"page=first/limit=100", 100, 1000, false},
		{"page=middle/limit=100", 100, 1000, true},
		{"page=first/limit=10000", 10_000, 30, false},
		{"page=middle/limit=10000", 10_000, 30, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, c.pages)
			for range c.pages {
				after := ""
				if c.middle {
					after = randomCursor()
				}
				t0 := time.Now()
				rows := listPage(b, h.w, wf, after, c.limit)
				lat = append(lat, time.Since(t0))
				if rows != c.limit && !c.middle { // a random cursor may fall among the last rows
					b.Fatalf("%d rows, want %d", rows, c.limit)
				}
			}
			reportLatency(b, lat)
		})
	}
	for _, c := range []struct {
		name           string
		listers, limit int
		every          time.Duration // a lister's pace; 0: back to back
	}{
		{"submit/alone", 0, 0, 0},
		{"submit/listing=100/paced=100per_s", 1, 100, 10 * time.Millisecond},
		{"submit/listing=100/back_to_back", 1, 100, 0},
		{"submit/listing=100/back_to_back_x2", 2, 100, 0},
		{"submit/listing=10000/back_to_back", 1, 10_000, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			var wg sync.WaitGroup
			var listed atomic.Int64
			stop := make(chan struct{})
			for range c.listers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					after := ""
					var tick <-chan time.Time
					if c.every > 0 {
						t := time.NewTicker(c.every)
						defer t.Stop()
						tick = t.C
					}
					for {
						select {
						case <-stop:
							return
						default:
						}
						if tick != nil {
							select {
							case <-stop:
								return
							case <-tick:
							}
						}
						p, err := h.w.CellPage(context.Background(), wf, after, c.limit)
						if err != nil {
							b.Error(err)
							return
						}
						listed.Add(int64(len(p.Cells)))
						after = p.Next
					}
				}()
			}
			const events = 3000
			lat := make([]time.Duration, 0, events)
			for range events {
				k := r.IntN(cellsTotal)
				ev := kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":"cell-%07d","by":1}`, k))}
				t0 := time.Now()
				if _, err := h.w.Submit(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			close(stop)
			wg.Wait()
			reportLatency(b, lat)
			if c.listers > 0 {
				b.ReportMetric(float64(listed.Load()), "rows-listed")
			}
		})
	}
}

// listPage lists one page and returns its row count.
func listPage(b *testing.B, w *kernel.World, wf, after string, limit int) int {
	p, err := w.CellPage(context.Background(), wf, after, limit)
	if err != nil {
		b.Fatal(err)
	}
	return len(p.Cells)
}

// reportLatency reports p50, p99 and max of lat in µs.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// submitCounterCells creates or bumps cells cell-<from>..cell-<to-1> of the
// counter workflow, four clients submitting batches of 1,000 events.
func submitCounterCells(tb testing.TB, h *harness, from, to int) {
	const batch = 1000
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]kernel.Event, 0, batch)
			for start := range next {
				evs = evs[:0]
				for i := start; i < start+batch; i++ {
					evs = append(evs, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":"cell-%07d","by":%d}`, i, i%7+1))})
				}
				if _, err := h.w.Submit(context.Background(), evs...); err != nil {
					tb.Error(err)
					return
				}
			}
		}()
	}
	for i := from; i < to; i += batch {
		next <- i
	}
	close(next)
	wg.Wait()
}
