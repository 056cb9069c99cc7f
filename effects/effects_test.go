package effects_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

const testManifest = `[
 {"$kind":"defschema","name":"com.test/Job@1","schema":{"type":"object","properties":{"id":{"type":"string"},"in_ms":{"type":"integer"},"url":{"type":"string"},"data":{"type":"string","contentEncoding":"base64"}},"required":["id"]}},
 {"$kind":"defschema","name":"com.test/JobEvent@1","variant":{"Job":"com.test/Job@1","Receipt":"sys/EffectReceiptEnvelope@1","Frame":"sys/EffectStreamFrame@1","Cancelled":"sys/EffectCancelled@1"}},
 {"$kind":"defschema","name":"com.test/JobState@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"com.test/Id@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/ChargeParams@1","schema":{"type":"object","properties":{"amount":{"type":"integer"}},"required":["amount"]}},
 {"$kind":"defschema","name":"com.test/ChargeReceipt@1","schema":{"type":"object","properties":{"charge_id":{"type":"string"}},"required":["charge_id"]}},
 {"$kind":"defeffect","name":"com.test/charge@1","params":"com.test/ChargeParams@1","receipt":"com.test/ChargeReceipt@1"},
 {"$kind":"defeffect","name":"com.test/fetch@1","params":"sys/HttpRequestParams@1","receipt":"sys/HttpRequestReceipt@1","retry":{"max_attempts":3,"initial_backoff_ms":5,"max_backoff_ms":20}},
 {"$kind":"defmodule","name":"com.test/jobs_mod@1","runtime":{"kind":"builtin","builtin":"test/jobs","identity":"test/jobs@1"}},
 {"$kind":"defworkflow","name":"com.test/timer@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","context":"sys/WorkflowContext@1","key_schema":"com.test/Id@1","effects_emitted":["sys/timer.set@1"],"impl":{"module":"com.test/jobs_mod@1","entrypoint":"timer"}},
 {"$kind":"defworkflow","name":"com.test/http@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","key_schema":"com.test/Id@1","effects_emitted":["sys/http.request@1"],"impl":{"module":"com.test/jobs_mod@1","entrypoint":"http"}},
 {"$kind":"defworkflow","name":"com.test/http2@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","key_schema":"com.test/Id@1","effects_emitted":["sys/http.request@2"],"impl":{"module":"com.test/jobs_mod@1","entrypoint":"http2"}},
 {"$kind":"defworkflow","name":"com.test/blob@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","key_schema":"com.test/Id@1","effects_emitted":["sys/blob.put@1","sys/blob.get@1"],"impl":{"module":"com.test/jobs_mod@1","entrypoint":"blob"}},
 {"$kind":"defworkflow","name":"com.test/charger@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","key_schema":"com.test/Id@1","effects_emitted":["com.test/charge@1"],"impl":{"module":"com.test/jobs_mod@1","entrypoint":"charge"}},
 {"$kind":"manifest","name":"com.test/jobs","routing":{"subscriptions":[
   {"event":"com.test/Job@1","workflow":"com.test/timer@1","key_field":"id"},
   {"event":"com.test/Job@1","workflow":"com.test/http@1","key_field":"id"},
   {"event":"com.test/Job@1","workflow":"com.test/http2@1","key_field":"id"},
   {"event":"com.test/Job@1","workflow":"com.test/blob@1","key_field":"id"},
   {"event":"com.test/Job@1","workflow":"com.test/charger@1","key_field":"id"}]}}
]`

func dec(b []byte) map[string]any {
	v, err := schemas.Decode(b)
	if err != nil {
		panic(err)
	}
	return v.(map[string]any)
}

func state(in *modules.Input) map[string]any {
	if in.State == nil {
		return map[string]any{}
	}
	return dec(in.State)
}

func out(st map[string]any, effs ...modules.EffectOut) (*modules.Output, error) {
	return &modules.Output{State: schemas.MustMarshal(st), Effects: effs}, nil
}

// jobs are the step functions: each reacts to Job by emitting its effect and
// records receipts (and frames) in its state.
func jobs() *modules.Builtins {
	b := modules.NewBuiltins()
	onReceipt := func(st map[string]any, v map[string]any) {
		n, _ := st["n_receipts"].(uint64)
		st["n_receipts"] = n + 1
		st["status"] = v["status"]
		p := dec(v["payload"].([]byte))
		for k, x := range p { // states here hold text, not byte strings
			if b, ok := x.([]byte); ok {
				p[k] = string(b)
			}
		}
		st["payload"] = p
		st["intent"] = v["intent_hash"]
	}
	b.MustRegister("test/jobs", "test/jobs@1", "timer", func(in *modules.Input) (*modules.Output, error) {
		ev, st := dec(in.Event.Value), state(in)
		v := ev["$value"].(map[string]any)
		switch ev["$tag"] {
		case "Job":
			ctx := dec(in.Ctx)
			at := ctx["now_ns"].(uint64) + uint64(v["in_ms"].(uint64))*uint64(time.Millisecond)
			st["armed_for"] = at
			return out(st, modules.EffectOut{Effect: "sys/timer.set@1", Params: schemas.MustMarshal(map[string]any{"deliver_at_ns": at})})
		case "Receipt":
			onReceipt(st, v)
		}
		return out(st)
	})
	b.MustRegister("test/jobs", "test/jobs@1", "http", func(in *modules.Input) (*modules.Output, error) {
		ev, st := dec(in.Event.Value), state(in)
		v := ev["$value"].(map[string]any)
		switch ev["$tag"] {
		case "Job":
			if v["url"] == nil {
				return out(st)
			}
			return out(st, modules.EffectOut{Effect: "sys/http.request@1", Params: schemas.MustMarshal(map[string]any{"method": "GET", "url": v["url"]})})
		case "Frame":
			n, _ := st["frames"].(uint64)
			st["frames"] = n + 1
		case "Receipt":
			onReceipt(st, v)
		}
		return out(st)
	})
	b.MustRegister("test/jobs", "test/jobs@1", "http2", func(in *modules.Input) (*modules.Output, error) {
		ev, st := dec(in.Event.Value), state(in)
		v := ev["$value"].(map[string]any)
		switch ev["$tag"] {
		case "Job":
			if v["http2"] == nil {
				return out(st)
			}
			return out(st, modules.EffectOut{Effect: "sys/http.request@2", Params: schemas.MustMarshal(v["http2"])})
		case "Frame":
			n, _ := st["frames"].(uint64)
			st["frames"] = n + 1
		case "Receipt":
			onReceipt(st, v)
		}
		return out(st)
	})
	b.MustRegister("test/jobs", "test/jobs@1", "blob", func(in *modules.Input) (*modules.Output, error) {
		ev, st := dec(in.Event.Value), state(in)
		v := ev["$value"].(map[string]any)
		switch ev["$tag"] {
		case "Job":
			if v["data"] == nil {
				return out(st)
			}
			return out(st, modules.EffectOut{Effect: "sys/blob.put@1", Params: schemas.MustMarshal(map[string]any{"bytes": v["data"]})})
		case "Receipt":
			p := dec(v["payload"].([]byte))
			if ref, ok := p["blob_ref"]; ok {
				st["ref"] = ref
				return out(st, modules.EffectOut{Effect: "sys/blob.get@1", Params: schemas.MustMarshal(map[string]any{"blob_ref": ref})})
			}
			st["got"] = string(p["bytes"].([]byte))
		}
		return out(st)
	})
	b.MustRegister("test/jobs", "test/jobs@1", "charge", func(in *modules.Input) (*modules.Output, error) {
		ev, st := dec(in.Event.Value), state(in)
		v := ev["$value"].(map[string]any)
		switch ev["$tag"] {
		case "Job":
			if v["url"] != nil || v["data"] != nil || v["in_ms"] != nil || v["http2"] != nil {
				return out(st)
			}
			return out(st, modules.EffectOut{Effect: "com.test/charge@1", Params: schemas.MustMarshal(map[string]any{"amount": uint64(5)})})
		case "Receipt":
			onReceipt(st, v)
		}
		return out(st)
	})
	return b
}

var builtinKey = ed25519.NewKeyFromSeed([]byte("the built-in executor test seed!"))
var externalKey = ed25519.NewKeyFromSeed([]byte("an external executor's test seed"))

type world struct {
	w    *kernel.World
	d    *effects.Dispatcher
	dir  string
	stop func()
}

// open opens the world in dir with a dispatcher running the built-in executors.
func open(t testing.TB, dir string, now func() time.Time) *world {
	return openSink(t, dir, now, nil)
}

// openSink is open with the dispatcher's receipts and frames going through
// wrap (nil: straight to the world).
func openSink(t testing.TB, dir string, now func() time.Time, wrap func(effects.Sink) effects.Sink) *world {
	db, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kr := receipts.NewKeyring()
	if err := kr.Add(receipts.BuiltinExecutor, builtinKey.Public().(ed25519.PublicKey), effects.BuiltinEffects()); err != nil {
		t.Fatal(err)
	}
	if err := kr.Add("payments", externalKey.Public().(ed25519.PublicKey), []string{"com.test/charge@1"}); err != nil {
		t.Fatal(err)
	}
	d := effects.New(effects.Config{Key: builtinKey, Executors: effects.Builtins(db.CAS(), nil), Now: now})
	w, err := kernel.Open(storesOf(db), kernel.Config{Builtins: jobs(), Keyring: kr, Publisher: d})
	if err != nil {
		t.Fatal(err)
	}
	var sink effects.Sink = w
	if wrap != nil {
		sink = wrap(w)
	}
	d.Start(sink)
	wd := &world{w: w, d: d, dir: dir}
	var once sync.Once
	wd.stop = func() {
		once.Do(func() {
			d.Stop()
			w.Close()
			db.Close()
		})
	}
	t.Cleanup(wd.stop)
	if w.Manifest() == nil {
		m, err := manifest.LoadBytes(filepath.Join(dir, "m.json"), []byte(testManifest))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Apply(context.Background(), m, false); err != nil {
			t.Fatal(err)
		}
	}
	return wd
}

func (wd *world) job(t testing.TB, js string) {
	t.Helper()
	if _, err := wd.w.Submit(context.Background(), kernel.Event{Schema: "com.test/Job@1", JSON: json.RawMessage(js)}); err != nil {
		t.Fatal(err)
	}
}

func (wd *world) quiet(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := wd.w.WaitQuiescent(ctx); err != nil {
		s, _ := wd.w.Status(context.Background())
		t.Fatalf("world never became quiescent: %v (%+v)", err, s)
	}
}

// stateJSON is a cell's canonical CBOR state as JSON (null for none), as
// the API shows it.
func stateJSON(state []byte) []byte {
	js, err := schemas.ToJSON(state)
	if err != nil {
		return []byte("null")
	}
	return js
}

func (wd *world) cell(t testing.TB, wf, id string) map[string]any {
	t.Helper()
	v, err := wd.w.Cell(context.Background(), wf, schemas.MustMarshal(id))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(stateJSON(v.State), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTimerFiresAfterCrash: a real process arms a timer, is SIGKILLed before
// it fires, and the timer fires after the world reopens.
func TestTimerFiresAfterCrash(t *testing.T) {
	if os.Getenv("AOS_TIMER_CHILD") != "" {
		wd := open(t, os.Getenv("AOS_TIMER_WORLD"), nil)
		wd.job(t, `{"id":"t1","in_ms":300}`)
		fmt.Println("ARMED")
		select {}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTimerFiresAfterCrash$")
	cmd.Env = append(os.Environ(), "AOS_TIMER_CHILD=1", "AOS_TIMER_WORLD="+dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	armed := false
	for sc.Scan() {
		if sc.Text() == "ARMED" {
			armed = true
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if !armed {
		t.Fatal("child never armed the timer")
	}
	wd := open(t, dir, nil)
	wd.quiet(t)
	st := wd.cell(t, "com.test/timer@1", "t1")
	if st["n_receipts"] != float64(1) || st["status"] != "ok" {
		t.Fatalf("timer state after restart: %v", st)
	}
	fired := st["payload"].(map[string]any)["delivered_at_ns"].(float64)
	if fired < st["armed_for"].(float64) {
		t.Fatalf("timer fired at %v, before %v", fired, st["armed_for"])
	}
}

// TestHTTPRetriesShowInTrace: two transport failures, then success; the two
// failed attempts are stream frames in the cell's trace and the receipt
// carries attempt 3.
func TestHTTPRetriesShowInTrace(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("X-Test", "yes")
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()
	wd := open(t, t.TempDir(), nil)
	wd.job(t, fmt.Sprintf(`{"id":"h1","url":%q}`, srv.URL))
	wd.quiet(t)
	st := wd.cell(t, "com.test/http@1", "h1")
	p, _ := st["payload"].(map[string]any)
	if st["status"] != "ok" || p["status"] != float64(200) || p["body"] != "hello" || st["frames"] != float64(2) {
		v, _ := wd.w.Cell(context.Background(), "com.test/http@1", schemas.MustMarshal("h1"))
		t.Fatalf("http state: %v (status %s: %s)", st, v.Status, v.Reason)
	}
	tr, err := records.Trace(context.Background(), wd.w.Journal(), "com.test/http@1", schemas.MustMarshal("h1"))
	if err != nil {
		t.Fatal(err)
	}
	var frames, receiptsSeen int
	for _, e := range tr {
		switch e.Kind {
		case journal.KindFrame:
			frames++
		case journal.KindReceipt:
			receiptsSeen++
			if e.Attempt != 3 {
				t.Fatalf("receipt attempt %d, want 3", e.Attempt)
			}
		}
	}
	if frames != 2 || receiptsSeen != 1 {
		t.Fatalf("trace has %d frames and %d receipts, want 2 and 1: %+v", frames, receiptsSeen, tr)
	}
}

// TestBlobPutGet stores bytes through sys/blob.put@1 and reads them back.
func TestBlobPutGet(t *testing.T) {
	wd := open(t, t.TempDir(), nil)
	wd.job(t, `{"id":"b1","data":"aGVsbG8gYmxvYg=="}`)
	wd.quiet(t)
	st := wd.cell(t, "com.test/blob@1", "b1")
	if st["got"] != "hello blob" {
		t.Fatalf("blob state: %v", st)
	}
}

// TestExternalClaimLease: an external executor claims an intent under a
// lease; while leased nobody else gets it; after the lease expires another
// executor claims it; its signed receipt settles the intent.
func TestExternalClaimLease(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	wd := open(t, t.TempDir(), clock)
	wd.job(t, `{"id":"c1"}`)
	ctx := context.Background()
	queued := func(want int) {
		t.Helper()
		if n := wd.d.Queued(); n != want {
			t.Fatalf("dispatcher queued %d, want %d", n, want)
		}
		if st, err := wd.w.Status(ctx); err != nil || st.QueuedEffects != want {
			t.Fatalf("status queued_effects %v (%v), want %d", st, err, want)
		}
	}
	queued(1)
	got, err := wd.d.Claim(ctx, "payments", []string{"com.test/charge@1"}, 10, time.Minute, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("first claim: %v %v", got, err)
	}
	queued(0)
	again, _ := wd.d.Claim(ctx, "other", []string{"com.test/charge@1"}, 10, time.Minute, 0)
	if len(again) != 0 {
		t.Fatalf("claimed while leased: %v", again)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	queued(1) // the lease expired: waiting for an executor again
	again, _ = wd.d.Claim(ctx, "payments-2", []string{"com.test/charge@1"}, 10, time.Minute, 0)
	if len(again) != 1 || again[0].Hash != got[0].Hash {
		t.Fatalf("after lease expiry: %v", again)
	}
	sr := receipts.Sign(externalKey, receipts.Receipt{World: got[0].World, Intent: got[0].Hash, Effect: got[0].Effect, Executor: "payments",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_9"}), Attempt: 1})
	if _, err := wd.w.SubmitReceipt(ctx, sr); err != nil {
		t.Fatal(err)
	}
	wd.quiet(t)
	if st := wd.cell(t, "com.test/charger@1", "c1"); st["status"] != "ok" {
		t.Fatalf("charge state: %v", st)
	}
	if p := wd.d.Pending(); len(p) != 0 {
		t.Fatalf("dispatcher still holds %v", p)
	}
	queued(0)
	if left, _ := wd.d.Claim(ctx, "payments", []string{"com.test/charge@1"}, 10, time.Minute, 0); len(left) != 0 {
		t.Fatalf("settled intent still claimable: %v", left)
	}
}

// storesOf is the world's storage ports over its Badger database.
func storesOf(db *badgerdb.DB) kernel.Stores {
	return kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}
}
