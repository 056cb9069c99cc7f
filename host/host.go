package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
)

// shutdownTimeout bounds how long Close waits for HTTP requests in flight.
const shutdownTimeout = 10 * time.Second

// Options configure Open and Run. The zero value opens an existing world
// with no native modules, no HTTP API and no logging.
type Options struct {
	// Listen, when set, serves the HTTP API (docs/API.md) on this address,
	// e.g. "127.0.0.1:0" for a free loopback port (see Host.Addr), and names
	// this process in daemon.json. A non-loopback address is served with a
	// logged warning.
	Listen string
	// Logger receives the host's logs and is the kernel's logger (default:
	// none).
	Logger *slog.Logger
	// Modules are native workflow modules, added to the kernel's builtins.
	Modules []modules.Builtin
	// Kernel is the kernel's configuration. Open sets its Builtins, Logger,
	// Observer (the host's metrics), Keyring and Publisher (the built-in
	// executors' dispatcher), and, when it names none, its wasm engine (made
	// with Store.WasmCacheDir, closed with the host).
	Kernel kernel.Config
	// Create makes Open create the world first (as Init does) when dir
	// holds none. Without it, a directory that is not a world is an error.
	Create bool
	// Ready, when set, is called by Run with the HTTP API's address ("" when
	// not served) once the host is open.
	Ready func(addr string)
	// Reload, when set, makes Run re-read the world's token file each time
	// it receives a value (aosd serve sends SIGHUP's): the API then accepts
	// the token the file holds, and no longer the one before it
	// (Host.ReloadToken).
	Reload <-chan os.Signal
	// HTTP bounds what one client of the HTTP API may hold (zero fields:
	// the defaults).
	HTTP api.HTTPLimits
	// Store are the choices about the world's store (its disk reserve).
	Store StoreOptions
}

// Host is a world this process runs: the kernel on the world's store, the
// built-in executors, and, when Options.Listen is set, the HTTP API. Its
// methods are safe for concurrent use.
type Host struct {
	dir   Dir
	log   *slog.Logger
	store *store
	k     *kernel.World
	disp  *effects.Dispatcher
	kr    *receipts.Keyring // the trusted executor keys, shared with the kernel
	local *api.Local
	// metrics are the world's Prometheus metrics, served at /metrics.
	metrics *api.Metrics
	token   string
	tokens  *api.TokenSet // what the HTTP API accepts (api/tokens.go; rotated in token.go)
	tokMu   sync.Mutex    // serializes rotations and reloads of the token file
	addr    string
	srv     *http.Server
	served  chan struct{} // closed when the HTTP server returns
	srvErr  error         // what it returned
	cancel  context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// Run is `aosd serve`: it opens the world in dir (Open), runs it until ctx
// is done or the HTTP API stops on its own, and closes it (Close), so that
// everything acknowledged is durable when it returns.
func Run(ctx context.Context, dir string, opts Options) error {
	h, err := Open(ctx, dir, opts)
	if err != nil {
		return err
	}
	if opts.Ready != nil {
		opts.Ready(h.Addr())
	}
	if opts.Reload != nil {
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		go h.reloadOn(rctx, opts.Reload)
	}
	serr := h.Wait(ctx)
	h.log.Info("shutting down")
	cerr := h.Close()
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return cerr
	}
	h.log.Info("stopped")
	return nil
}

// reloadOn re-reads the token file on every value from sig until ctx ends.
func (h *Host) reloadOn(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if changed, err := h.ReloadToken(0); err != nil {
				h.log.Error("token not reloaded; the API keeps accepting the token it had", "err", err)
			} else if !changed {
				h.log.Info("token file unchanged", "file", h.dir.Path(TokenFile))
			}
		}
	}
}

// Open opens the world in directory dir (creating it first with
// opts.Create), starts the built-in executors and, with opts.Listen, the
// HTTP API. ctx bounds the opening only; the host runs until Close.
func Open(ctx context.Context, dir string, opts Options) (*Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := Dir(dir)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	builtins := modules.NewBuiltins()
	for _, m := range opts.Modules {
		if err := builtins.Add(m); err != nil {
			return nil, err
		}
	}
	metrics := api.NewMetrics()
	cfg := opts.Kernel
	cfg.Builtins, cfg.Logger, cfg.Observer = builtins, log, metrics
	if opts.Create {
		if d.Check() != nil {
			if _, err := InitWith(d, cfg, opts.Store); err != nil {
				return nil, err
			}
			log.Info("created world", "world", dir)
		}
	} else if err := d.Check(); err != nil {
		return nil, err
	}
	// The listener is bound before the store opens: a world on PostgreSQL
	// names this node's address in its lease, and a port taken fails the
	// open before the lease is taken.
	so := opts.Store
	var ln net.Listener
	if opts.Listen != "" {
		var err error
		if ln, err = net.Listen("tcp", opts.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", opts.Listen, err)
		}
		if so.Advertise == "" {
			so.Advertise = ln.Addr().String()
		}
	}
	h, err := open(d, opts, so, cfg, metrics, log)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	if ln != nil {
		if err := h.serve(ln, metrics, opts.HTTP.WithDefaults()); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// open opens the world in d (its store, the executors, the kernel) for
// Open.
func open(d Dir, opts Options, so StoreOptions, cfg kernel.Config, metrics *api.Metrics, log *slog.Logger) (*Host, error) {
	// The store opens first so the built-in blob executors share its CAS;
	// the dispatcher must exist before the kernel opens, because opening
	// republishes every intent still in flight.
	st, err := openStore(d, so, log)
	if err != nil {
		return nil, err
	}
	tokens, tok, err := loadTokens(st.files, log)
	if err != nil {
		st.close()
		return nil, err
	}
	kr, disp, err := newExecutors(st.files, effects.Builtins(st.cas(), nil), log)
	if err != nil {
		st.close()
		return nil, err
	}
	cfg.Keyring, cfg.Publisher = kr, disp
	k, cfg, err := st.openKernel(cfg, so.wasmCache(d))
	if err != nil {
		st.close()
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	// How long the open took is mostly this replay: say where it started.
	info := k.OpenInfo()
	log.Info("opened world", "world", string(d), "snapshot", info.Snapshot, "checkpoint", info.Checkpoint, "replayed", info.Replayed)
	disp.Start(k)
	metrics.Watch(k)
	if st.pg != nil {
		watchLease(st.pg, metrics)
	}
	h := &Host{dir: d, log: log, store: st, k: k, disp: disp, kr: kr, token: tok, tokens: tokens,
		local: api.NewLocal(k, keysIn(st.files, kr))}
	h.local.Config = cfg
	h.metrics = metrics
	if st.pg != nil {
		h.local.Lease = st.pg.view
	}
	return h, nil
}

// apiServer is the HTTP API over the host's world, with the limits lim.
func (h *Host) apiServer(lim api.HTTPLimits) *api.Server {
	var backup func(w io.Writer) error
	var noBackup string
	if h.store.bdb != nil {
		backup = func(w io.Writer) error { return WriteBackup(h.dir, h.store.bdb, w) }
	} else if err := refusePostgres(h.dir, "GET /v1/backup"); err != nil {
		noBackup = err.Error()
	}
	return &api.Server{Backend: h.local, Token: h.token, Logger: h.log, Metrics: h.metrics.Registry,
		Executors: &api.Executors{W: h.k, Dispatcher: h.disp, Keyring: h.kr},
		Backup:    backup, NoBackup: noBackup,
		Tokens: h.tokens, RotateToken: h.rotateToken,
		BodyTimeout: lim.BodyTimeout, MaxBatchEvents: lim.MaxBatchEvents}
}

// serve starts the HTTP API on ln and names this process in daemon.json.
func (h *Host) serve(ln net.Listener, metrics *api.Metrics, lim api.HTTPLimits) error {
	if info, err := h.dir.ReadDaemonInfo(); err == nil && info.PID != os.Getpid() {
		h.log.Info("replacing daemon.json of an earlier daemon", "pid", info.PID, "addr", info.Addr)
	}
	h.addr = ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		h.log.Warn("listening on a non-loopback address; anyone who can reach it and has the token can drive the world", "addr", h.addr)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler: h.apiServer(lim).Handler(),
		// No ReadTimeout: it would also end a journal follow stream; the
		// body's deadline is set per request (Server.BodyTimeout).
		ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		// Streams (journal follow, claim long polls) end when Close cancels it.
		BaseContext: func(net.Listener) context.Context { return base },
	}
	if err := h.dir.WriteDaemonInfo(DaemonInfo{Addr: h.addr, PID: os.Getpid()}); err != nil {
		cancel()
		ln.Close()
		return fmt.Errorf("write %s: %w", h.dir.Path(DaemonInfoFile), err)
	}
	h.srv, h.cancel, h.served = srv, cancel, make(chan struct{})
	go func() {
		h.srvErr = h.srv.Serve(ln)
		close(h.served)
	}()
	h.log.Info("serving", "world", string(h.dir), "addr", h.addr, "pid", os.Getpid())
	return nil
}

// Dir is the world directory.
func (h *Host) Dir() Dir { return h.dir }

// Addr is the HTTP API's address (host:port), "" when it is not served.
func (h *Host) Addr() string { return h.addr }

// Token is the HTTP API's bearer token: the current one, after rotations.
func (h *Host) Token() string { return h.tokens.Current() }

// Kernel is the open kernel world.
func (h *Host) Kernel() *kernel.World { return h.k }

// Local is the Backend the HTTP API serves: the same answers in process.
func (h *Host) Local() *api.Local { return h.local }

// Wait blocks until ctx is done (nil) or the HTTP API stops on its own (its
// error). Without an API it waits for ctx.
func (h *Host) Wait(ctx context.Context) error {
	if h.served == nil {
		<-ctx.Done()
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-h.served:
		if errors.Is(h.srvErr, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("http api: %w", h.srvErr)
	}
}

// Close stops the HTTP API (streams end, requests in flight finish), closes
// the kernel (everything acknowledged is durable), stops the executors and
// closes the store. It returns the first error; later calls return it again.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		var errs []error
		if h.srv != nil {
			h.cancel()
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			if err := h.srv.Shutdown(sctx); err != nil {
				errs = append(errs, fmt.Errorf("shutdown http: %w", err))
			}
			cancel()
			<-h.served
		}
		if err := h.local.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the timelines: %w", err))
		}
		if err := h.k.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close world: %w", err))
		}
		h.disp.Stop()
		if err := h.store.close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		if h.srv != nil {
			h.dir.RemoveDaemonInfo()
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}
