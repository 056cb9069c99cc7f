package api_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
)

// testLimit is the host's header, body and idle timeout in these tests:
// short, so each runs in a moment. Nothing here waits for it by sleeping;
// the server's own answers (a closed connection, a 408) say it passed.
const testLimit = 200 * time.Millisecond

// testBound bounds each read of these tests so that a server that does not
// close a connection fails the test instead of hanging it. It is not a
// measurement: the server acts after testLimit.
const testBound = 20 * time.Second

// limitedHost is a world served as `aosd serve` serves it (host.Open on a
// loopback listener) with every HTTP timeout testLimit, running the
// answers manifest's builtins.
func limitedHost(t *testing.T) *host.Host {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := host.Init(host.Dir(dir), kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(true))
	b.MustRegister("t/job", "t/job@1", "step", jobStep)
	var mods []modules.Builtin
	for _, n := range []string{"t/tally", "t/job"} {
		m, _ := b.Get(n)
		mods = append(mods, *m)
	}
	h, err := host.Open(context.Background(), dir, host.Options{Listen: "127.0.0.1:0", Modules: mods,
		Kernel: kernel.Config{SnapshotEvery: -1, SnapshotInterval: -1},
		HTTP:   api.HTTPLimits{HeaderTimeout: testLimit, BodyTimeout: testLimit, IdleTimeout: testLimit}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// dial opens a raw connection to h, each read and write bounded by
// testBound.
func dial(t *testing.T, h *host.Host) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(testBound))
	return c
}

// closedByServer reads what is left on c; the server must close it (EOF)
// before testBound.
func closedByServer(t *testing.T, r io.Reader, what string) {
	t.Helper()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: the server did not close the connection: %v (read %q)", what, err, rest)
	}
}

// TestHostHTTPLimits: the server `aosd serve` runs closes a connection
// that sends half a request's headers, answers 408 to one whose body does
// not arrive and closes it, and closes a kept-alive connection that stays
// idle: a client that sends slowly or not at all holds no connection (nor
// its file descriptor) for longer than the limits.
func TestHostHTTPLimits(t *testing.T) {
	h := limitedHost(t)

	t.Run("half a header", func(t *testing.T) {
		c := dial(t, h)
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\n", h.Token())
		closedByServer(t, c, "half a header")
	})

	t.Run("half a body", func(t *testing.T) {
		c := dial(t, h)
		fmt.Fprintf(c, "POST /v1/limits HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"max_", h.Token())
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"code":"timeout"`) {
			t.Fatalf("%d %s, want 408 timeout", resp.StatusCode, b)
		}
		closedByServer(t, br, "after the 408")
	})

	t.Run("half a body on a route that takes none", func(t *testing.T) {
		c := dial(t, h)
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{", h.Token())
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		closedByServer(t, br, "a body the route does not read")
	})

	t.Run("idle", func(t *testing.T) {
		c := dial(t, h)
		fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\n\r\n", h.Token())
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("status: %v %v", resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		closedByServer(t, br, "an idle kept-alive connection")
	})
}

// slow408 sends the headers of a request with a body and half the body,
// and returns once the server answers 408: by then the body timeout has
// passed.
func slow408(t *testing.T, h *host.Host) {
	t.Helper()
	c := dial(t, h)
	fmt.Fprintf(c, "POST /v1/limits HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{", h.Token())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a slow body: %v %v, want 408", resp, err)
	}
	resp.Body.Close()
}

// hostPost sends an API request to h and returns the status and body (a
// transport error as status 0 and its text).
func hostPost(h *host.Host, path, body string) (int, string) {
	req, _ := http.NewRequest("POST", "http://"+h.Addr()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+h.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHostStreamsOutliveTheBodyTimeout: what must stay open is not cut by
// the body timeout: a journal follow stream (no body) delivers a record
// journaled after the timeout passed, and a claim's long poll (its body
// read, then waiting) gets an intent opened after it passed.
func TestHostStreamsOutliveTheBodyTimeout(t *testing.T) {
	h := limitedHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	if code, body := hostPost(h, "/v1/apply", `{"files":[{"name":"m.json","content":`+answersManifest+`}]}`); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	payments, _ := receipts.GenerateKey()
	key, _ := json.Marshal(api.AddKeyRequest{Name: "payments", PublicKey: pubPEM(t, payments.Public().(ed25519.PublicKey)), Effects: []string{workFx}})
	if code, body := hostPost(h, "/v1/keys", string(key)); code != 200 {
		t.Fatalf("trust payments: %d %s", code, body)
	}

	st, err := h.Local().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/v1/journal?follow=true&from=%d", h.Addr(), st.JournalHeight+1), nil)
	req.Header.Set("Authorization", "Bearer "+h.Token())
	follow, err := http.DefaultClient.Do(req)
	if err != nil || follow.StatusCode != 200 {
		t.Fatalf("follow: %v %v", follow, err)
	}
	defer follow.Body.Close()
	lines := bufio.NewScanner(follow.Body)

	// The claim goes first, on a connection of its own, with Expect:
	// 100-continue: the server says "100 Continue" when the handler first
	// reads the body, so once it is read here the claim's body deadline is
	// set, before the slow request below starts.
	claim := dial(t, h)
	cbody := `{"executor":"payments","effects":["t/work@1"],"wait_ms":50000}`
	fmt.Fprintf(claim, "POST /v1/effects/claim HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n", h.Token(), len(cbody))
	cr := bufio.NewReader(claim)
	if line, err := cr.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("the claim: %q %v, want 100 Continue", line, err)
	}
	if _, err := cr.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}
	io.WriteString(claim, cbody)
	slow408(t, h) // started after the claim's deadline was set: it has passed

	if code, body := hostPost(h, "/v1/events", `{"schema":"t/Start@1","value":{"id":"j1"}}`); code != 200 {
		t.Fatalf("start j1: %d %s", code, body)
	}
	resp, err := http.ReadResponse(cr, nil)
	if err != nil {
		t.Fatalf("the claim's long poll: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"effect":"t/work@1"`) {
		t.Fatalf("the claim's long poll: %d %s, want j1's intent", resp.StatusCode, b)
	}
	if !lines.Scan() || !strings.Contains(lines.Text(), `"kind":"event"`) {
		t.Fatalf("the follow stream after the body timeout: %q, %v", lines.Text(), lines.Err())
	}
}
