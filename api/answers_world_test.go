package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
	"github.com/aos-kernel/aos/views"
)

// answersManifest is a world of builtin workflows that can reach every
// answer of the API: t/tally@1 (keyed, fails on by 13) and t/job@1 (keyed,
// asks for the external effect t/work@1 when it starts, fails when started
// twice, and has no Rejected arm, so a receipt whose payload fails
// t/WorkReceipt@1 fails it).
const answersManifest = `[
 {"$kind":"defschema","name":"t/Add@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/Tally@1","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"t/tally_mod@1","runtime":{"kind":"builtin","builtin":"t/tally","identity":"t/tally@1"}},
 {"$kind":"defworkflow","name":"t/tally@1","state":"t/Tally@1","event":"t/Add@1","key_schema":"t/Key@1","effects_emitted":[],"impl":{"module":"t/tally_mod@1","entrypoint":"step"}},
 {"$kind":"defschema","name":"t/Start@1","schema":{"type":"object","properties":{"id":{"type":"string","minLength":1}},"required":["id"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/JobEvent@1","variant":{"Start":"t/Start@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"t/WorkParams@1","schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/WorkReceipt@1","schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}},
 {"$kind":"defeffect","name":"t/work@1","params":"t/WorkParams@1","receipt":"t/WorkReceipt@1"},
 {"$kind":"defmodule","name":"t/job_mod@1","runtime":{"kind":"builtin","builtin":"t/job","identity":"t/job@1"}},
 {"$kind":"defworkflow","name":"t/job@1","state":"t/Tally@1","event":"t/JobEvent@1","key_schema":"t/Key@1","effects_emitted":["t/work@1"],"impl":{"module":"t/job_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/answers","routing":{"subscriptions":[
   {"event":"t/Add@1","workflow":"t/tally@1","key_field":"key"},
   {"event":"t/Start@1","workflow":"t/job@1","key_field":"id"}]}}
]`

const (
	jobWF  = "t/job@1"
	workFx = "t/work@1"
)

// runawayAnswersManifest is answersManifest with the kernel's hostile test
// guest (kernel/testdata/guests/hostile, its hash %s) as t/hostile@1, whose
// "loop" act never returns, and t/job@1 taking another event schema, so that
// events parked for it before cannot be delivered.
var runawayAnswersManifest = strings.NewReplacer(
	`"event":"t/JobEvent@1","key_schema"`, `"event":"t/JobEvent2@1","key_schema"`,
	` {"$kind":"manifest","name":"t/answers","routing":{"subscriptions":[`,
	` {"$kind":"defschema","name":"t/JobEvent2@1","variant":{"Start":"t/Start@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"t/HostileEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/HostileState@1","schema":{"type":"object","properties":{"calls":{"type":"integer"},"global":{"type":"integer"},"note":{"type":"string"}},"required":["calls","global"],"additionalProperties":false}},
 {"$kind":"defmodule","name":"t/hostile_mod@1","runtime":{"kind":"wasm","artifact":"hostile.wasm","hash":"%s","max_memory_mib":64}},
 {"$kind":"defworkflow","name":"t/hostile@1","state":"t/HostileState@1","event":"t/HostileEvent@1","key_schema":"t/Key@1","effects_emitted":[],"impl":{"module":"t/hostile_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/answers","routing":{"subscriptions":[
   {"event":"t/HostileEvent@1","workflow":"t/hostile@1","key_field":"key"},`).Replace(answersManifest)

// runawayGuest builds the kernel's hostile test guest from source, with the
// flags `aosd build` uses.
func runawayGuest(t testing.TB) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hostile.wasm")
	if err := build.Package(context.Background(), "", "../kernel/testdata/guests/hostile", out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jobStep starts a job by asking for t/work@1 (state n 1) and finishes it
// on its receipt (n 2); a second start is a business fault.
func jobStep(in *modules.Input) (*modules.Output, error) {
	var ev struct {
		Tag string `cbor:"$tag"`
	}
	if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
		return nil, err
	}
	switch {
	case ev.Tag == "Start" && in.State != nil:
		return nil, modules.Fault("started twice")
	case ev.Tag == "Start":
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"n": 1}),
			Effects: []modules.EffectOut{{Effect: workFx, Params: schemas.MustMarshal(map[string]any{"id": "w"})}}}, nil
	}
	return &modules.Output{State: schemas.MustMarshal(map[string]any{"n": 2})}, nil
}

// answersWorld is a world on Badger in a temp dir whose stores fail when
// its injectors say so, behind two real HTTP servers on loopback: url
// serves as `aosd serve` does (executors, metrics), bare serves the same
// world without executors.
type answersWorld struct {
	url, bare, token string
	// short serves as url does, with a body timeout short enough to
	// provoke 408 (shortBodyTimeout).
	short string
	// pgLike serves as a world on PostgreSQL does: no backup through the
	// API (NoBackup; host sets it, TestPostgresWorld checks).
	pgLike     string
	dir        host.Dir
	w          *kernel.World
	log        *storefault.Journal
	casFaults  *storefault.Injector
	logFaults  *storefault.Injector
	casGate    atomic.Pointer[func(storefault.Op)] // BeforeWrite and BeforeRead hook, nil: none
	builtinKey ed25519.PrivateKey
}

func newAnswersWorld(t *testing.T) *answersWorld {
	t.Helper()
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(true))
	b.MustRegister("t/job", "t/job@1", "step", jobStep)
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	aw := &answersWorld{dir: dir, casFaults: &storefault.Injector{}, logFaults: &storefault.Injector{}}
	store := &storefault.CAS{Store: db.CAS(), Faults: aw.casFaults,
		BeforeWrite: func(op storefault.Op) {
			if g := aw.casGate.Load(); g != nil {
				(*g)(op)
			}
		},
		BeforeRead: func(op storefault.Op) {
			if g := aw.casGate.Load(); g != nil {
				(*g)(op)
			}
		}}
	aw.log = &storefault.Journal{Log: db.Journal(), Faults: aw.logFaults}
	kr, disp, err := host.NewExecutors(dir, effects.Builtins(store, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	metrics := api.NewMetrics()
	// A wasm step is stopped after 150ms, and one timeout sets its module
	// aside: the runaway guest's answers need no more.
	cfg := kernel.Config{Builtins: b, Keyring: kr, Publisher: disp, Observer: metrics, SnapshotEvery: -1, SnapshotInterval: -1,
		StepTimeout: 150 * time.Millisecond, SetAsideAfter: 1, Wasm: wasmtest.Engine(t, "")}
	w, err := kernel.Open(kernel.Stores{CAS: store, Journal: aw.log}, cfg)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	disp.Start(w)
	metrics.Watch(w)
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	local := api.NewLocal(w, api.NewKeys(dir.Path(host.ExecutorsFile), kr))
	local.Config = cfg
	hs := httptest.NewServer((&api.Server{Backend: local, Token: tok, Metrics: metrics.Registry,
		Executors: &api.Executors{W: w, Dispatcher: disp, Keyring: kr},
		Backup:    func(out io.Writer) error { return host.WriteBackup(dir, db, out) },
		// A rotation to the same token: the answer's shape, not the file
		// (TestTokenRotate in cmd/aosd rotates a real daemon's).
		RotateToken: func(grace time.Duration) (*api.TokenRotation, error) {
			return &api.TokenRotation{Token: tok, File: dir.Path(host.TokenFile), GraceMs: grace.Milliseconds(), Daemon: true}, nil
		}}).Handler())
	bare := httptest.NewServer((&api.Server{Backend: local, Token: tok}).Handler())
	short := httptest.NewServer((&api.Server{Backend: local, Token: tok, BodyTimeout: shortBodyTimeout,
		Executors: &api.Executors{W: w, Dispatcher: disp, Keyring: kr}}).Handler())
	pgLike := httptest.NewServer((&api.Server{Backend: local, Token: tok, NoBackup: "a world on PostgreSQL: back it up with pg_dump"}).Handler())
	t.Cleanup(func() {
		hs.Close()
		bare.Close()
		short.Close()
		pgLike.Close()
		w.Close()
		disp.Stop()
		db.Close()
	})
	aw.url, aw.bare, aw.short, aw.pgLike, aw.token, aw.w = hs.URL, bare.URL, short.URL, pgLike.URL, tok, w
	if aw.builtinKey, err = dir.LoadExecutorKey(); err != nil {
		t.Fatal(err)
	}
	return aw
}

// shortBodyTimeout is the body timeout of answersWorld.short.
const shortBodyTimeout = 100 * time.Millisecond

// height is the journal's height, read from the store (it works on a world
// that stopped).
func (aw *answersWorld) height() uint64 { return aw.log.Height() }

// httpAnswer is one HTTP answer.
type httpAnswer struct {
	status int
	body   string
	header http.Header
}

// call sends one request to base (aw.url when "") with the bearer token
// unless auth says otherwise ("-": none).
func (aw *answersWorld) call(t *testing.T, base, method, path, body string, hdr map[string]string) httpAnswer {
	t.Helper()
	if base == "" {
		base = aw.url
	}
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aw.token)
	for k, v := range hdr {
		if v == "-" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpAnswer{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// signedReceipt is a receipt's JSON form for world, signed by priv.
func signedReceipt(t *testing.T, world string, priv ed25519.PrivateKey, executor, effect string, intent schemas.Hash, payload any) string {
	t.Helper()
	js, err := receipts.ToJSON(receipts.Sign(priv, receipts.Receipt{World: world, Intent: intent, Effect: effect, Executor: executor,
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(payload)}))
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// signedFrame is a frame's JSON form for world, signed by priv.
func signedFrame(t *testing.T, world string, priv ed25519.PrivateKey, executor, effect string, intent schemas.Hash, seq uint64) string {
	t.Helper()
	js, err := receipts.FrameToJSON(receipts.SignFrame(priv, receipts.Frame{World: world, Intent: intent, Effect: effect, Seq: seq,
		Executor: executor, Payload: schemas.MustMarshal(map[string]any{"pct": seq})}))
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

// intentOf is the hash of the intent job key opened, from its trace.
func (aw *answersWorld) intentOf(t *testing.T, key string) schemas.Hash {
	t.Helper()
	a := aw.call(t, "", "GET", "/v1/trace/t%2Fjob@1/"+key, "", nil)
	var tr []views.TraceEntry
	if err := json.Unmarshal([]byte(a.body), &tr); err != nil || a.status != 200 {
		t.Fatalf("trace of job %s: %d %s", key, a.status, a.body)
	}
	for _, e := range tr {
		if len(e.Intents) > 0 {
			return e.Intents[0]
		}
	}
	t.Fatalf("job %s opened no intent: %s", key, a.body)
	return schemas.Hash{}
}

// faultOf is the fault seq of a failed instance.
func (aw *answersWorld) faultOf(t *testing.T, wf, key string) uint64 {
	t.Helper()
	fi, err := aw.w.FailedInstance(context.Background(), wf, schemas.MustMarshal(key))
	if err != nil {
		t.Fatalf("%s %s: %v", wf, key, err)
	}
	return fi.FaultSeq
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
