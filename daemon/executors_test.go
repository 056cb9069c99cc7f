package daemon_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/daemon"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/internal/examples"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func TestMain(m *testing.M) {
	code := m.Run()
	examples.Cleanup()
	os.Exit(code)
}

// served is a world on Badger in a temp dir behind a real HTTP server on
// loopback, wired as `aosd serve` wires it.
type served struct {
	url, token string
	dir        daemon.Dir
	w          *kernel.World
}

func serveWorld(t *testing.T, withExecutors bool) *served {
	t.Helper()
	dir := daemon.Dir(filepath.Join(t.TempDir(), "world"))
	cfg := dir.Config(kernel.Config{WasmCacheDir: examples.WasmCache(examples.Dir(t))})
	if _, err := daemon.Init(dir, cfg); err != nil {
		t.Fatal(err)
	}
	db, err := cas.OpenBadger(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	kr, disp, err := daemon.NewExecutors(dir, effects.Builtins(cas.NewBadger(db), nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Keyring, cfg.Publisher = kr, disp
	w, err := kernel.OpenDB(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	disp.Start(w)
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	srv := &daemon.Server{Backend: daemon.NewLocal(w, dir, kr), Token: tok}
	if withExecutors {
		srv.Executors = &daemon.Executors{W: w, Dispatcher: disp}
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		w.Close()
		disp.Stop()
		db.Close()
	})
	m, err := manifest.Load(examples.Path(t, "orders"))
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

// TestExecutorProtocolBadInput: every malformed or untrusted request gets a
// clear error with the right status, and none of them changes the journal.
func TestExecutorProtocolBadInput(t *testing.T) {
	s := serveWorld(t, true)
	ctx := context.Background()
	if _, err := s.w.Submit(ctx, kernel.Event{Schema: "com.example/OrderCreated@1",
		JSON: json.RawMessage(`{"order_id":"o1","amount_cents":100,"customer":"c"}`)}); err != nil {
		t.Fatal(err)
	}
	code, body := s.do(t, "POST", "/v1/effects/claim", `{"executor":"payments","effects":["com.example/payment.charge@1"]}`)
	var claim struct {
		Intents []struct{ Hash, Effect string }
	}
	if code != 200 || json.Unmarshal([]byte(body), &claim) != nil || len(claim.Intents) != 1 {
		t.Fatalf("claim: %d %s", code, body)
	}
	h, err := schemas.ParseHash(claim.Intents[0].Hash)
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := receipts.GenerateKey()
	signed := func(priv ed25519.PrivateKey, executor string) string {
		sr := receipts.Sign(priv, receipts.Receipt{Intent: h, Effect: claim.Intents[0].Effect, Executor: executor,
			Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"charge_id": "x", "status": "succeeded"})})
		js, err := receipts.ToJSON(sr)
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
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
		{"frame seq 0", "POST", "/v1/frames", `{"intent":"` + h.String() + `","seq":0,"executor":"p","payload":{}}`, 400, "of 1 or more are required"},
		{"frame bad hash", "POST", "/v1/frames", `{"intent":"sha256:zz","seq":1,"executor":"p","payload":{}}`, 400, "intent"},
		{"frame unknown intent", "POST", "/v1/frames", `{"intent":"` + schemas.HashBytes([]byte("no")).String() + `","seq":1,"executor":"p","payload":{}}`, 409, "frame_refused"},
		{"key bad PEM", "POST", "/v1/keys", `{"name":"payments","public_key":"not a key"}`, 400, ""},
		{"key unknown field", "POST", "/v1/keys", `{"name":"payments","pem":"x"}`, 400, "pem"},
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

	// The built-in key cannot be removed; a trusted key can be added,
	// persists in executors.json, and then its receipts are accepted.
	var keys []daemon.KeyView
	_, body = s.do(t, "GET", "/v1/keys", "")
	if err := json.Unmarshal([]byte(body), &keys); err != nil || len(keys) != 1 || keys[0].Name != daemon.BuiltinExecutor {
		t.Fatalf("keys: %s", body)
	}
	if code, body := s.do(t, "DELETE", "/v1/keys/"+keys[0].ID, ""); code != 400 || !strings.Contains(body, "cannot be removed") {
		t.Fatalf("remove builtin key: %d %s", code, body)
	}
	payments, _ := receipts.GenerateKey()
	req, _ := json.Marshal(daemon.AddKeyRequest{Name: "payments", PublicKey: pubPEM(t, payments.Public().(ed25519.PublicKey))})
	code, body = s.do(t, "POST", "/v1/keys", string(req))
	var added daemon.KeyView
	if code != 200 || json.Unmarshal([]byte(body), &added) != nil || !strings.Contains(added.PublicKey, "BEGIN PUBLIC KEY") {
		t.Fatalf("add key: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/keys", string(req)); code != 409 || !strings.Contains(body, `"conflict"`) {
		t.Fatalf("add the same key again: %d %s", code, body)
	}
	if code, body := s.do(t, "GET", "/v1/journal?kind=bogus&follow=true", ""); code != 400 || !strings.Contains(body, "unknown record kind") {
		t.Fatalf("journal follow with a bad kind: %d %s", code, body)
	}
	kr, err := s.dir.Keyring()
	if err != nil || kr.Len() != 2 {
		t.Fatalf("executors.json after add: %v keys, %v", kr.Len(), err)
	}
	if code, body := s.do(t, "POST", "/v1/receipts", signed(payments, "builtin-impostor")); code != 403 || !strings.Contains(body, "untrusted") {
		t.Fatalf("executor name not the key's: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/receipts", signed(payments, "payments")); code != 200 || !strings.Contains(body, `"seq"`) {
		t.Fatalf("trusted receipt: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", "/v1/receipts", signed(payments, "payments")); code != 409 || !strings.Contains(body, "dropped") {
		t.Fatalf("duplicate receipt: %d %s", code, body)
	}
	code, body = s.do(t, "GET", "/v1/intents/"+h.String(), "")
	if code != 200 || !bytes.Contains([]byte(body), []byte(`"kind":"receipt"`)) || !strings.Contains(body, `"kind":"drop"`) {
		t.Fatalf("intent trace: %d %s", code, body)
	}
}
