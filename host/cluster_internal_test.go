package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/pgdb"
)

// fixedLease is a lease as a standby last read it; it never changes.
type fixedLease struct{ cur pgdb.Current }

func (f fixedLease) Current(context.Context) (pgdb.Current, error) { return f.cur, nil }

// standbyNode is a node that is a standby for good (its world never
// opens), listening on loopback with the token "tok".
func standbyNode(t *testing.T, id string) *Node {
	t.Helper()
	n := &Node{dir: Dir(t.TempDir()), id: id, co: ClusterOptions{}.WithDefaults(), log: slog.New(slog.DiscardHandler),
		lim: api.HTTPLimits{}.WithDefaults(), metrics: api.NewClusterMetrics(),
		tokens: func() (*api.TokenSet, error) { return api.NewTokenSet("tok", nil), nil }}
	n.standbyMetrics = newNodeMetrics(n.metrics)
	n.proxy = newForwarder(n)
	n.setRole(api.RoleStandby, nil, nil)
	if err := n.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.close() })
	return n
}

// TestStandbyNeverForwardsTwice: two standbys that each take the other for
// the owner (one stepped down a moment ago, the other has not yet read the
// new owner) answer a request 503 with Retry-After after one hop, instead
// of bouncing it between them.
func TestStandbyNeverForwardsTwice(t *testing.T) {
	a, b := standbyNode(t, "a"), standbyNode(t, "b")
	a.setView(pgdb.Current{Lease: pgdb.Lease{Epoch: 7, Owner: "b", Address: b.Addr()}, Held: true})
	b.setView(pgdb.Current{Lease: pgdb.Lease{Epoch: 6, Owner: "a", Address: a.Addr()}, Held: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+a.Addr()+"/v1/events", strings.NewReader(`{"schema":"x","value":1}`))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the request bounced until the client gave up: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &eb) != nil || eb.Error.Code != api.CodeUnavailable ||
		!strings.Contains(eb.Error.Message, "a forwarded the request here") {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "3" {
		t.Errorf("Retry-After %q, want the lease in seconds (3)", ra)
	}
}

// TestStandbyWithoutOwner: a standby that knows no owner answers 503 with
// Retry-After, naming itself, rather than forwarding anywhere; one whose
// lease view names itself (it is opening the world) says so.
func TestStandbyWithoutOwner(t *testing.T) {
	n := standbyNode(t, "s")
	for _, tc := range []struct {
		view pgdb.Current
		want string
	}{
		{pgdb.Current{Lease: pgdb.Lease{Epoch: 3}}, "no node owns the world now"},
		{pgdb.Current{Lease: pgdb.Lease{Epoch: 3, Owner: "o", Address: "127.0.0.1:1"}}, "no node owns the world now"}, // lapsed
		{pgdb.Current{Lease: pgdb.Lease{Epoch: 4, Owner: "s", Address: n.Addr()}, Held: true}, "is opening the world"},
	} {
		n.setView(tc.view)
		req, _ := http.NewRequest("GET", "http://"+n.Addr()+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), tc.want) {
			t.Errorf("view %+v: %d %s, want 503 saying %q", tc.view, resp.StatusCode, body, tc.want)
		}
	}
}

// TestStandbyMetricsNeedToken: a standby's own /metrics are behind the
// world's token like every route.
func TestStandbyMetricsNeedToken(t *testing.T) {
	n := standbyNode(t, "m")
	for _, tc := range []struct {
		auth string
		code int
	}{{"", 401}, {"Bearer nope", 401}, {"Bearer tok", 200}} {
		req, _ := http.NewRequest("GET", "http://"+n.Addr()+"/metrics", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%q: %d, want %d", tc.auth, resp.StatusCode, tc.code)
		}
		if tc.code == 200 && !strings.Contains(string(body), `aos_cluster_role{role="standby"} 1`) {
			t.Errorf("metrics without the role:\n%s", body)
		}
	}
}

// TestStepDownAnswersInFlight: a request in the owner's API when the node
// steps down ends (its context is cancelled, so stepping down never waits
// for a stream) and is answered 503 saying the write may or may not have
// been applied, never the empty 200 net/http sends for a handler that
// wrote nothing.
func TestStepDownAnswersInFlight(t *testing.T) {
	n := standbyNode(t, "o")
	started := make(chan struct{})
	life, end := context.WithCancel(context.Background())
	defer end()
	n.setRole(api.RoleOwner, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // as the API does for a client it takes for gone: answers nothing
	}), life)
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+n.Addr()+"/v1/events", strings.NewReader(`{}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{code: resp.StatusCode, body: string(b)}
	}()
	<-started
	n.setRole(api.RoleStandby, nil, nil)
	end()
	a := <-got
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "stopped owning the world while the request was in flight") {
		t.Fatalf("answer %d %q %v", a.code, a.body, a.err)
	}
}

// TestForwardEndsWhenOwnerChanges: a request forwarded to an owner that
// accepts connections but never answers (stopped) is answered 503 as soon
// as the standby reads that another node owns the world, so the client
// resends it to the new owner instead of waiting for the zombie.
func TestForwardEndsWhenOwnerChanges(t *testing.T) {
	zombie, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := zombie.Accept(); err == nil {
			accepted <- c // held open, never answered
		}
	}()
	n := standbyNode(t, "s")
	n.setView(pgdb.Current{Lease: pgdb.Lease{Epoch: 5, Owner: "z", Address: zombie.Addr().String()}, Held: true})
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+n.Addr()+"/v1/events", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{code: resp.StatusCode, body: string(b)}
	}()
	c := <-accepted // the request reached the zombie
	defer c.Close()
	n.setView(pgdb.Current{Lease: pgdb.Lease{Epoch: 6, Owner: "new", Address: "127.0.0.1:1"}, Held: true})
	a := <-got
	if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "did not answer") {
		t.Fatalf("answer %d %q %v", a.code, a.body, a.err)
	}
}

// TestStandbyLooksJustAfterTheLapse: a standby reads the lease every renew,
// but when the owner's lease lapses sooner (an owner that died stops
// renewing) it looks again just after the lapse, by the database's clock,
// not up to a renew later; a failed read or a free lease keeps the pace.
func TestStandbyLooksJustAfterTheLapse(t *testing.T) {
	renew := time.Second
	for _, c := range []struct {
		name string
		cur  pgdb.Current
		err  error
		want time.Duration
	}{
		{"held for longer than a renew", pgdb.Current{Held: true, Left: 2500 * time.Millisecond}, nil, renew},
		{"lapsing within a renew", pgdb.Current{Held: true, Left: 300 * time.Millisecond}, nil, 300*time.Millisecond + lapseMargin},
		{"lapsing at once", pgdb.Current{Held: true, Left: time.Microsecond}, nil, time.Microsecond + lapseMargin},
		{"free", pgdb.Current{}, nil, renew},
		{"read failed", pgdb.Current{Held: true, Left: 300 * time.Millisecond}, errors.New("db away"), renew},
	} {
		if got := nextLook(c.cur, c.err, renew); got != c.want {
			t.Errorf("%s: next look in %s, want %s", c.name, got, c.want)
		}
	}
}
