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

	"github.com/fxamacker/cbor/v2"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
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
	// failed counts receipts the world refused, dropped or rejected: a
	// round trip that did not deliver its receipt is not a round trip.
	failed int
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
	if err != nil || res.Dropped || res.Rejected != "" {
		r.failed++
	}
	k := r.key[sr.Intent]
	lat := time.Since(r.start[k])
	ch := r.done[k]
	delete(r.key, sr.Intent)
	r.mu.Unlock()
	ch <- lat
	return res, err
}

func (r *roundTrip) SubmitFrame(ctx context.Context, f receipts.SignedFrame) (uint64, error) {
	return r.w.SubmitFrame(ctx, f)
}

// benchManifest is one keyed workflow that charges once per Job: every round
// trip is exactly two steps (the Job's, which opens the intent, and the
// receipt's). The test manifest's four workflows would step four cells per
// Job, three of them doing nothing.
const benchManifest = `[
 {"$kind":"defschema","name":"com.test/Job@1","schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}},
 {"$kind":"defschema","name":"com.test/JobEvent@1","variant":{"Job":"com.test/Job@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"com.test/ChargeState@1","schema":{"type":"object","properties":{"status":{"type":"string"},"receipts":{"type":"integer"}},"required":["status","receipts"]}},
 {"$kind":"defschema","name":"com.test/Id@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/ChargeParams@1","schema":{"type":"object","properties":{"amount":{"type":"integer"}},"required":["amount"]}},
 {"$kind":"defschema","name":"com.test/ChargeReceipt@1","schema":{"type":"object","properties":{"charge_id":{"type":"string"}},"required":["charge_id"]}},
 {"$kind":"defeffect","name":"com.test/charge@1","params":"com.test/ChargeParams@1","receipt":"com.test/ChargeReceipt@1"},
 {"$kind":"defmodule","name":"com.test/bench_mod@1","runtime":{"kind":"builtin","builtin":"test/bench","identity":"test/bench@1"}},
 {"$kind":"defworkflow","name":"com.test/charger@1","state":"com.test/ChargeState@1","event":"com.test/JobEvent@1","key_schema":"com.test/Id@1","effects_emitted":["com.test/charge@1"],"impl":{"module":"com.test/bench_mod@1","entrypoint":"charge"}},
 {"$kind":"manifest","name":"com.test/bench","routing":{"subscriptions":[{"event":"com.test/Job@1","workflow":"com.test/charger@1","key_field":"id"}]}}
]`

// benchCharger is the charger written as a Go workflow would be: the event
// decoded into a struct, the state kept as one.
func benchCharger() *modules.Builtins {
	type variant struct {
		Tag   string          `cbor:"$tag"`
		Value cbor.RawMessage `cbor:"$value"`
	}
	type envelope struct {
		Status string `cbor:"status"`
	}
	type chargeState struct {
		Status   string `cbor:"status"`
		Receipts uint64 `cbor:"receipts"`
	}
	params := schemas.MustMarshal(map[string]any{"amount": uint64(5)})
	b := modules.NewBuiltins()
	b.MustRegister("test/bench", "test/bench@1", "charge", func(in *modules.Input) (*modules.Output, error) {
		var ev variant
		if err := cbor.Unmarshal(in.Event.Value, &ev); err != nil {
			return nil, err
		}
		st := chargeState{Status: "new"}
		if in.State != nil {
			if err := cbor.Unmarshal(in.State, &st); err != nil {
				return nil, err
			}
		}
		var effs []modules.EffectOut
		switch ev.Tag {
		case "Job":
			st.Status = "charging"
			effs = []modules.EffectOut{{Effect: "com.test/charge@1", Params: params}}
		case "Receipt":
			var env envelope
			if err := cbor.Unmarshal(ev.Value, &env); err != nil {
				return nil, err
			}
			st.Status, st.Receipts = env.Status, st.Receipts+1
		}
		return &modules.Output{State: schemas.MustMarshal(&st), Effects: effs}, nil
	})
	return b
}

// BenchmarkReceiptRoundTrip: sequential round trips give the latency
// distribution (p50, p99); concurrent ones give receipts/s.
//
//	go test ./effects -run '^$' -bench ReceiptRoundTrip -benchtime 5000x
func BenchmarkReceiptRoundTrip(b *testing.B) {
	for _, conc := range []int{1, 256, 1024} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			dir := b.TempDir()
			db, err := badgerdb.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			kr := receipts.NewKeyring()
			_ = kr.Add(receipts.BuiltinExecutor, builtinKey.Public().(ed25519.PublicKey), []string{"com.test/charge@1"})
			rt := &roundTrip{start: map[string]time.Time{}, key: map[schemas.Hash]string{}, done: map[string]chan time.Duration{}}
			rt.d = effects.New(effects.Config{Key: builtinKey, Executors: map[string]effects.Executor{"com.test/charge@1": instant{}}})
			w, err := kernel.Open(storesOf(db), kernel.Config{Builtins: benchCharger(), Keyring: kr, Publisher: rt})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			defer rt.d.Stop()
			rt.w = w
			rt.d.Start(rt)
			m, err := manifest.LoadBytes(dir+"/m.json", []byte(benchManifest))
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
			if rt.failed > 0 {
				b.Fatalf("%d of %d receipts were not delivered", rt.failed, b.N)
			}
			sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
			b.ReportMetric(float64(b.N)/el.Seconds(), "receipts/s")
			if vb, vr := w.ReceiptVerifyStats(); vb > 0 {
				b.ReportMetric(float64(vr)/float64(vb), "verify-batch")
			}
			b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// errSink records every receipt the world did not admit, and signals each
// answer on answered.
type errSink struct {
	w        *kernel.World
	mu       sync.Mutex
	errs     []error
	answered chan struct{}
	failed   chan struct{} // closed at the first error
}

func (s *errSink) SubmitReceipt(ctx context.Context, sr receipts.SignedReceipt) (kernel.ReceiptResult, error) {
	res, err := s.w.SubmitReceipt(ctx, sr)
	if err != nil {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		if len(s.errs) == 1 && s.failed != nil {
			close(s.failed)
		}
		s.mu.Unlock()
	}
	s.answered <- struct{}{}
	return res, err
}

func (s *errSink) SubmitFrame(ctx context.Context, f receipts.SignedFrame) (uint64, error) {
	return s.w.SubmitFrame(ctx, f)
}

// Every built-in receipt is admitted exactly once and its submitter is told
// so: the world settling the intent (which cancels the executor's work on
// it) must not make the submission that settled it report an error.
func TestBuiltinReceiptsAdmitted(t *testing.T) {
	db, err := badgerdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	kr := receipts.NewKeyring()
	if err := kr.Add(receipts.BuiltinExecutor, builtinKey.Public().(ed25519.PublicKey), []string{"com.test/charge@1"}); err != nil {
		t.Fatal(err)
	}
	d := effects.New(effects.Config{Key: builtinKey, Executors: map[string]effects.Executor{"com.test/charge@1": instant{}}})
	const n = 400
	sink := &errSink{answered: make(chan struct{}, n), failed: make(chan struct{})}
	w, err := kernel.Open(storesOf(db), kernel.Config{Builtins: benchCharger(), Keyring: kr, Publisher: d})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer d.Stop()
	sink.w = w
	d.Start(sink)
	m, err := manifest.LoadBytes("bench.json", []byte(benchManifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				if _, err := w.Submit(context.Background(), kernel.Event{Schema: "com.test/Job@1", JSON: json.RawMessage(fmt.Sprintf(`{"id":"c%d"}`, i))}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A refused receipt leaves its intent open, so the world would not
	// settle before the deadline: the first refusal fails the test at once.
	settle, settled := context.WithCancel(ctx)
	go func() {
		select {
		case <-sink.failed:
			settled()
		case <-settle.Done():
		}
	}()
	err = w.WaitQuiescent(settle)
	settled()
	sink.mu.Lock()
	errs := sink.errs
	sink.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("a receipt was refused before the world settled: %v", errs[0])
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v, err := w.Cell(context.Background(), "com.test/charger@1", schemas.MustMarshal(fmt.Sprintf("c%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := json.Unmarshal(stateJSON(v.State), &st); err != nil {
			t.Fatal(err)
		}
		if st["status"] != "ok" || st["receipts"] != float64(1) {
			t.Fatalf("cell c%d: %v", i, st)
		}
	}
	// The world can be quiescent before the submitters of the last
	// receipts have their answers: wait for every answer (stopping the
	// dispatcher first would cancel the ones still on their way).
	for range n {
		select {
		case <-sink.answered:
		case <-ctx.Done():
			t.Fatal("not every receipt submission was answered")
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.errs) > 0 {
		t.Fatalf("%d of %d receipts reported errors, first: %v", len(sink.errs), n, sink.errs[0])
	}
}
