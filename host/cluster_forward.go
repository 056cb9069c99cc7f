package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aos-kernel/aos/api"
)

// forwarder is a standby's HTTP API: every request goes to the owner's
// advertised address as it came (method, path, query, body and the
// client's bearer token, which the owner checks), and the owner's answer
// comes back as it is, streams included. Only the owner ever answers for
// the world, so a standby adds nothing it could get wrong: what the client
// sees is the owner's commit. What the standby answers itself:
//
//   - GET /v1/status: the owner's answer with this node's "cluster" view;
//   - GET /metrics: its own metrics (role, epoch, forwarding), after the
//     token check;
//   - 503 unavailable with Retry-After when no owner is known, the owner
//     does not answer (a request whose connection broke may or may not
//     have been applied: resend it with the same idempotency key), or the
//     request was already forwarded once (api.ForwardedHeader): a node
//     never forwards a forwarded request, so two nodes that each take the
//     other for the owner cannot bounce it between them.
type forwarder struct {
	n       *Node
	proxy   *httputil.ReverseProxy
	metrics http.Handler
}

func newForwarder(n *Node) *forwarder {
	f := &forwarder{n: n, metrics: promhttp.HandlerFor(n.standbyMetrics, promhttp.HandlerOpts{})}
	f.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(api.ForwardedHeader, n.id)
		},
		// Streams (journal follow, claim long polls) pass each write on.
		FlushInterval: -1,
		// Many clients forward through one standby: keep their connections
		// to the owner (net/http's default keeps 2 idle per host).
		Transport: forwardTransport(),
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.URL.Path == "/v1/status" && resp.StatusCode == http.StatusOK {
				return f.withClusterView(resp)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			n.metrics.Forwarded.WithLabelValues("unreachable").Inc()
			owner, addr, _ := n.ownerAddress()
			unavailable(w, r, n.co.Lease, fmt.Sprintf("this node (%s) is a standby and the owner %s at %s did not answer (%v); "+
				"if the request was a write, it may or may not have been applied: resend it with the same idempotency key", n.id, owner, addr, err))
		},
	}
	return f
}

// forwardTransport is net/http's default transport keeping up to 256 idle
// connections to the owner.
func forwardTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	return t
}

// targetKey carries a request's destination to the proxy's Rewrite.
type targetKey struct{}

func contextWith(r *http.Request, target *url.URL) context.Context {
	return context.WithValue(r.Context(), targetKey{}, target)
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.n
	if r.URL.Path == "/metrics" {
		if ts, err := n.tokens(); err != nil || !ts.Check(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="aos"`)
			api.WriteError(w, http.StatusUnauthorized, api.CodeUnauthorized, "Authorization header", "missing or wrong bearer token")
			return
		}
		f.metrics.ServeHTTP(w, r)
		return
	}
	if by := r.Header.Get(api.ForwardedHeader); by != "" {
		n.metrics.Forwarded.WithLabelValues("loop").Inc()
		unavailable(w, r, n.co.Lease, fmt.Sprintf("this node (%s) is not the owner (any more); %s forwarded the request here while it took it for the owner: resend it", n.id, by))
		return
	}
	owner, addr, viewed := n.ownerAddress()
	if addr == "" {
		n.metrics.Forwarded.WithLabelValues("no_owner").Inc()
		msg := fmt.Sprintf("this node (%s) is a standby and no node owns the world now (a failover is under way); resend the request", n.id)
		if owner == n.id {
			msg = fmt.Sprintf("this node (%s) is opening the world; resend the request", n.id)
		}
		unavailable(w, r, n.co.Lease, msg)
		return
	}
	n.metrics.Forwarded.WithLabelValues("ok").Inc()
	target := &url.URL{Scheme: "http", Host: addr}
	// A forwarded request ends when the owner in view changes: an owner
	// that stopped (SIGSTOP, a stalled machine) still accepts connections
	// and would hold it until it wakes, fenced.
	ctx, cancel := context.WithCancel(contextWith(r, target))
	defer cancel()
	if viewed != nil {
		defer context.AfterFunc(viewed, cancel)()
	}
	f.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// withClusterView replaces the "cluster" member of the owner's status with
// this node's view.
func (f *forwarder) withClusterView(resp *http.Response) error {
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err == nil {
		if cv, err := json.Marshal(f.n.status()); err == nil {
			m["cluster"] = cv
			if nb, err := json.Marshal(m); err == nil {
				b = append(nb, '\n')
			}
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// unavailable answers 503 unavailable with Retry-After (whole seconds, at
// least 1): by then a failover under way has usually ended.
func unavailable(w http.ResponseWriter, r *http.Request, after time.Duration, msg string) {
	secs := int(after.Seconds())
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	api.WriteError(w, http.StatusServiceUnavailable, api.CodeUnavailable, r.Method+" "+r.URL.Path, "%s", msg)
}
