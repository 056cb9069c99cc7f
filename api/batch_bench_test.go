package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
)

// BenchmarkEventLatencyBesideBatches is what one client's single events
// wait while another client posts big batches (docs/DECISIONS.md, "A batch
// of events is bounded"): a world served as `aosd serve` serves it
// (host.Open, Badger in a temporary directory, HTTP on loopback) running
// the builtin keyed tally; one goroutine posts batches of the given size
// back to back, and the benchmark's loop posts single events and times
// each answer. One request is one turn of the world's loop, so a single
// event that arrives during a batch waits for the whole batch: with
// batches of 120,000 events (what the server took before the bound) the
// tail of the single events' latency is the batch's time; with the bound
// (1,000), it is a 120th of it. Reported: p50, p99 and max of the single
// events, in ms (p99.9 and max are the ones that meet a batch's turn),
// and the batch poster's events per second.
//
//	go test -run '^$' -bench EventLatencyBesideBatches -benchtime 2000x ./api
func BenchmarkEventLatencyBesideBatches(b *testing.B) {
	for _, size := range []int{api.DefaultMaxBatchEvents, 120_000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			h := benchHost(b, size)
			post := func(body string) error {
				req, _ := http.NewRequest("POST", "http://"+h.Addr()+"/v1/events", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+h.Token())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				msg, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, msg)
				}
				return nil
			}
			var batch strings.Builder
			batch.WriteByte('[')
			for i := range size {
				if i > 0 {
					batch.WriteByte(',')
				}
				fmt.Fprintf(&batch, `{"schema":"t/Add@1","value":{"key":"k%d","by":1}}`, i%1000)
			}
			batch.WriteByte(']')
			body := batch.String()
			// The first batch is in before the clock starts, so every timed
			// event meets batches.
			if err := post(body); err != nil {
				b.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var batched int
			var berr error
			t0 := time.Now()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if berr = post(body); berr != nil {
						return
					}
					batched += size
				}
			}()
			var lat []time.Duration
			i := 0
			for b.Loop() {
				s := time.Now()
				if err := post(fmt.Sprintf(`{"schema":"t/Add@1","value":{"key":"single%d","by":1}}`, i%100)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(s))
				i++
			}
			close(stop)
			wg.Wait()
			elapsed := time.Since(t0)
			if berr != nil {
				b.Fatal(berr)
			}
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)*999/1000]), "p99.9-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(float64(batched)/elapsed.Seconds(), "batched-events/s")
		})
	}
}

// benchHost is a world served as `aosd serve` serves it, its max batch
// maxBatch, with the tally manifest applied.
func benchHost(b *testing.B, maxBatch int) *host.Host {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "w")
	if _, err := host.Init(host.Dir(dir), kernel.Config{}); err != nil {
		b.Fatal(err)
	}
	bi := modules.NewBuiltins()
	bi.MustRegister("t/tally", "t/tally@1", "step", tallyStep(false))
	m, _ := bi.Get("t/tally")
	h, err := host.Open(context.Background(), dir, host.Options{Listen: "127.0.0.1:0", Modules: []modules.Builtin{*m},
		Kernel: kernel.Config{SnapshotEvery: -1, SnapshotInterval: -1}, HTTP: api.HTTPLimits{MaxBatchEvents: maxBatch}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	res, err := h.Local().Apply(context.Background(), api.ApplyRequest{Files: []api.File{{Name: "m.json",
		Content: []byte(fmt.Sprintf(tallyManifest, "t/tally", "t/tally@1"))}}})
	if err != nil || !res.Applied {
		b.Fatalf("apply: %+v %v", res, err)
	}
	return h
}
