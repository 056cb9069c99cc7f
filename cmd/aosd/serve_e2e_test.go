package main_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/examples/built"
)

// TestServeHTTPLimitsAndAWrongToken: `aosd serve`'s limits flags reach the
// server (a connection that sends half a header is closed after
// --header-timeout; a batch over --max-batch is 413 naming it), flags that
// bound nothing exit 2, and a CLI command whose token file no longer holds
// the daemon's token says that, naming the file, instead of that the
// daemon does not answer.
func TestServeHTTPLimitsAndAWrongToken(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	for _, bad := range [][]string{{"--header-timeout", "0s"}, {"--body-timeout", "-1s"}, {"--max-batch", "0"}} {
		r := aosd(t, world, append([]string{"serve"}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, bad[0]) {
			t.Fatalf("serve %v: exit %d: %s", bad, r.code, r.stderr)
		}
	}
	// Applied before the daemon starts: a 5 MB upload need not arrive
	// within 300 ms on a loaded machine, and the body timeout is not what
	// this test is for (TestHostHTTPLimits is).
	ok(t, world, "apply", built.Path(t, "counter"))
	d := startDaemonEnv(t, world, nil, "--header-timeout", "300ms", "--body-timeout", "300ms", "--max-batch", "2")
	tok := token(t, world)

	c, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a bound on the test; the server closes after 300ms
	fmt.Fprintf(c, "GET /v1/status HTTP/1.1\r\nHost: aos\r\nAuthorization: Bearer %s\r\n", tok)
	if rest, err := io.ReadAll(c); err != nil {
		t.Fatalf("half a header: the server did not close the connection: %v (%q)", err, rest)
	}

	ev := `{"schema":"com.example/CountEvent@1","value":{"key":"a","by":1}}`
	code, body := post(t, d, tok, "/v1/events", []byte("["+ev+","+ev+","+ev+"]"))
	if code != 413 || !strings.Contains(string(body), "a batch holds at most 2 events") {
		t.Fatalf("a batch of 3 with --max-batch 2: %d %s", code, body)
	}
	if code, body := post(t, d, tok, "/v1/events", []byte("["+ev+","+ev+"]")); code != 200 {
		t.Fatalf("a batch of 2: %d %s", code, body)
	}

	tokenFile := filepath.Join(world, "token")
	if err := os.WriteFile(tokenFile, []byte("0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := aosd(t, world, "status")
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r.code != 1 || !strings.Contains(r.stderr, "refuses the token read from "+tokenFile) || strings.Contains(r.stderr, "does not answer") {
		t.Fatalf("status with a wrong token: exit %d: %s", r.code, r.stderr)
	}
}
