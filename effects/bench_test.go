package effects_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// instant settles com.test/charge@1 at once: the benchmark measures the
// kernel's round trip, not a payment provider.
type instant struct{}

func (instant) Execute(context.Context, kernel.OpenIntent) (receipts.Status, []byte, error) {
	return receipts.StatusOK, schemas.MustMarshal(map[string]any{"charge_id": "ch"}), nil
}

// roundTrip wires world -> publisher tap -> dispatcher -> sink tap -> world,
// so it can time each intent from the ingress of the event whose step opens
// it to the durable step that consumes its receipt.
type roundTrip struct {
	d     *effects.Dispatcher
	w     *kernel.World
	mu    sync.Mutex
	start map[string]time.Time    // by key
	key   map[schemas.Hash]string // intent -> key
	done  map[string]chan time.Duration
}

func (r *roundTrip) Publish(o []kernel.OpenIntent, s []schemas.Hash) {
	r.mu.Lock()
	for _, it := range o {
		r.key[it.Hash] = string(it.OriginKey)
	}
	r.mu.Unlock()
	r.d.Publish(o, s)
}

func (r *roundTrip) SubmitReceipt(ctx context.Context, sr receipts.SignedReceipt) (kernel.ReceiptResult, error) {
	res, err := r.w.SubmitReceipt(ctx, sr)
	r.mu.Lock()
	k := r.key[sr.Intent]
	lat := time.Since(r.start[k])
	ch := r.done[k]
	delete(r.key, sr.Intent)
	r.mu.Unlock()
	ch <- lat
	return res, err
}

func (r *roundTrip) SubmitFrame(ctx context.Context, f kernel.Frame) (uint64, error) {
	return r.w.SubmitFrame(ctx, f)
}

// BenchmarkReceiptRoundTrip: sequential round trips give the latency
// distribution (p50, p99); concurrent ones give receipts/s.
//
//	go test ./effects -run '^$' -bench ReceiptRoundTrip -benchtime 5000x
func BenchmarkReceiptRoundTrip(b *testing.B) {
	for _, conc := range []int{1, 256} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			dir := b.TempDir()
			db, err := cas.OpenBadger(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			kr := receipts.NewKeyring()
			_ = kr.Add("aos/builtin", builtinKey.Public().(ed25519.PublicKey))
			rt := &roundTrip{start: map[string]time.Time{}, key: map[schemas.Hash]string{}, done: map[string]chan time.Duration{}}
			rt.d = effects.New(effects.Config{Key: builtinKey, Executors: map[string]effects.Executor{"com.test/charge@1": instant{}}})
			w, err := kernel.OpenDB(db, kernel.Config{Builtins: jobs(), Keyring: kr, Publisher: rt})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			defer rt.d.Stop()
			rt.w = w
			rt.d.Start(rt)
			m, err := manifest.LoadBytes(dir+"/m.json", []byte(testManifest))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.Apply(context.Background(), m, false); err != nil {
				b.Fatal(err)
			}
			lats := make([]time.Duration, 0, b.N)
			var latMu sync.Mutex
			work := make(chan int)
			var wg sync.WaitGroup
			b.ResetTimer()
			t0 := time.Now()
			for g := 0; g < conc; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						id := fmt.Sprintf("c%d", i)
						k := string(schemas.MustMarshal(id))
						ch := make(chan time.Duration, 1)
						rt.mu.Lock()
						rt.start[k], rt.done[k] = time.Now(), ch
						rt.mu.Unlock()
						if _, err := w.Submit(context.Background(), kernel.Event{Schema: "com.test/Job@1", JSON: json.RawMessage(`{"id":"` + id + `"}`)}); err != nil {
							b.Error(err)
							return
						}
						lat := <-ch
						latMu.Lock()
						lats = append(lats, lat)
						latMu.Unlock()
					}
				}()
			}
			for i := 0; i < b.N; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
			b.ReportMetric(float64(b.N)/el.Seconds(), "receipts/s")
			b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "p99-µs")
		})
	}
}
