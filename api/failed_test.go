package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// tallyManifest is a keyed tally whose builtin code is named by %s.
const tallyManifest = `[
 {"$kind":"defschema","name":"t/Add@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/Tally@1","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}},
 {"$kind":"defschema","name":"t/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"t/tally_mod@1","runtime":{"kind":"builtin","builtin":%q,"identity":%q}},
 {"$kind":"defworkflow","name":"t/tally@1","state":"t/Tally@1","event":"t/Add@1","key_schema":"t/Key@1","effects_emitted":[],"impl":{"module":"t/tally_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"t/tally","routing":{"subscriptions":[{"event":"t/Add@1","workflow":"t/tally@1","key_field":"key"}]}}
]`

const tallyWF = "t/tally@1"

// tallyStep adds by; the buggy one refuses by 13.
func tallyStep(buggy bool) modules.StepFunc {
	return func(in *modules.Input) (*modules.Output, error) {
		var ev struct {
			By int64 `cbor:"by"`
		}
		var st struct {
			N int64 `cbor:"n"`
		}
		if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
			return nil, err
		}
		if in.State != nil {
			if err := schemas.UnmarshalTrusted(in.State, &st); err != nil {
				return nil, err
			}
		}
		if buggy && ev.By == 13 {
			return nil, errors.New("thirteen is unlucky")
		}
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"n": st.N + ev.By})}, nil
	}
}

// tallyWorld is a world of builtin tallies on Badger in a temp dir behind
// the daemon's HTTP server on loopback, with the buggy code applied.
func tallyWorld(t *testing.T) (*served, func(builtin string)) {
	t.Helper()
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(true))
	b.MustRegister("t/tally_fixed", "t/tally_fixed@1", "step", tallyStep(false))
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}, kernel.Config{Builtins: b})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: tok}).Handler())
	t.Cleanup(func() {
		hs.Close()
		w.Close()
		db.Close()
	})
	apply := func(builtin string) {
		p := filepath.Join(t.TempDir(), "manifest.json")
		if err := os.WriteFile(p, []byte(fmt.Sprintf(tallyManifest, builtin, builtin+"@1")), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Apply(context.Background(), m, false); err != nil {
			t.Fatal(err)
		}
	}
	apply("t/tally")
	return &served{url: hs.URL, token: tok, dir: dir, w: w}, apply
}

type failedBody struct {
	Failed []api.FailedInfo `json:"failed"`
	Next   string           `json:"next"`
	Error  *struct {
		Code, Message, Where string
	} `json:"error"`
}

func decodeFailed(t *testing.T, body string) failedBody {
	t.Helper()
	var fb failedBody
	if err := json.Unmarshal([]byte(body), &fb); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return fb
}

// TestFailedRoutes: GET /v1/failed lists and pages failed instances;
// POST /v1/failed/{workflow}/recover retries, and refuses a bad or stale
// recover with 400 / 404 / 409 and the error code, journaling nothing; the
// Client does the same over the wire; the journal shows recover records.
func TestFailedRoutes(t *testing.T) {
	s, apply := tallyWorld(t)
	c := &api.Client{Base: s.url, Token: s.token}
	ctx := context.Background()
	for _, ev := range []string{`{"key":"a","by":1}`, `{"key":"a","by":13}`, `{"key":"a","by":2}`, `{"key":"b","by":13}`, `{"key":"ok","by":5}`} {
		if code, body := s.do(t, "POST", "/v1/events", `{"schema":"t/Add@1","value":`+ev+`}`); code != 200 {
			t.Fatalf("send %s: %d %s", ev, code, body)
		}
	}

	code, body := s.do(t, "GET", "/v1/failed", "")
	fb := decodeFailed(t, body)
	if code != 200 || len(fb.Failed) != 2 || fb.Next != "" {
		t.Fatalf("GET /v1/failed: %d %s", code, body)
	}
	a := fb.Failed[0]
	if a.Workflow != tallyWF || string(a.Key) != `"a"` || a.Class != "business" || a.Skipped != 0 || a.Parked != 1 || !a.Retryable ||
		!strings.Contains(a.Reason, "unlucky") || a.FaultSeq != a.Input+1 {
		t.Fatalf("row a: %+v", a)
	}
	for _, tc := range []struct {
		query string
		code  int
		rows  int
		next  bool
	}{
		{"?limit=1", 200, 1, true},
		{"?workflow=" + url.QueryEscape(tallyWF) + "&key=b", 200, 1, false},
		{"?workflow=" + url.QueryEscape(tallyWF) + "&key=ok", 200, 0, false},
		{"?key=b", 400, 0, false},
		{"?limit=-1", 400, 0, false},
		{"?limit=x", 400, 0, false},
		{"?after=%21%21", 400, 0, false},
		{"?workflow=t%2Fnope%401", 400, 0, false},
		{"?workflow=" + url.QueryEscape(tallyWF) + "&key=", 400, 0, false},
	} {
		code, body := s.do(t, "GET", "/v1/failed"+tc.query, "")
		fb := decodeFailed(t, body)
		if code != tc.code || len(fb.Failed) != tc.rows || (fb.Next != "") != tc.next || (code != 200) != (fb.Error != nil) {
			t.Errorf("GET /v1/failed%s: %d %s", tc.query, code, body)
		}
	}
	// The client pages with the cursor.
	p1, err := c.Failed(ctx, api.FailedQuery{Limit: 1})
	if err != nil || len(p1.Failed) != 1 || p1.Next == "" {
		t.Fatalf("client page 1: %+v %v", p1, err)
	}
	p2, err := c.Failed(ctx, api.FailedQuery{Limit: 1, After: p1.Next})
	if err != nil || len(p2.Failed) != 1 || p2.Next != "" || string(p2.Failed[0].Key) != `"b"` {
		t.Fatalf("client page 2: %+v %v", p2, err)
	}

	path := "/v1/failed/" + url.PathEscape(tallyWF) + "/recover"
	height := s.height(t)
	for _, tc := range []struct {
		path, body string
		code       int
		errCode    string
	}{
		{path, `{"key":"a","action":"retry"`, 400, "invalid_input"},
		{path, `{"key":"a","action":"retry","fault_seq":1,"extra":1}`, 400, "invalid_input"},
		{path, fmt.Sprintf(`{"key":"a","action":"rewind","fault_seq":%d}`, a.FaultSeq), 400, "invalid_input"},
		{path, `{"key":"a","action":"retry"}`, 400, "invalid_input"},
		{path, `{"action":"retry","fault_seq":1}`, 400, "invalid_input"},
		{path, fmt.Sprintf(`{"key":"a","action":"retry","fault_seq":%d}`, a.FaultSeq-1), 409, "stale_fault"},
		{path, fmt.Sprintf(`{"key":"ok","action":"skip","fault_seq":%d}`, a.FaultSeq), 409, "not_failed"},
		{"/v1/failed/t%2Fnope%401/recover", `{"key":"a","action":"retry","fault_seq":3}`, 404, "not_found"},
	} {
		code, body := s.do(t, "POST", tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, `"code":"`+tc.errCode+`"`) {
			t.Errorf("POST %s %s: %d %s, want %d %s", tc.path, tc.body, code, body, tc.code, tc.errCode)
		}
	}
	if code, _ := s.do(t, "GET", path, ""); code != 405 {
		t.Errorf("GET on the recover route: %d, want 405", code)
	}
	if h := s.height(t); h != height {
		t.Fatalf("refused recovers journaled %d records", h-height)
	}

	// Retry with the buggy code: journaled, failed again.
	code, body = s.do(t, "POST", path, fmt.Sprintf(`{"key":"a","action":"retry","fault_seq":%d}`, a.FaultSeq))
	var res api.RecoverResult
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != 200 || res.Status != "failed" || res.FaultSeq == 0 {
		t.Fatalf("retry with the buggy code: %d %s", code, body)
	}
	// The client sees the old fault as stale (409 stale_fault).
	_, err = c.Recover(ctx, tallyWF, api.RecoverRequest{Key: json.RawMessage(`"a"`), Action: "retry", FaultSeq: a.FaultSeq})
	var de *api.Error
	if !errors.As(err, &de) || de.Status != 409 || de.Code != api.CodeStaleFault || !strings.Contains(de.Message, fmt.Sprint(res.FaultSeq)) {
		t.Fatalf("client stale recover: %v", err)
	}
	apply("t/tally_fixed")
	got, err := c.Recover(ctx, tallyWF, api.RecoverRequest{Key: json.RawMessage(`"a"`), Action: "retry", FaultSeq: res.FaultSeq})
	if err != nil || got.Status != "completed" || got.FaultSeq != 0 || got.Delivered != 1 {
		t.Fatalf("client retry with the fixed code: %+v %v, want completed with the parked event delivered", got, err)
	}
	if code, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+"/a", ""); code != 200 || !strings.Contains(body, `"n":16`) {
		t.Fatalf("cell a after the retry: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", path, fmt.Sprintf(`{"key":"b","action":"reset","fault_seq":%d}`, fb.Failed[1].FaultSeq)); code != 200 {
		t.Fatalf("reset b: %d %s", code, body)
	}
	if code, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+"/b", ""); code != 404 {
		t.Fatalf("cell b after the reset: %d %s", code, body)
	}
	if code, body := s.do(t, "GET", "/v1/failed", ""); code != 200 || len(decodeFailed(t, body).Failed) != 0 {
		t.Fatalf("failed after recovering all: %d %s", code, body)
	}

	code, body = s.do(t, "GET", "/v1/journal?kind=recover", "")
	var actions []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var r struct {
			Kind string `json:"kind"`
			Body struct {
				Action string          `json:"action"`
				Key    json.RawMessage `json:"key"`
			} `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Kind != "recover" {
			t.Fatalf("journal line %s: %v", sc.Text(), err)
		}
		actions = append(actions, r.Body.Action+" "+string(r.Body.Key))
	}
	if want := `[retry "a" retry "a" reset "b"]`; code != 200 || fmt.Sprint(actions) != want {
		t.Fatalf("journal recovers %v (%d), want %s", actions, code, want)
	}
}

// TestRecoverRemovedWorkflow: a workflow that left the manifest keeps its
// failed instances; the API still lists them and finds one by its key's
// JSON, refuses to retry it (409 not_retryable), and skips it.
func TestRecoverRemovedWorkflow(t *testing.T) {
	s, _ := tallyWorld(t)
	for _, ev := range []string{`{"key":"a","by":13}`, `{"key":"42","by":13}`} {
		if code, body := s.do(t, "POST", "/v1/events", `{"schema":"t/Add@1","value":`+ev+`}`); code != 200 {
			t.Fatalf("send %s: %d %s", ev, code, body)
		}
	}
	// Another manifest, without the tally workflow.
	p := filepath.Join(t.TempDir(), "manifest.json")
	other := strings.NewReplacer(`"name":"t/tally@1"`, `"name":"t/other@1"`, `"workflow":"t/tally@1"`, `"workflow":"t/other@1"`).
		Replace(fmt.Sprintf(tallyManifest, "t/tally_fixed", "t/tally_fixed@1"))
	if err := os.WriteFile(p, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	q := "/v1/failed?workflow=" + url.QueryEscape(tallyWF)
	code, body := s.do(t, "GET", q, "")
	fb := decodeFailed(t, body)
	if code != 200 || len(fb.Failed) != 2 || fb.Failed[0].Retryable || !strings.Contains(fb.Failed[0].RetryBlocked, "not in the current manifest") {
		t.Fatalf("GET %s: %d %s", q, code, body)
	}
	for _, k := range []string{"a", "%22a%22", "42"} {
		if code, body := s.do(t, "GET", q+"&key="+k, ""); code != 200 || len(decodeFailed(t, body).Failed) != 1 {
			t.Errorf("key %s: %d %s", k, code, body)
		}
	}
	path := "/v1/failed/" + url.PathEscape(tallyWF) + "/recover"
	height := s.height(t)
	if string(fb.Failed[0].Key) != `"a"` || string(fb.Failed[1].Key) != `"42"` {
		t.Fatalf("rows %s, %s: want canonical key order (CBOR: shorter strings first)", fb.Failed[0].Key, fb.Failed[1].Key)
	}
	if code, body := s.do(t, "POST", path, fmt.Sprintf(`{"key":"a","action":"retry","fault_seq":%d}`, fb.Failed[0].FaultSeq)); code != 409 ||
		!strings.Contains(body, `"code":"not_retryable"`) {
		t.Fatalf("retry of a removed workflow: %d %s", code, body)
	}
	if code, body := s.do(t, "POST", path, `{"key":"zzz","action":"skip","fault_seq":3}`); code != 404 {
		t.Fatalf("unknown key of a removed workflow: %d %s", code, body)
	}
	if s.height(t) != height {
		t.Fatal("refused recovers journaled something")
	}
	for _, f := range fb.Failed {
		if code, body := s.do(t, "POST", path, fmt.Sprintf(`{"key":%s,"action":"skip","fault_seq":%d}`, f.Key, f.FaultSeq)); code != 200 {
			t.Fatalf("skip %s: %d %s", f.Key, code, body)
		}
	}
	if code, body := s.do(t, "GET", q, ""); code != 400 || !strings.Contains(body, "unknown workflow") {
		t.Fatalf("after skipping all: %d %s", code, body)
	}
}
