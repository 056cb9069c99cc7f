package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/pgdb"
)

// Defaults of ClusterOptions: an owner that dies is replaced within about
// Lease + Renew (its lease lapses, then a standby's next look takes it)
// plus the new owner's open.
const (
	DefaultLease = 3 * time.Second
	DefaultRenew = time.Second
)

// ClusterOptions configure a node of a world on PostgreSQL that several
// nodes serve: one owns it (holds the lease, runs the world), the others
// are standbys that forward every request to the owner and take the lease
// when the owner's lapses. The node's identity is its world directory's
// (postgres.json, made by aosd init --postgres).
type ClusterOptions struct {
	// Advertise is the address (host:port) other nodes forward requests to
	// while this node owns the world (default: the address it listens on).
	Advertise string
	// Lease is how long the lease lasts unless renewed (default
	// DefaultLease), by the database's clock. The owner renews it every
	// third of it.
	Lease time.Duration
	// Renew is how often a standby reads who holds the lease (and takes
	// it when it is free), and the owner checks it still holds it and its
	// world still serves (default DefaultRenew). It must be shorter than
	// Lease.
	Renew time.Duration
}

// WithDefaults is o with its zero fields set.
func (o ClusterOptions) WithDefaults() ClusterOptions {
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Renew == 0 {
		o.Renew = DefaultRenew
	}
	return o
}

// Check refuses options that could not keep a lease.
func (o ClusterOptions) Check() error {
	if o.Lease <= 0 || o.Renew <= 0 {
		return fmt.Errorf("cluster: the lease (%s) and the standby poll (%s) must be above 0", o.Lease, o.Renew)
	}
	if o.Renew >= o.Lease {
		return fmt.Errorf("cluster: the standby poll (%s) must be shorter than the lease (%s), or a standby looks less often than a lease lapses", o.Renew, o.Lease)
	}
	return nil
}

// leaser reads who holds a world's lease (pgdb.DB).
type leaser interface {
	Current(ctx context.Context) (pgdb.Current, error)
}

var _ leaser = (*pgdb.DB)(nil)

// Node is one process serving a world on PostgreSQL that several nodes
// serve. It listens for the HTTP API for its whole life; while it owns the
// world the requests go to the world's API, while it is a standby they are
// forwarded to the owner (cluster_forward.go). Its methods are safe for
// concurrent use.
type Node struct {
	dir     Dir
	id      string // the lease's owner while this node owns the world
	co      ClusterOptions
	log     *slog.Logger
	lease   leaser
	lim     api.HTTPLimits
	metrics *api.ClusterMetrics
	// tokens are the tokens the world accepts (its token, and one a
	// rotation replaced while the grace lasts), read from the database; the
	// standby checks its own answers (/metrics) with it.
	tokens func() (*api.TokenSet, error)
	// open opens the world as its owner (taking the lease, or failing with
	// ErrOwnedElsewhere); the Host it returns serves no listener of its
	// own.
	open func(ctx context.Context) (*Host, error)
	// standbyMetrics is what /metrics serves while the node is a standby.
	standbyMetrics *prometheus.Registry
	proxy          *forwarder

	addr   string
	srv    *http.Server
	served chan struct{}
	srvErr error

	mu   sync.RWMutex
	role string
	api  http.Handler    // the owner's API; nil while standby
	life context.Context // ends when the owner steps down
	view pgdb.Current    // the lease as last read (or held)
	// viewed ends when the owner in view changes: requests forwarded to
	// the owner before end then (one that stopped answering, a zombie
	// whose socket still accepts).
	viewed    context.Context
	endViewed context.CancelFunc
	active    sync.WaitGroup // requests in the owner's API
}

// status is the node's view of the world's ownership.
func (n *Node) status() *api.ClusterStatus {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return &api.ClusterStatus{Node: n.id, Role: n.role, Owner: n.view.Owner, OwnerAddress: n.view.Address,
		Epoch: n.view.Epoch, Address: n.co.Advertise}
}

// Addr is where the node listens.
func (n *Node) Addr() string { return n.addr }

// Status is the node's view of the world's ownership.
func (n *Node) Status() *api.ClusterStatus { return n.status() }

// ServeHTTP sends a request to the world's API while the node owns it,
// and forwards it to the owner otherwise.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.RLock()
	h, life := n.api, n.life
	if h != nil {
		n.active.Add(1)
	}
	n.mu.RUnlock()
	if h == nil {
		n.proxy.ServeHTTP(w, r)
		return
	}
	defer n.active.Done()
	// A stream (a journal follow, a claim's long poll) ends when the node
	// steps down, so stepping down never waits for one.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(life, cancel)()
	ow := &answerWriter{ResponseWriter: w}
	h.ServeHTTP(ow, r.WithContext(ctx))
	if !ow.wrote && life.Err() != nil && r.Context().Err() == nil {
		// The API answers nothing to a request whose context ended (it
		// takes the client for gone), which net/http would send as an
		// empty 200: say what happened instead.
		unavailable(w, r, n.co.Lease, fmt.Sprintf("this node (%s) stopped owning the world while the request was in flight; "+
			"if it was a write, it may or may not have been applied: resend it with the same idempotency key", n.id))
	}
}

// answerWriter notes whether the handler answered anything.
type answerWriter struct {
	http.ResponseWriter
	wrote bool
}

func (a *answerWriter) WriteHeader(code int) { a.wrote = true; a.ResponseWriter.WriteHeader(code) }

func (a *answerWriter) Write(b []byte) (int, error) { a.wrote = true; return a.ResponseWriter.Write(b) }

// Flush passes a stream's writes on.
func (a *answerWriter) Flush() {
	a.wrote = true
	http.NewResponseController(a.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// listen starts the node's HTTP server and names this process in
// daemon.json.
func (n *Node) listen(listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	n.addr = ln.Addr().String()
	if n.co.Advertise == "" {
		n.co.Advertise = n.addr
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		n.log.Warn("listening on a non-loopback address; anyone who can reach it and has the token can drive the world", "addr", n.addr)
	}
	if err := n.dir.WriteDaemonInfo(DaemonInfo{Addr: n.addr, PID: os.Getpid()}); err != nil {
		ln.Close()
		return fmt.Errorf("write %s: %w", n.dir.Path(DaemonInfoFile), err)
	}
	n.srv = &http.Server{Handler: n, ReadHeaderTimeout: n.lim.HeaderTimeout, IdleTimeout: n.lim.IdleTimeout}
	n.served = make(chan struct{})
	go func() {
		n.srvErr = n.srv.Serve(ln)
		close(n.served)
	}()
	n.log.Info("serving as a node of the world", "world", string(n.dir), "node", n.id, "addr", n.addr, "advertise", n.co.Advertise, "pid", os.Getpid())
	return nil
}

// run is the node's life: a standby until it takes the lease, then the
// owner until it loses it (fenced, or its world failed), then a standby
// again, until ctx ends.
// h, when not nil, is the world the node serves already (first, become:
// end ends its requests).
func (n *Node) run(ctx context.Context, h *Host, end context.CancelFunc) {
	for ctx.Err() == nil {
		if h == nil {
			var ok bool
			if h, ok = n.standby(ctx); !ok {
				return
			}
			end = n.become(h)
		}
		t := time.NewTicker(n.co.Renew)
		reason := n.own(ctx, h, end, t.C)
		t.Stop()
		n.stepDown(h, reason)
		h = nil
	}
	if h != nil {
		end()
		n.stepDown(h, "shutdown")
	}
}

// first is the node's first look at the lease, before it says it serves:
// a node that finds the lease free or its own opens the world at once, so
// the first request it answers finds the owner (nil: a standby).
func (n *Node) first(ctx context.Context) *Host {
	cctx, cancel := context.WithTimeout(ctx, n.co.Lease)
	cur, err := n.lease.Current(cctx)
	cancel()
	if err != nil {
		n.log.Warn("could not read the lease; starting as a standby", "err", err)
		return nil
	}
	n.setView(cur)
	if cur.Held && cur.Owner != n.id {
		return nil
	}
	h, err := n.open(ctx)
	if err != nil {
		if !errors.Is(err, ErrOwnedElsewhere) {
			n.log.Error("the lease was free but the world did not open; starting as a standby", "err", err)
		}
		return nil
	}
	return h
}

// standby forwards requests to the owner and, every Renew (or just after
// the lease lapses, when that is sooner: nextLook), reads who holds the
// lease; once it is free (released, or lapsed by the database's clock)
// or this node's own, it opens the world as its owner, which takes the
// lease with the next epoch. It returns the open world, or false once ctx
// ended.
func (n *Node) standby(ctx context.Context) (*Host, bool) {
	n.setRole(api.RoleStandby, nil, nil)
	for {
		cctx, cancel := context.WithTimeout(ctx, n.co.Renew)
		cur, err := n.lease.Current(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil, false
		}
		if err != nil {
			n.log.Warn("standby: could not read the lease", "err", err)
		} else {
			n.setView(cur)
		}
		if err == nil && (!cur.Held || cur.Owner == n.id) {
			h, err := n.open(ctx)
			if err == nil {
				return h, true
			}
			// Another standby was quicker, or the database is away: the
			// next look decides.
			if !errors.Is(err, ErrOwnedElsewhere) {
				n.log.Error("standby: the lease was free but the world did not open; trying again", "err", err)
			}
		}
		if !sleep(ctx, nextLook(cur, err, n.co.Renew)) {
			return nil, false
		}
	}
}

// lapseMargin is how long after a lease's lapse (by the database's clock)
// a standby looks again: enough that the lapse has happened when the look
// reaches the database, whatever the round trip.
const lapseMargin = 5 * time.Millisecond

// nextLook is how long a standby waits before it reads the lease again
// after reading cur (err: the read failed): every renew, or sooner when
// the lease lapses before that, so an owner that died is replaced just
// after its lease ends rather than up to a renew later.
func nextLook(cur pgdb.Current, err error, renew time.Duration) time.Duration {
	if err != nil || !cur.Held || cur.Left+lapseMargin >= renew {
		return renew
	}
	return cur.Left + lapseMargin
}

// own serves the world h, which holds the lease (its store renews it),
// checking at each tick (run's: every Renew) that it still does and that
// the world still serves, until the lease passed to another node
// ("fenced"), the world stopped on a storage failure ("failed": an append
// refused, or whose outcome is unknown, as when the database restarted),
// or ctx ends ("shutdown").
func (n *Node) own(ctx context.Context, h *Host, end context.CancelFunc, tick <-chan time.Time) string {
	defer end()
	for {
		select {
		case <-ctx.Done():
			return "shutdown"
		case <-tick:
		}
		if reason := n.lost(ctx, h); reason != "" {
			return reason
		}
	}
}

// become makes the node the owner serving h's API; end ends the life of
// the requests in it (stepping down).
func (n *Node) become(h *Host) (end context.CancelFunc) {
	life, end := context.WithCancel(context.Background())
	srv := h.apiServer(n.lim)
	srv.Cluster = n.status
	if err := n.metrics.Register(h.metrics.Registry); err != nil {
		n.log.Warn("cluster metrics not served with the world's", "err", err)
	}
	n.metrics.Takeovers.Inc()
	if l, _ := h.store.pg.status(); l != nil {
		n.setView(pgdb.Current{Lease: *l, Held: true})
	}
	n.setRole(api.RoleOwner, srv.Handler(), life)
	n.log.Info("owner: serving the world", "epoch", n.status().Epoch, "replayed", h.Kernel().OpenInfo().Replayed)
	return end
}

// lost says whether the owner must step down: "fenced" once its lease
// passed to another node (its store found a renewal refused, or its world
// stopped on an append the fence refused), "failed" when its world
// stopped on another storage failure (an append whose outcome is unknown:
// the node opens the world again), "" while it serves.
func (n *Node) lost(ctx context.Context, h *Host) string {
	l, down := h.store.pg.status()
	if down != nil || l == nil {
		n.log.Error("owner: the lease passed to another node; stepping down", "err", down)
		return "fenced"
	}
	if err := h.Kernel().Usable(); err != nil {
		cctx, cancel := context.WithTimeout(ctx, n.co.Renew)
		cur, cerr := n.lease.Current(cctx)
		cancel()
		if cerr == nil && cur.Epoch != l.Epoch {
			n.setView(cur)
			n.log.Error("owner: an append was refused, the lease passed to another node; stepping down", "epoch", l.Epoch, "now", cur.Epoch, "err", err)
			return "fenced"
		}
		n.log.Error("owner: the world stopped on a storage failure; stepping down to open it again", "err", err)
		return "failed"
	}
	n.setView(pgdb.Current{Lease: *l, Held: true})
	return ""
}

// stepDown stops sending requests to h, ends its streams, waits for the
// requests in it to finish, and closes it (which releases the lease if it
// is still this node's, so a standby takes it at once).
func (n *Node) stepDown(h *Host, reason string) {
	n.metrics.StepDowns.WithLabelValues(reason).Inc()
	n.setRole(api.RoleStandby, nil, nil)
	n.active.Wait()
	if err := h.Close(); err != nil {
		n.log.Warn("closing the world after stepping down", "reason", reason, "err", err)
	}
	n.log.Info("stepped down", "reason", reason)
}

// setRole switches where requests go. Leaving the owner's role ends the
// life of its requests (the caller's end of life).
func (n *Node) setRole(role string, handler http.Handler, life context.Context) {
	n.mu.Lock()
	n.role, n.api, n.life = role, handler, life
	n.mu.Unlock()
	n.metrics.SetRole(role)
}

// setView records the lease as last read.
func (n *Node) setView(c pgdb.Current) {
	n.mu.Lock()
	if n.viewed == nil || c.Epoch != n.view.Epoch || c.Owner != n.view.Owner || c.Address != n.view.Address || c.Held != n.view.Held {
		if n.endViewed != nil {
			n.endViewed()
		}
		n.viewed, n.endViewed = context.WithCancel(context.Background())
	}
	n.view = c
	n.mu.Unlock()
	n.metrics.Epoch.Set(float64(c.Epoch))
}

// ownerAddress is who owns the world and where it serves, as last read;
// addr is "" when no node holds the lease or this one does.
// viewed ends once the owner in view changes.
func (n *Node) ownerAddress() (owner, addr string, viewed context.Context) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if !n.view.Held || n.view.Owner == n.id {
		return n.view.Owner, "", n.viewed
	}
	return n.view.Owner, n.view.Address, n.viewed
}

// close stops the HTTP server and removes daemon.json.
func (n *Node) close() error {
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := n.srv.Shutdown(sctx)
	<-n.served
	n.dir.RemoveDaemonInfo()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// newNodeMetrics is the registry a standby serves at /metrics: the node's
// cluster metrics and the process's.
func newNodeMetrics(m *api.ClusterMetrics) *prometheus.Registry {
	r := prometheus.NewRegistry()
	m.Register(r)
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}
