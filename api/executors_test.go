package api_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func TestMain(m *testing.M) {
	code := m.Run()
	built.Cleanup()
	os.Exit(code)
}

// served is a world on Badger in a temp dir behind a real HTTP server on
// loopback, wired as `aosd serve` wires it.
type served struct {
	url, token string
	dir        host.Dir
	w          *kernel.World
}

func serveWorld(t *testing.T, withExecutors bool) *served {
	t.Helper()
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	cfg := kernel.Config{Wasm: wasmtest.Engine(t, built.WasmCache(t))}
	if _, err := host.Init(dir, cfg); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	kr, disp, err := host.NewExecutors(dir, effects.Builtins(db.CAS(), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keyring, cfg.Publisher = kr, disp
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	disp.Start(w)
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	local := api.NewLocal(w, api.NewKeys(dir.Path(host.ExecutorsFile), kr))
	local.Config = cfg // as aosd serve does: timelines recompute states with it
	srv := &api.Server{Backend: local, Token: tok}
	if withExecutors {
		srv.Executors = &api.Executors{W: w, Dispatcher: disp, Keyring: kr}
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		local.Close()
		w.Close()
		disp.Stop()
		checkJournal(t, db)
		db.Close()
	})
	m, err := manifest.Load(built.Path(t, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	return &served{url: hs.URL, token: tok, dir: dir, w: w}
}

func (s *served) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// trust adds a fresh key for executor, allowed effects, as `aosd keys add`
// does: claims are leased only to executors with a key trusted for them.
func (s *served) trust(t *testing.T, executor string, effects ...string) ed25519.PrivateKey {
	t.Helper()
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(api.AddKeyRequest{Name: executor, PublicKey: pubPEM(t, priv.Public().(ed25519.PublicKey)), Effects: effects})
	if code, body := s.do(t, "POST", "/v1/keys", string(b)); code != 200 {
		t.Fatalf("trust %s for %v: %d %s", executor, effects, code, body)
	}
	return priv
}

func (s *served) height(t *testing.T) uint64 {
	t.Helper()
	st, err := s.w.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.JournalHeight
}

func pubPEM(t *testing.T, pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// TestWrongMethod: a known path with another method is 405 with Allow; an
// unknown path is 404.
func TestWrongMethod(t *testing.T) {
	s := serveWorld(t, false)
	req, _ := http.NewRequest("DELETE", s.url+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("DELETE /v1/status: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if code, body := s.do(t, "PUT", "/v1/keys", ""); code != 405 || !strings.Contains(body, "method_not_allowed") || !strings.Contains(body, "GET, POST") {
		t.Fatalf("PUT /v1/keys: %d %s", code, body)
	}
	if code, _ := s.do(t, "GET", "/v1/cells/a%40x/k", ""); code != 404 {
		t.Fatalf("GET an unknown workflow's cell: %d", code)
	}
	if code, body := s.do(t, "GET", "/v1/nothing", ""); code != 404 || !strings.Contains(body, "no such route") {
		t.Fatalf("unknown path: %d %s", code, body)
	}
	if code, body := s.do(t, "GET", "/v1/status", ""); code != 200 {
		t.Fatalf("GET /v1/status still works: %d %s", code, body)
	}
}

func TestExecutorRoutesWithoutExecutors(t *testing.T) {
	s := serveWorld(t, false)
	for _, p := range []string{"/v1/effects/claim", "/v1/receipts", "/v1/frames"} {
		if code, body := s.do(t, "POST", p, `{}`); code != 503 || !strings.Contains(body, "runs no executors") {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
}

// TestClaimCarriesRetryPolicy: a claimed intent carries its effect's retry
// policy from the manifest, so an external executor can retry as the
// built-in ones do; an effect that declares none has no "retry".
func TestClaimCarriesRetryPolicy(t *testing.T) {
	s := serveWorld(t, true)
	if _, err := s.w.Submit(context.Background(), kernel.Event{Schema: "com.example/OrderCreated@1",
		JSON: json.RawMessage(`{"order_id":"o1","amount_cents":100,"customer":"c"}`)}); err != nil {
		t.Fatal(err)
	}
	s.trust(t, "payments", "com.example/payment.charge@1")
	code, body := s.do(t, "POST", "/v1/effects/claim", `{"executor":"payments","effects":["com.example/payment.charge@1"]}`)
	var claim struct {
		Intents []struct{ Retry *manifest.RetryPolicy }
	}
	if code != 200 || json.Unmarshal([]byte(body), &claim) != nil || len(claim.Intents) != 1 {
		t.Fatalf("claim: %d %s", code, body)
	}
	// examples/manifests/orders/effects.json
	want := manifest.RetryPolicy{MaxAttempts: 5, InitialBackoffMs: 200, MaxBackoffMs: 10000}
	if r := claim.Intents[0].Retry; r == nil || *r != want {
		t.Fatalf("claimed retry %+v, want %+v: %s", r, want, body)
	}
	js, err := json.Marshal(api.ClaimedIntent{Hash: "h"})
	if err != nil || strings.Contains(string(js), "retry") {
		t.Fatalf("an intent without a policy: %s %v", js, err)
	}
}

// TestExecutorProtocolBadInput: every malformed or untrusted request gets a
// clear error with the right status, and none of them changes the journal.
func TestExecutorProtocolBadInput(t *testing.T) {
	s := serveWorld(t, true)
	ctx := context.Background()
	if _, err := s.w.Submit(ctx, kernel.Event{Schema: "com.example/OrderCreated@1",
		JSON: json.RawMessage(`{"order_id":"o1","amount_cents":100,"customer":"c"}`)}); err != nil {
		t.Fatal(err)
	}
	claimer := s.trust(t, "payments", "com.example/payment.charge@1")
	code, body := s.do(t, "POST", "/v1/effects/claim", `{"executor":"payments","effects":["com.example/payment.charge@1"]}`)
	var claim struct {
		World   string
		Intents []struct{ Hash, Effect string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &claim) != nil || len(claim.Intents) != 1 || claim.World != s.w.Identity() {
		t.Fatalf("claim: %d %s (the world is %s)", code, body, s.w.Identity())
	}
	// The rest starts from the built-in key alone.
	if code, body := s.do(t, "DELETE", "/v1/keys/"+receipts.KeyID(claimer.Public().(ed25519.PublicKey)), ""); code != 200 {
		t.Fatalf("remove the claimer's key: %d %s", code, body)
	}
	h, err := schemas.ParseHash(claim.Intents[0].Hash)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := receipts.GenerateKey()
	const charge = "com.example/payment.charge@1"
	signedFor := func(priv ed25519.PrivateKey, executor, effect string, intent schemas.Hash) string {
		sr := receipts.Sign(priv, receipts.Receipt{World: claim.World, Intent: intent, Effect: effect, Executor: executor,
			Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"charge_id": "x", "status": "succeeded"})})
		js, err := receipts.ToJSON(sr)
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
	signed := func(priv ed25519.PrivateKey, executor string) string { return signedFor(priv, executor, charge, h) }
	frame := func(priv ed25519.PrivateKey, executor, effect string, intent schemas.Hash, seq uint64) string {
		js, err := receipts.FrameToJSON(receipts.SignFrame(priv, receipts.Frame{World: claim.World, Intent: intent, Effect: effect, Seq: seq,
			Executor: executor, Payload: schemas.MustMarshal(map[string]any{"pct": uint64(seq)})}))
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
	payments, _ := receipts.GenerateKey()
	paymentsPEM := pubPEM(t, payments.Public().(ed25519.PublicKey))
	keyReq := func(name string, effects ...string) string {
		b, _ := json.Marshal(api.AddKeyRequest{Name: name, PublicKey: paymentsPEM, Effects: effects})
		return string(b)
	}
	ghost := schemas.HashBytes([]byte("no"))
	before := s.height(t)
	for _, c := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"claim without effects", "POST", "/v1/effects/claim", `{"executor":"payments"}`, 400, `and \"effects\" are required`},
		{"claim unknown field", "POST", "/v1/effects/claim", `{"executor":"p","effects":["x"],"lease":5}`, 400, "lease"},
		{"receipt not JSON", "POST", "/v1/receipts", `{"intent_hash":`, 400, "invalid_input"},
		{"receipt unknown signer", "POST", "/v1/receipts", signed(stranger, "payments"), 403, "untrusted"},
		{"frame unsigned (the old form)", "POST", "/v1/frames", `{"intent":"` + h.String() + `","seq":1,"executor":"p","payload":{}}`, 400, "invalid_input"},
		{"frame seq 0", "POST", "/v1/frames", frame(stranger, "p", charge, h, 0), 400, "seq is 0"},
		{"frame unknown signer", "POST", "/v1/frames", frame(stranger, "payments", charge, h, 1), 403, "untrusted"},
		{"key bad PEM", "POST", "/v1/keys", `{"name":"payments","public_key":"not a key","effects":["a/b@1"]}`, 400, ""},
		{"key unknown field", "POST", "/v1/keys", `{"name":"payments","pem":"x"}`, 400, "pem"},
		{"key without effects", "POST", "/v1/keys", keyReq("payments"), 400, "no effects"},
		{"key for every effect", "POST", "/v1/keys", keyReq("payments", "*"), 400, "every effect"},
		{"key for a built-in effect", "POST", "/v1/keys", keyReq("payments", charge, "sys/timer.set@1"), 400, "only the built-in executors' key"},
		{"key for the built-in namespace", "POST", "/v1/keys", keyReq("payments", "sys/*"), 400, "only the built-in executors' key"},
		{"key under the built-in name", "POST", "/v1/keys", keyReq(receipts.BuiltinExecutor, "sys/timer.set@1"), 400, "built-in executors' name"},
		{"remove unknown key", "DELETE", "/v1/keys/ed25519:00000000000000000000000000000000", "", 404, "not_found"},
	} {
		code, body := s.do(t, c.method, c.path, c.body)
		if code != c.code || !strings.Contains(body, c.want) || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	if after := s.height(t); after != before {
		t.Fatalf("bad requests changed the journal: height %d -> %d", before, after)
	}

	// The built-in key, trusted for exactly the built-in effects, cannot be
	// removed; a key can be added for its effects, persists in
	// executors.json, and then its receipts are accepted.
	var keys []api.KeyView
	_, body = s.do(t, "GET", "/v1/keys", "")
	if err := json.Unmarshal([]byte(body), &keys); err != nil || len(keys) != 1 || keys[0].Name != receipts.BuiltinExecutor {
		t.Fatalf("keys: %s", body)
	}
	if got, want := strings.Join(keys[0].Effects, ","), strings.Join(effects.BuiltinEffects(), ","); got != want || !strings.Contains(got, "sys/timer.set@1") {
		t.Fatalf("built-in key's effects %q, want %q", got, want)
	}
	if code, body := s.do(t, "DELETE", "/v1/keys/"+keys[0].ID, ""); code != 400 || !strings.Contains(body, "cannot be removed") {
		t.Fatalf("remove builtin key: %d %s", code, body)
	}
	builtinPriv, err := s.dir.LoadExecutorKey()
	if err != nil {
		t.Fatal(err)
	}
	before = s.height(t)
	if code, body := s.do(t, "POST", "/v1/receipts", signed(builtinPriv, receipts.BuiltinExecutor)); code != 403 || !strings.Contains(body, "may not settle effect "+charge) {
		t.Fatalf("built-in key's receipt for an external effect: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/frames", frame(builtinPriv, receipts.BuiltinExecutor, charge, h, 1)); code != 403 || !strings.Contains(body, "untrusted") {
		t.Fatalf("built-in key's frame for an external effect: %d %s", code, body)
	}
	if after := s.height(t); after != before {
		t.Fatalf("refused built-in receipt changed the journal: height %d -> %d", before, after)
	}
	code, body = s.do(t, "POST", "/v1/keys", keyReq("payments", charge, "com.example/refunds/*"))
	var added api.KeyView
	if code != 200 || json.Unmarshal([]byte(body), &added) != nil || !strings.Contains(added.PublicKey, "BEGIN PUBLIC KEY") ||
		strings.Join(added.Effects, ",") != charge+",com.example/refunds/*" {
		t.Fatalf("add key: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/keys", keyReq("payments", charge)); code != 409 || !strings.Contains(body, `"conflict"`) {
		t.Fatalf("add the same key again: %d %s", code, body)
	}
	if code, body := s.do(t, "GET", "/v1/journal?kind=bogus&follow=true", ""); code != 400 || !strings.Contains(body, "unknown record kind") {
		t.Fatalf("journal follow with a bad kind: %d %s", code, body)
	}
	kr, err := s.dir.Keyring()
	if err != nil || kr.Len() != 2 {
		t.Fatalf("executors.json after add: %v keys, %v", kr.Len(), err)
	}
	for _, k := range kr.List() {
		if k.Name == "payments" && strings.Join(k.Effects, ",") != charge+",com.example/refunds/*" {
			t.Fatalf("executors.json holds payments for %v", k.Effects)
		}
	}
	if code, body := s.do(t, "POST", "/v1/receipts", signed(payments, "builtin-impostor")); code != 403 || !strings.Contains(body, "untrusted") {
		t.Fatalf("executor name not the key's: %d %s", code, body)
	}
	// Frames: signed by the allowed key for the intent's effect.
	if code, body := s.do(t, "POST", "/v1/frames", frame(payments, "payments", charge, h, 1)); code != 200 || !strings.Contains(body, `"seq"`) {
		t.Fatalf("trusted frame: %d %s", code, body)
	}
	before = s.height(t)
	for _, c := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"frame repeating its seq", "/v1/frames", frame(payments, "payments", charge, h, 1), 409, "frame_refused"},
		{"frame for an unknown intent", "/v1/frames", frame(payments, "payments", charge, ghost, 1), 409, "frame_refused"},
		{"frame for an effect not allowed", "/v1/frames", frame(payments, "payments", "com.example/payout@1", h, 2), 403, "may not settle effect com.example/payout@1"},
		{"frame for another effect than the intent's", "/v1/frames", frame(payments, "payments", "com.example/refunds/full@1", h, 2), 403, "but the intent is for effect " + charge},
		{"receipt for an unknown intent", "/v1/receipts", signedFor(payments, "payments", charge, ghost), 404, "unknown_intent"},
		{"receipt for another effect than the intent's", "/v1/receipts", signedFor(payments, "payments", "com.example/refunds/full@1", h), 403, "untrusted"},
	} {
		code, body := s.do(t, "POST", c.path, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	if after := s.height(t); after != before {
		t.Fatalf("refused frames and receipts changed the journal: height %d -> %d", before, after)
	}
	code, body = s.do(t, "POST", "/v1/receipts", signed(payments, "payments"))
	var res api.ReceiptResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Seq == 0 {
		t.Fatalf("trusted receipt: %d %s", code, body)
	}
	before = s.height(t)
	if code, body := s.do(t, "POST", "/v1/receipts", signed(payments, "payments")); code != 409 || !strings.Contains(body, `"duplicate"`) ||
		!strings.Contains(body, fmt.Sprintf("seq %d", res.Seq)) {
		t.Fatalf("duplicate receipt: %d %s", code, body)
	}
	if after := s.height(t); after != before {
		t.Fatalf("duplicate receipt changed the journal: height %d -> %d", before, after)
	}
	code, body = s.do(t, "GET", "/v1/intents/"+h.String(), "")
	if code != 200 || !bytes.Contains([]byte(body), []byte(`"kind":"receipt"`)) || !strings.Contains(body, `"kind":"frame"`) || strings.Contains(body, `"kind":"drop"`) {
		t.Fatalf("intent trace: %d %s", code, body)
	}
}

// TestJournalFiltersEveryKind: a journal read may filter by any record kind
// the journal defines (config was once refused as unknown), and a filter by
// config after a limits change returns exactly the config records.
func TestJournalFiltersEveryKind(t *testing.T) {
	s := serveWorld(t, false)
	if code, body := s.do(t, "POST", "/v1/limits", `{"max_effects":7}`); code != 200 {
		t.Fatalf("set limits: %d %s", code, body)
	}
	for _, k := range journal.Kinds() {
		if code, body := s.do(t, "GET", "/v1/journal?kind="+string(k), ""); code != 200 {
			t.Errorf("journal?kind=%s: %d %s", k, code, body)
		}
	}
	code, body := s.do(t, "GET", "/v1/journal?kind=config", "")
	if code != 200 || !strings.Contains(body, `"kind":"config"`) || strings.Contains(body, `"kind":"event"`) {
		t.Fatalf("journal?kind=config: %d %s", code, body)
	}
}
