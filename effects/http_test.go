package effects_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
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
		key      string // the Idempotency-Key every request bore ("" for the intent hash)
	}{
		{name: "500 then 200 under a policy retrying 500", statuses: []int{500, 200},
			retry: `{"retry_statuses":[500],"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":200}`, calls: 2},
		{name: "a 500 is not retried by default", statuses: []int{500, 200},
			status: "ok", payload: `{"attempts":1,"body":"{\"answer\":1}","status":500}`, calls: 1},
		{name: "a 400 is returned at once", statuses: []int{400},
			retry: `{"max_attempts":5,"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":1,"body":"{\"answer\":1}","status":400}`, calls: 1},
		{name: "503 retried by default until attempts run out", statuses: []int{503},
			retry: `{"max_attempts":3,"initial_backoff_ms":1,"multiplier":3}`, status: "ok",
			payload: `{"attempts":3,"body":"{\"answer\":3}","status":503}`, calls: 3},
		{name: "no_status_retry returns the 503", statuses: []int{503, 200},
			retry: `{"no_status_retry":true,"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":1,"body":"{\"answer\":1}","status":503}`, calls: 1},
		{name: "network errors retry and then fail the intent", statuses: []int{0},
			retry: `{"max_attempts":2,"initial_backoff_ms":1}`, status: "error",
			payload: `{"attempts":2,"error":"ERR"}`, calls: 2},
		{name: "a network error then 200", statuses: []int{0, 200},
			retry: `{"initial_backoff_ms":1}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":200}`, calls: 2},
		{name: "a caller's key is kept across a retry", statuses: []int{429, 201},
			retry: `{"initial_backoff_ms":1}`, headers: `{"idempotency-key":"order-7/charge"}`, status: "ok",
			payload: `{"attempts":2,"body":"{\"answer\":2}","status":201}`, calls: 2, key: "order-7/charge"},
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
			if e, ok := p["error"].(string); ok && strings.HasPrefix(e, "POST "+srv.URL+"/charge: ") && !strings.Contains(e, `Post "`) {
				p["error"] = "ERR"
			}
			got, _ := json.Marshal(p)
			if string(got) != tc.payload {
				t.Errorf("payload %s, want %s", got, tc.payload)
			}
			if st["frames"] != float64(tc.calls) {
				t.Errorf("%v attempt frames delivered, want one per request (%d)", st["frames"], tc.calls)
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

// TestHTTP2AttemptsCountAcrossCrash: a real process sends a request and
// is SIGKILLed while the server holds it; the world reopened re-sends it
// as attempt 2, not attempt 1 again, under the same Idempotency-Key, and
// the journal has one frame per attempt, the second marked resumed.
func TestHTTP2AttemptsCountAcrossCrash(t *testing.T) {
	if os.Getenv("AOS_HTTP2_CHILD") != "" {
		wd := open(t, os.Getenv("AOS_HTTP2_WORLD"), nil)
		wd.job(t, fmt.Sprintf(`{"id":"c1","http2":{"method":"POST","url":%q,"retry":{"max_attempts":3}}}`, os.Getenv("AOS_HTTP2_URL")))
		select {}
	}
	var mu sync.Mutex
	var keys []string
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		if first {
			arrived <- struct{}{}
			<-release // held until the test ends: the child dies waiting
			return
		}
		fmt.Fprint(w, "done")
	}))
	defer srv.Close()
	defer close(release)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHTTP2AttemptsCountAcrossCrash$")
	cmd.Env = append(os.Environ(), "AOS_HTTP2_CHILD=1", "AOS_HTTP2_WORLD="+dir, "AOS_HTTP2_URL="+srv.URL)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-arrived
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	wd := open(t, dir, nil)
	wd.quiet(t)
	st := wd.cell(t, "com.test/http2@1", "c1")
	p, _ := st["payload"].(map[string]any)
	if st["status"] != "ok" || p["status"] != float64(200) || p["attempts"] != float64(2) || p["body"] != "done" {
		t.Fatalf("state after the restart: %v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] != st["intent"] {
		t.Fatalf("Idempotency-Keys %q, want the intent hash %v twice", keys, st["intent"])
	}
	tr, err := records.Trace(context.Background(), wd.w.Journal(), "com.test/http2@1", schemas.MustMarshal("c1"))
	if err != nil {
		t.Fatal(err)
	}
	var frames []string
	for _, e := range tr {
		switch e.Kind {
		case journal.KindFrame:
			js, _ := schemas.ToJSON(e.Value)
			frames = append(frames, fmt.Sprintf("%d %s", e.FrameSeq, js))
		case journal.KindReceipt:
			if e.Attempt != 2 {
				t.Errorf("the receipt says attempt %d, want 2", e.Attempt)
			}
		}
	}
	if want := []string{`1 {"attempt":1}`, `2 {"attempt":2,"resumed":true}`}; !slices.Equal(frames, want) {
		t.Errorf("frames %q, want %q", frames, want)
	}
}
