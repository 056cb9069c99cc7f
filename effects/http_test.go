package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// recorder is a loopback server that answers with the statuses in turn
// (the last one again once they run out; 0 drops the connection) and
// records each request's Idempotency-Key.
type recorder struct {
	mu       sync.Mutex
	statuses []int
	keys     []string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	n := len(rc.keys)
	rc.keys = append(rc.keys, r.Header.Get("Idempotency-Key"))
	st := rc.statuses[min(n, len(rc.statuses)-1)]
	rc.mu.Unlock()
	if st == 0 {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	w.WriteHeader(st)
	fmt.Fprintf(w, `{"answer":%d}`, n+1)
}

func (rc *recorder) seen() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.keys...)
}

// TestHTTP2RetryPolicy runs sys/http.request@2 against a loopback server
// under per-call retry policies: what is retried, what is returned at
// once, what the receipt says, and the Idempotency-Key each request bore.
func TestHTTP2RetryPolicy(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int
		retry    string // the call's retry policy ("" for none)
		headers  string // the call's headers ("" for none)
		status   string // the receipt's status
		payload  string // its payload as JSON, "BODY" standing for the last body
		calls    int
		frames   float64
		key      string // the Idempotency-Key every request bore ("" for the intent hash)
	}{
		{name: "500 then 200 under a policy retrying 500", statuses: []int{500, 200},
			retry: `{"retry_statuses":[500],"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":200}`, calls: 2, frames: 1},
		{name: "a 500 is not retried by default", statuses: []int{500, 200},
			status: "ok", payload: `{"attempts":1,"body":"{\"answer\":1}","status":500}`, calls: 1},
		{name: "a 400 is returned at once", statuses: []int{400},
			retry: `{"max_attempts":5,"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":1,"body":"{\"answer\":1}","status":400}`, calls: 1},
		{name: "503 retried by default until attempts run out", statuses: []int{503},
			retry: `{"max_attempts":3,"initial_backoff_ms":1,"multiplier":3}`, status: "ok",
			payload: `{"attempts":3,"body":"{\"answer\":3}","status":503}`, calls: 3, frames: 2},
		{name: "no_status_retry returns the 503", statuses: []int{503, 200},
			retry: `{"no_status_retry":true,"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":1,"body":"{\"answer\":1}","status":503}`, calls: 1},
		{name: "network errors retry and then fail the intent", statuses: []int{0},
			retry: `{"max_attempts":2,"initial_backoff_ms":1}`, status: "error",
			payload: `{"attempts":2,"error":"ERR"}`, calls: 2, frames: 1},
		{name: "a network error then 200", statuses: []int{0, 200},
			retry: `{"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":200}`, calls: 2, frames: 1},
		{name: "a caller's key is kept across a retry", statuses: []int{429, 201},
			retry: `{"initial_backoff_ms":1}`, headers: `{"idempotency-key":"order-7/charge"}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":201}`, calls: 2, frames: 1, key: "order-7/charge"},
	}
	wd := open(t, t.TempDir(), nil)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recorder{statuses: tc.statuses}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			call := fmt.Sprintf(`{"method":"POST","url":%q`, srv.URL+"/charge")
			if tc.retry != "" {
				call += `,"retry":` + tc.retry
			}
			if tc.headers != "" {
				call += `,"headers":` + tc.headers
			}
			call += "}"
			id := fmt.Sprintf("h%d", i)
			wd.job(t, fmt.Sprintf(`{"id":%q,"http2":%s}`, id, call))
			wd.quiet(t)
			st := wd.cell(t, "com.test/http2@1", id)
			if st["status"] != tc.status {
				t.Fatalf("receipt status %v, want %s (state %v)", st["status"], tc.status, st)
			}
			p, _ := st["payload"].(map[string]any)
			delete(p, "headers")
			if e, ok := p["error"].(string); ok && strings.Contains(e, srv.URL) {
				p["error"] = "ERR"
			}
			got, _ := json.Marshal(p)
			if string(got) != tc.payload {
				t.Errorf("payload %s, want %s", got, tc.payload)
			}
			if st["frames"] != nilIfZero(tc.frames) {
				t.Errorf("%v frames delivered, want %v", st["frames"], tc.frames)
			}
			keys := rc.seen()
			if len(keys) != tc.calls {
				t.Fatalf("server saw %d requests, want %d", len(keys), tc.calls)
			}
			want := tc.key
			if want == "" {
				want = st["intent"].(string)
			}
			for n, k := range keys {
				if k != want {
					t.Errorf("request %d: Idempotency-Key %q, want %q", n+1, k, want)
				}
			}
			tr, err := records.Trace(context.Background(), wd.w.Journal(), "com.test/http2@1", schemas.MustMarshal(id))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range tr {
				if e.Kind == journal.KindReceipt && e.Attempt != uint64(tc.calls) {
					t.Errorf("the journaled receipt says attempt %d, want %d", e.Attempt, tc.calls)
				}
			}
		})
	}
}

func nilIfZero(f float64) any {
	if f == 0 {
		return nil
	}
	return f
}
