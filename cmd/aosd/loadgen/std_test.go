package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDaemon answers the routes a template run uses, numbering events,
// and records who posted them and on how many connections.
type fakeDaemon struct {
	seq   atomic.Uint64
	conns atomic.Int32
	mu    sync.Mutex
	agent map[string]int // User-Agent of POST /v1/events -> count
	bad   []string       // requests that were not what a client must send
}

func (f *fakeDaemon) serve(t *testing.T) *httptest.Server {
	t.Helper()
	f.agent = map[string]int{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/events", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		f.mu.Lock()
		f.agent[r.Header.Get("User-Agent")]++
		if err != nil || r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" ||
			!strings.HasPrefix(string(body), `{"schema":"a/B@1","value":"k-`) {
			f.bad = append(f.bad, fmt.Sprintf("%v %q %q", err, r.Header, body))
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"seq":%d,"duplicate":false}`, f.seq.Add(1))
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "process_cpu_seconds_total %d\n", f.seq.Load())
	})
	mux.HandleFunc("GET /v1/quiescent", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"quiescent":true}`)
	})
	mux.HandleFunc("GET /v1/failed", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"failed":[]}`)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestClients runs the same load with each client against net/http's
// server on loopback: std posts every event through net/http's Client
// (its User-Agent) on kept-alive connections, no more than one per worker
// and none dialled per request; lean posts them on its own connections;
// both reports say which client they measured.
func TestClients(t *testing.T) {
	const conc, warmup, events = 8, 40, 400
	for _, tc := range []struct {
		client, agent string
	}{
		{ClientStd, "Go-http-client/1.1"},
		{ClientLean, "aosd-bench"},
		{"", "aosd-bench"}, // the default
	} {
		t.Run(tc.client, func(t *testing.T) {
			f := &fakeDaemon{}
			srv := f.serve(t)
			c := Config{Base: srv.URL, Token: "tok", Events: events, Warmup: warmup, Batch: 1, Concurrency: conc,
				Keys: 50, KeyPrefix: "k-", Settle: time.Second, Client: tc.client,
				Template: []byte(`{"schema":"a/B@1","value":"{{key}}"}`)}
			rep, err := Run(context.Background(), c)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			want := tc.client
			if want == "" {
				want = ClientLean
			}
			if rep.Client != want || !rep.Verify.OK || rep.Verify.Seqs != warmup+events || rep.Requests != events {
				t.Fatalf("report: client %q, verify %+v, %d requests; want client %q, %d seqs, %d requests",
					rep.Client, rep.Verify, rep.Requests, want, warmup+events, events)
			}
			if rep.DaemonCPU == nil || *rep.DaemonCPU != events {
				t.Fatalf("daemon CPU = %v, want the metric's delta over the measured events, %d", rep.DaemonCPU, events)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.bad) > 0 {
				t.Fatalf("%d malformed event posts, the first: %s", len(f.bad), f.bad[0])
			}
			if len(f.agent) != 1 || f.agent[tc.agent] != warmup+events {
				t.Fatalf("event posts by User-Agent = %v, want all %d from %q", f.agent, warmup+events, tc.agent)
			}
			// One connection per worker, plus the few the other requests
			// (metrics, quiescent, failed) may open: never one per request.
			if n := f.conns.Load(); n < 1 || n > conc+4 {
				t.Fatalf("%d connections for %d requests from %d workers, want at most %d", n, warmup+events+4, conc, conc+4)
			}
		})
	}
}

// TestStdClientPool is the ordinary client's pool: idle connections for
// every worker (the default Transport keeps two per host).
func TestStdClientPool(t *testing.T) {
	tr := stdClient(256).Transport.(*http.Transport)
	if tr.MaxIdleConnsPerHost < 256 || tr.MaxIdleConns < 256 || tr.DisableKeepAlives {
		t.Fatalf("Transport: %d idle per host, %d idle, keep-alives off %v; want at least 256 kept alive",
			tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tr.DisableKeepAlives)
	}
}
