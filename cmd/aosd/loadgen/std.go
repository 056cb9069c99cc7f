package loadgen

import (
	"net/http"
	"time"
)

// The clients `aosd bench --client` chooses between.
const (
	// ClientLean posts each worker's events on a connection of its own,
	// written and read on the worker's goroutine (wire.go): the least CPU
	// a client can spend, so that the daemon gets most of the cores the
	// two share.
	ClientLean = "lean"
	// ClientStd posts them through net/http's Client, as an ordinary Go
	// program would: a keep-alive Transport pooling at least one idle
	// connection per worker (so each request in flight has a connection
	// of its own and none is dialled after the warm-up), the JSON body
	// from a bytes.Reader, the whole answer read and decoded with
	// encoding/json. What it costs beyond ClientLean is the Transport's
	// two goroutines per connection and its hand-offs to them.
	ClientStd = "std"
)

// stdClient is the ordinary client for conc workers: http.DefaultTransport's
// settings (proxy from the environment, dial and TLS timeouts, HTTP/2 where
// offered, gzip asked for) with an idle pool as large as the load, since
// the default keeps 2 idle connections per host and a closed loop of more
// workers would dial and close connections all run long.
func stdClient(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = max(t.MaxIdleConns, conc+8)
	t.MaxIdleConnsPerHost = conc + 8
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
}
