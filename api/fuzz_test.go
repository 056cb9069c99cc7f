package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Fuzz targets for every HTTP request body (.ci/fuzz runs them). Each feeds
// arbitrary bytes to the real handler (Server.Handler, no network) over a
// world with the answers manifest on in-memory stores, and holds the answer
// to the docs: never a panic, never a 5xx (the stores do not fail), a body
// that is JSON, an error in the API's shape whose (route, status, code) is
// one docs/API.md's tables list, and a refusal that journals nothing (but
// a late receipt's 409 dropped, its one drop record).

// fuzzWorld is the world a fuzz target drives.
type fuzzWorld struct {
	h          http.Handler
	token      string
	log        *journal.Memory
	w          *kernel.World
	documented map[api.AnswerKey]bool
	payments   ed25519.PrivateKey // trusted for t/work@1 as executor "payments"
	intent     schemas.Hash
}

func newFuzzWorld(f *testing.F) *fuzzWorld {
	f.Helper()
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(true))
	b.MustRegister("t/job", "t/job@1", "step", jobStep)
	dir := host.Dir(filepath.Join(f.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		f.Fatal(err)
	}
	store, log := cas.NewMemory(), journal.NewMemory()
	kr, disp, err := host.NewExecutors(dir, effects.Builtins(store, nil), nil)
	if err != nil {
		f.Fatal(err)
	}
	cfg := kernel.Config{Builtins: b, Keyring: kr, Publisher: disp, SnapshotEvery: -1, SnapshotInterval: -1}
	w, err := kernel.Open(kernel.Stores{CAS: store, Journal: log}, cfg)
	if err != nil {
		f.Fatal(err)
	}
	disp.Start(w)
	f.Cleanup(func() {
		w.Close()
		disp.Stop()
	})
	p := filepath.Join(f.TempDir(), "manifest.json")
	if err := os.WriteFile(p, []byte(answersManifest), 0o600); err != nil {
		f.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	if _, err := w.Apply(ctx, m, false); err != nil {
		f.Fatal(err)
	}
	local := api.NewLocal(w, api.NewKeys(dir.Path(host.ExecutorsFile), kr))
	local.Config = cfg
	tok, err := dir.Token()
	if err != nil {
		f.Fatal(err)
	}
	fw := &fuzzWorld{token: tok, log: log, w: w, documented: api.DocumentedAnswers(f)}
	fw.h = (&api.Server{Backend: local, Token: tok, Executors: &api.Executors{W: w, Dispatcher: disp, Keyring: kr}}).Handler()
	// A tally that failed, and a job with its intent in flight, signed for
	// by "payments".
	for _, ev := range []kernel.Event{
		{Schema: "t/Add@1", JSON: json.RawMessage(`{"key":"a","by":1}`)},
		{Schema: "t/Add@1", JSON: json.RawMessage(`{"key":"bad","by":13}`)},
		{Schema: "t/Start@1", JSON: json.RawMessage(`{"id":"j1"}`)},
	} {
		if _, err := w.Ingest(ctx, ev); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Sync(ctx); err != nil {
		f.Fatal(err)
	}
	pend, err := w.PendingIntents(ctx)
	if err != nil || len(pend) != 1 {
		f.Fatalf("pending intents %v, %v", pend, err)
	}
	fw.intent = pend[0].Hash
	pub, priv, _ := receiptsKey()
	fw.payments = priv
	if _, err := local.AddKey(ctx, "payments", pub, []string{workFx}); err != nil {
		f.Fatal(err)
	}
	return fw
}

// receiptsKey makes an ed25519 key: its public half as PEM, the private
// key.
func receiptsKey() (string, ed25519.PrivateKey, error) {
	priv, err := receipts.GenerateKey()
	if err != nil {
		return "", nil, err
	}
	pemText, err := receipts.EncodePublicKey(priv.Public().(ed25519.PublicKey))
	return string(pemText), priv, err
}

// serve sends body to route (METHOD /path; pattern is the route as the
// route table writes it) and checks the answer as the file comment says.
func (fw *fuzzWorld) serve(t *testing.T, pattern, path string, body []byte) {
	method := pattern[:strings.IndexByte(pattern, ' ')]
	before := fw.log.Height()
	req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+fw.token)
	rec := httptest.NewRecorder()
	fw.h.ServeHTTP(rec, req)
	after := fw.log.Height()
	status, out := rec.Code, rec.Body.Bytes()
	if status >= 500 {
		t.Fatalf("%s answered %d: %s", pattern, status, out)
	}
	if !json.Valid(out) {
		t.Fatalf("%s answered %d with a body that is not JSON: %q", pattern, status, out)
	}
	if status < 300 {
		return
	}
	var eb struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &eb); err != nil || eb.Error == nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("%s answered %d without the error shape: %s", pattern, status, out)
	}
	if k := (api.AnswerKey{Route: pattern, Status: status, Code: eb.Error.Code}); !fw.documented[k] {
		t.Fatalf("%s answered %d %s, which docs/API.md does not list: %s", pattern, status, eb.Error.Code, out)
	}
	if after != before && !(pattern == "POST /v1/receipts" && eb.Error.Code == api.CodeDropped) {
		t.Fatalf("%s refused (%d %s) but the journal grew %d -> %d: %s", pattern, status, eb.Error.Code, before, after, out)
	}
}

// fuzzBody runs the fuzz loop for one route with seeds.
func fuzzBody(f *testing.F, fw *fuzzWorld, pattern, path string, skip func([]byte) bool, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if skip != nil && skip(body) {
			return
		}
		fw.serve(t, pattern, path, body)
	})
}

var commonSeeds = []string{``, `{}`, `[]`, `null`, `{"a":1}`, `{"x":`, "\x00", `"s"`, `1e400`}

func FuzzEventsBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/events", "/v1/events", nil, append(commonSeeds,
		`{"schema":"t/Add@1","value":{"key":"a","by":1}}`,
		`{"schema":"t/Add@1","value":{"key":"a","by":1},"idempotency_key":"k1"}`,
		`{"schema":"t/Add@1","value":{"key":"a","by":2},"idempotency_key":"k1"}`,
		`[{"schema":"t/Add@1","value":{"key":"b","by":1}},{"schema":"t/Start@1","value":{"id":"j9"}}]`,
		`[{"schema":"t/Add@1","value":{"key":"b","by":1},"idempotency_key":"k"},{"schema":"t/Add@1","value":{"key":"c","by":1},"idempotency_key":"k"}]`,
		`{"schema":"t/Add@1","value":{"key":"","by":1}}`,
		`{"schema":"t/Nope@1","value":{}}`,
		`{"schema":"t/Add@1"}`,
		`{"value":{}}`,
		`{"schema":"t/Add@1","value":{"key":"a","by":1},"idempotency_key":""}`,
	)...)
}

// localPath reports a body that names a path on this machine (apply and
// shadow load manifests from it): the fuzzer must not make the test read
// whatever it names.
func localPath(b []byte) bool {
	var v struct {
		Path string `json:"path"`
	}
	return json.Unmarshal(b, &v) == nil && v.Path != ""
}

func FuzzApplyBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/apply", "/v1/apply", localPath, append(commonSeeds,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}]}`,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}],"dry_run":true,"wait":"1ms"}`,
		`{"files":[{"name":"m.json","content":[{"$kind":"defschema","name":"x"}]}]}`,
		`{"files":[{"name":"m.txt","content":{}}]}`,
		`{"files":[{"name":"a.wasm","base64":"!!"}]}`,
		`{"files":[{"name":"m.json","content":{},"base64":"AA=="}]}`,
		`{"files":[],"wait":"x"}`,
	)...)
}

func FuzzShadowBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/shadow", "/v1/shadow", localPath, append(commonSeeds,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}],"events":[{"schema":"t/Add@1","value":{"key":"s","by":1}}],"list":3}`,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}],"window":2}`,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}],"events":[{"schema":"t/Add@1"}]}`,
		`{"files":[{"name":"m.json","content":`+answersManifest+`}],"window":-1}`,
	)...)
}

func FuzzLimitsBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/limits", "/v1/limits", nil, append(commonSeeds,
		`{"max_effects":17}`, `{"max_steps_per_input":20000,"max_frames_per_intent":4}`,
		`{"max_effects":-1}`, `{"max_efects":1}`, `{"max_effects":1.5}`, `{"max_effects":99999999999999999999}`,
	)...)
}

func FuzzRecoverBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/failed/{workflow}/recover", "/v1/failed/t%2Ftally@1/recover", nil, append(commonSeeds,
		`{"key":"bad","action":"skip","fault_seq":3}`, `{"key":"bad","action":"retry","fault_seq":3}`,
		`{"key":"bad","action":"reset","fault_seq":2}`, `{"key":"a","action":"skip","fault_seq":1}`,
		`{"key":"bad","action":"undo","fault_seq":3}`, `{"key":"","action":"skip","fault_seq":3}`,
		`{"key":null,"action":"skip","fault_seq":3}`, `{"key":{"x":1},"action":"skip","fault_seq":0}`,
	)...)
}

func FuzzGCBody(f *testing.F) {
	fw := newFuzzWorld(f)
	// An archive is a file the server creates wherever it says.
	archive := func(b []byte) bool {
		var v api.GCRequest
		return json.Unmarshal(b, &v) == nil && v.Archive != ""
	}
	fuzzBody(f, fw, "POST /v1/gc", "/v1/gc", archive, append(commonSeeds,
		`{"keep_snapshots":1}`, `{"keep_snapshots":-1}`, `{"drop_journal":true}`, `{"keep_snapshots":2,"drop_journal":false}`,
	)...)
}

func FuzzClaimBody(f *testing.F) {
	fw := newFuzzWorld(f)
	fuzzBody(f, fw, "POST /v1/effects/claim", "/v1/effects/claim", nil, append(commonSeeds,
		`{"executor":"payments","effects":["t/work@1"],"max":10,"lease_ms":30000}`,
		`{"executor":"payments","effects":["t/work@1"],"max":5000,"lease_ms":99999999}`,
		`{"executor":"payments","effects":["t/work@1"],"max":-1}`,
		`{"executor":"payments","effects":[]}`, `{"executor":"","effects":["t/work@1"]}`,
		`{"executor":"payments","effects":["t/work@1"],"wait_ms":-5}`,
	)...)
}

func FuzzKeysBody(f *testing.F) {
	fw := newFuzzWorld(f)
	pub, _, err := receiptsKey()
	if err != nil {
		f.Fatal(err)
	}
	req := func(name string, effects ...string) string {
		b, _ := json.Marshal(api.AddKeyRequest{Name: name, PublicKey: pub, Effects: effects})
		return string(b)
	}
	fuzzBody(f, fw, "POST /v1/keys", "/v1/keys", nil, append(commonSeeds,
		req("ops", workFx), req("ops", "t/*"), req("ops"), req("ops", "*"), req("ops", "sys/timer.set@1"),
		req(receipts.BuiltinExecutor, workFx), `{"name":"ops","public_key":"not pem","effects":["t/work@1"]}`,
	)...)
}

func FuzzReceiptsBody(f *testing.F) {
	fw := newFuzzWorld(f)
	signFor := func(world string, intent schemas.Hash, effect string, payload any) string {
		js, err := receipts.ToJSON(receipts.Sign(fw.payments, receipts.Receipt{World: world, Intent: intent, Effect: effect,
			Executor: "payments", Status: receipts.StatusOK, Payload: schemas.MustMarshal(payload)}))
		if err != nil {
			f.Fatal(err)
		}
		return string(js)
	}
	sign := func(intent schemas.Hash, effect string, payload any) string {
		return signFor(fw.w.Identity(), intent, effect, payload)
	}
	fuzzBody(f, fw, "POST /v1/receipts", "/v1/receipts", nil, append(commonSeeds,
		signFor("world:00112233445566778899aabbccddeeff", fw.intent, workFx, map[string]any{"ok": true}),
		signFor("", fw.intent, workFx, map[string]any{"ok": true}),
		sign(fw.intent, workFx, map[string]any{"ok": true}),
		sign(fw.intent, workFx, map[string]any{"ok": "no"}),
		sign(fw.intent, "t/other@1", map[string]any{"ok": true}),
		sign(schemas.HashBytes([]byte("x")), workFx, map[string]any{"ok": true}),
		`{"intent_hash":"sha256:`+strings.Repeat("0", 64)+`","effect":"t/work@1","executor":"payments","status":"ok","payload":{},"key_id":"ed25519:00","signature":"AA=="}`,
	)...)
}

func FuzzFramesBody(f *testing.F) {
	fw := newFuzzWorld(f)
	signFor := func(world string, intent schemas.Hash, effect string, seq uint64) string {
		js, err := receipts.FrameToJSON(receipts.SignFrame(fw.payments, receipts.Frame{World: world, Intent: intent, Effect: effect,
			Seq: seq, Executor: "payments", Payload: schemas.MustMarshal(map[string]any{"pct": seq})}))
		if err != nil {
			f.Fatal(err)
		}
		return string(js)
	}
	sign := func(intent schemas.Hash, effect string, seq uint64) string {
		return signFor(fw.w.Identity(), intent, effect, seq)
	}
	fuzzBody(f, fw, "POST /v1/frames", "/v1/frames", nil, append(commonSeeds,
		signFor("world:00112233445566778899aabbccddeeff", fw.intent, workFx, 1), signFor("", fw.intent, workFx, 1),
		sign(fw.intent, workFx, 1), sign(fw.intent, workFx, 2), sign(fw.intent, workFx, 0),
		sign(fw.intent, "t/other@1", 3), sign(schemas.HashBytes([]byte("x")), workFx, 1),
		fmt.Sprintf(`{"intent":%q,"seq":1,"executor":"p","payload":{}}`, fw.intent),
	)...)
}
