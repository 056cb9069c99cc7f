package loadgen

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestWire drives a worker's connection against net/http's server on
// loopback: the request is what a client must send, connections are kept
// and reused, a "Connection: close" answer makes the next post dial anew,
// any status and a chunked body come back as sent, and the end of one
// phase's context neither breaks the next phase nor leaves a worker
// blocked when it ends mid-request.
func TestWire(t *testing.T) {
	var conns atomic.Int32
	stuck := make(chan struct{})
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /base/v1/events", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad headers", http.StatusUnauthorized)
			return
		}
		switch string(body) {
		case "close":
			w.Header().Set("Connection", "close")
		case "teapot":
			w.WriteHeader(http.StatusTeapot)
		case "chunked":
			w.Write([]byte(`{"seq":`))
			w.(http.Flusher).Flush() // no Content-Length: the answer is chunked
		case "stuck":
			close(stuck)
			<-release
			return
		}
		w.Write(append([]byte("echo "), body...))
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	defer close(release)

	w, ok := newWire(srv.URL+"/base", "tok")
	if !ok {
		t.Fatalf("newWire(%s) refused a plain http address", srv.URL)
	}
	defer w.close()
	post := func(ctx context.Context, body string) (string, int) {
		t.Helper()
		b, status, err := w.post(ctx, []byte(body))
		if err != nil {
			t.Fatalf("post %q: %v", body, err)
		}
		return string(b), status
	}
	ctx1, end1 := context.WithCancel(context.Background())
	for _, body := range []string{"a", "b", "c"} {
		if got, st := post(ctx1, body); st != 200 || got != "echo "+body {
			t.Fatalf("post %q = %d %q", body, st, got)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("three posts used %d connections, want 1 kept alive", n)
	}
	if got, st := post(ctx1, "teapot"); st != http.StatusTeapot || got != "echo teapot" {
		t.Fatalf("teapot = %d %q", st, got)
	}
	if got, st := post(ctx1, "chunked"); st != 200 || got != `{"seq":echo chunked` {
		t.Fatalf("chunked = %d %q", st, got)
	}
	// The warm-up's context ends; the measured phase's posts go on, on
	// the same connection.
	end1()
	ctx2, end2 := context.WithCancel(context.Background())
	if got, _ := post(ctx2, "d"); got != "echo d" {
		t.Fatalf("post after the previous phase ended = %q", got)
	}
	if got, _ := post(ctx2, "close"); got != "echo close" {
		t.Fatalf("close = %q", got)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("before a closing answer: %d connections, want 1", n)
	}
	if got, _ := post(ctx2, "e"); got != "echo e" {
		t.Fatalf("post after a closing answer = %q", got)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("after a closing answer: %d connections, want 2", n)
	}
	// A phase ending while a worker waits for its answer unblocks it.
	errc := make(chan error, 1)
	go func() {
		_, _, err := w.post(ctx2, []byte("stuck"))
		errc <- err
	}()
	<-stuck
	end2()
	if err := <-errc; err == nil {
		t.Fatal("post whose context ended returned no error")
	}
	if _, ok := newWire("https://127.0.0.1:1", "tok"); ok {
		t.Fatal("newWire accepted an https address (it speaks plain http only)")
	}
}
