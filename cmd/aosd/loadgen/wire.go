package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// wire is one worker's keep-alive connection for POST /v1/events. The
// worker writes its request and reads the answer on its own goroutine.
// net/http's Transport puts two goroutines of its own on every connection
// (one writing, one reading) and hands each request to them and the
// answer back: two wake-ups per request on the client's side, which on
// two cores shared with the daemon are a measurable part of what a run
// reports (docs/PERFORMANCE.md, "The bench client"). Answers are still
// parsed by net/http (http.ReadResponse), so status lines, headers,
// Content-Length and chunked bodies are read as any client reads them.
type wire struct {
	addr string // host:port
	head []byte // the request's bytes up to Content-Length's value
	conn net.Conn
	br   *bufio.Reader
	out  []byte // the request being written

	ctx   context.Context // the context watched by stop's AfterFunc
	stop  func() bool     // unregisters it
	fired chan struct{}   // closed once the AfterFunc has run
}

// newWire prepares, without dialing, a worker's connection to the daemon
// at base; ok is false when base is not plain http (then the worker uses
// the http.Client).
func newWire(base, token string) (*wire, bool) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, false
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	head := "POST " + u.EscapedPath() + "/v1/events HTTP/1.1\r\n" +
		"Host: " + u.Host + "\r\n" +
		"User-Agent: aosd-bench\r\n" +
		"Authorization: Bearer " + token + "\r\n" +
		"Content-Type: application/json\r\n" +
		"Content-Length: "
	return &wire{addr: addr, head: []byte(head)}, true
}

// post sends body and returns the answer's status and body. A connection
// the daemon closed or that failed is dropped, and the next post dials
// anew; the failed request is not retried (it may have been admitted).
func (w *wire) post(ctx context.Context, body []byte) ([]byte, int, error) {
	if w.conn == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", w.addr)
		if err != nil {
			return nil, 0, err
		}
		w.conn, w.br = c, bufio.NewReaderSize(c, 4096)
	}
	if ctx != w.ctx {
		w.watch(ctx)
	}
	b := append(w.out[:0], w.head...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	w.out = b
	if _, err := w.conn.Write(b); err != nil {
		w.close()
		return nil, 0, fmt.Errorf("POST /v1/events: %w", err)
	}
	resp, err := http.ReadResponse(w.br, nil)
	if err != nil {
		w.close()
		return nil, 0, fmt.Errorf("POST /v1/events: read answer: %w", err)
	}
	ans, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		w.close()
		return nil, 0, fmt.Errorf("POST /v1/events: read answer: %w", err)
	}
	if resp.Close {
		w.close()
	}
	return ans, resp.StatusCode, nil
}

// watch makes ctx's end unblock the connection's reads and writes (a
// cancelled run stops a worker waiting for its answer). Each phase of a run
// (warm-up, measured) has a context of its own, ended with the phase.
func (w *wire) watch(ctx context.Context) {
	if w.stop != nil && !w.stop() {
		// The previous phase's context ended: wait for its AfterFunc to
		// have set the deadline, then clear it.
		<-w.fired
		w.conn.SetDeadline(time.Time{})
	}
	c, fired := w.conn, make(chan struct{})
	w.ctx, w.fired = ctx, fired
	w.stop = context.AfterFunc(ctx, func() {
		c.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
}

// close drops the connection, if any.
func (w *wire) close() {
	if w.conn == nil {
		return
	}
	w.stop()
	w.conn.Close()
	w.conn, w.br, w.ctx, w.stop, w.fired = nil, nil, nil, nil, nil
}
