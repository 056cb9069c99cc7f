package api_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/schemas"
)

// BenchmarkHealthyEventsBesideRunaway measures a healthy workflow's event
// latency over HTTP (one client, closed loop: POST /v1/events and its
// answer, durable on Badger) while another client sends batches of 8 events
// to a wasm guest that loops forever (kernel/testdata/guests/hostile, built
// from source; step timeout 200 ms). It reports p50, p99 and max:
//
//	alone        no runaway client: the baseline
//	unbounded    the runaway client, with the turn's yield and setting
//	             aside turned off: the world before issue 26
//	yield        turns yield (MaxTurnTime 100 ms), nothing set aside: the
//	             guest still costs a timed-out step per event
//	set-aside    both, after the guest's module was set aside (3 timeouts
//	             in a row): its events are parked as they come
//
//	go test ./api -run '^$' -bench HealthyEventsBesideRunaway -benchtime 200x
func BenchmarkHealthyEventsBesideRunaway(b *testing.B) {
	guest := runawayGuest(b)
	for _, c := range []struct {
		name    string
		runaway bool
		turn    time.Duration
		aside   int
	}{
		{"alone", false, 0, 3},
		{"unbounded", true, -1, -1},
		{"yield", true, 0, -1},
		{"set-aside", true, 0, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			rw := newRunawayWorld(b, guest, kernel.Config{StepTimeout: 200 * time.Millisecond, MaxTurnTime: c.turn, SetAsideAfter: c.aside})
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if c.runaway {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ctx.Err() == nil; n++ {
						var evs []string
						for i := range 8 {
							evs = append(evs, fmt.Sprintf(`{"schema":"t/HostileEvent@1","value":{"key":"r%d-%d","act":"loop"}}`, n, i))
						}
						rw.post(ctx, "/v1/events", "["+strings.Join(evs, ",")+"]")
						select { // at most 20 batches a second once they are parked
						case <-ctx.Done():
						case <-time.After(50 * time.Millisecond):
						}
					}
				}()
				if c.aside > 0 {
					// Measure after the module is set aside.
					for {
						ms, err := rw.w.Modules(ctx)
						if err != nil {
							b.Fatal(err)
						}
						if slices.ContainsFunc(ms, func(m kernel.ModuleInfo) bool { return m.Aside }) {
							break
						}
						time.Sleep(10 * time.Millisecond) // a benchmark's wait for its phase, not a test's synchronization
					}
				} else {
					time.Sleep(300 * time.Millisecond) // the runaway batches are under way
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				if code := rw.post(context.Background(), "/v1/events", fmt.Sprintf(`{"schema":"t/Add@1","value":{"key":"h%d","by":1}}`, i%100)); code != 200 {
					b.Fatalf("healthy event: HTTP %d", code)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			slices.Sort(lat)
			q := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.50), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// runawayWorld is a world on Badger with the answers manifest and the
// hostile guest, behind a real HTTP server on loopback.
type runawayWorld struct {
	w     *kernel.World
	url   string
	token string
}

func newRunawayWorld(b *testing.B, guest []byte, cfg kernel.Config) *runawayWorld {
	b.Helper()
	bi := modules.NewBuiltins()
	bi.MustRegister("t/tally", "t/tally@1", "step", tallyStep(false))
	bi.MustRegister("t/job", "t/job@1", "step", jobStep)
	dir := host.Dir(filepath.Join(b.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		b.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		b.Fatal(err)
	}
	cfg.Builtins, cfg.SnapshotEvery, cfg.SnapshotInterval, cfg.Wasm = bi, -1, -1, wasmtest.Engine(b, "")
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}, cfg)
	if err != nil {
		db.Close()
		b.Fatal(err)
	}
	tok, err := dir.Token()
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: tok}).Handler())
	b.Cleanup(func() {
		hs.Close()
		w.Close()
		db.Close()
	})
	rw := &runawayWorld{w: w, url: hs.URL, token: tok}
	files := `{"files":[{"name":"manifest.json","content":` + fmt.Sprintf(runawayAnswersManifest, schemas.HashBytes(guest)) +
		`},{"name":"hostile.wasm","base64":"` + base64.StdEncoding.EncodeToString(guest) + `"}]}`
	if code := rw.post(context.Background(), "/v1/apply", files); code != 200 {
		b.Fatalf("apply: HTTP %d", code)
	}
	return rw
}

func (rw *runawayWorld) post(ctx context.Context, path, body string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rw.url+path, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+rw.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
