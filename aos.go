package aos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/daemon"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
)

// shutdownTimeout bounds how long Close waits for HTTP requests in flight.
const shutdownTimeout = 10 * time.Second

// Options configure Open. The zero value opens a world with no native
// modules, no HTTP API and no logging.
type Options struct {
	// Modules are native workflow modules, e.g. sdk's Module.Builtin(identity).
	// A manifest's builtin def names one by Name and pins its Identity; a
	// wasm def whose artifact hash is a module's Identity runs it natively.
	Modules []modules.Builtin
	// Listen, when set, serves the HTTP API (docs/API.md) on this address,
	// e.g. "127.0.0.1:0" for a free loopback port (see World.Addr). The API
	// needs the bearer token in the world's token file (World.Token). A
	// non-loopback address is served with a logged warning.
	Listen string
	// Logger receives the world's logs (default: none).
	Logger *slog.Logger

	// The kernel's knobs (kernel.Config documents each; zero values take
	// its defaults).
	Limits      kernel.Limits  // per-step and ingress bounds
	Cells       cells.Config   // hot cache size, spill thresholds
	StepTimeout time.Duration  // wall-clock limit of one wasm step
	Clock       kernel.Clock   // ingress time (default: the system clock)
	Entropy     kernel.Entropy // ingress entropy (default: crypto/rand)
	// WasmCacheDir keeps compiled wasm code across restarts (default:
	// wasm-cache in the world directory). Worlds may share one.
	WasmCacheDir string
}

// World is an open world. Its methods are safe for concurrent use.
type World struct {
	dir    daemon.Dir
	log    *slog.Logger
	db     interface{ Close() error }
	k      *kernel.World
	disp   *effects.Dispatcher
	local  *daemon.Local
	token  string
	addr   string
	srv    *http.Server
	served chan struct{} // closed when the HTTP server returns
	srvErr error         // what it returned
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// Open opens the world in directory dir, creating it first when it holds no
// world yet (as `aosd init` does: store, API token, executor key), and starts
// the built-in executors and, with opts.Listen, the HTTP API. ctx bounds the
// opening only; the world runs until Close.
func Open(ctx context.Context, dir string, opts Options) (*World, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := daemon.Dir(dir)
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
	metrics := daemon.NewMetrics()
	cfg := d.Config(kernel.Config{
		Builtins: builtins, Logger: log, Observer: metrics,
		Limits: opts.Limits, Cells: opts.Cells, StepTimeout: opts.StepTimeout,
		Clock: opts.Clock, Entropy: opts.Entropy, WasmCacheDir: opts.WasmCacheDir,
	})
	if _, err := os.Stat(d.Store()); errors.Is(err, os.ErrNotExist) {
		if _, err := daemon.Init(d, cfg); err != nil {
			return nil, err
		}
		log.Info("created world", "world", dir)
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	// The store opens first so the built-in blob executors share its CAS;
	// the dispatcher must exist before the kernel opens, because opening
	// republishes every intent still in flight.
	db, err := badgerdb.Open(d.Store())
	if err != nil {
		if errors.Is(err, badgerdb.ErrLocked) {
			return nil, fmt.Errorf("open world %s: %w (another process, perhaps aosd serve, holds it)", dir, err)
		}
		return nil, fmt.Errorf("open world %s: %w", dir, err)
	}
	kr, disp, err := daemon.NewExecutors(d, effects.Builtins(db.CAS(), nil), log)
	if err != nil {
		db.Close()
		return nil, err
	}
	cfg.Keyring, cfg.Publisher = kr, disp
	k, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}, cfg)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open world %s: %w", dir, err)
	}
	disp.Start(k)
	metrics.Watch(k)
	w := &World{dir: d, log: log, db: db, k: k, disp: disp, local: daemon.NewLocal(k, d, kr), token: tok}
	if opts.Listen != "" {
		if err := w.serve(opts.Listen, metrics); err != nil {
			w.Close()
			return nil, err
		}
	}
	return w, nil
}

// serve starts the HTTP API and names this process in daemon.json.
func (w *World) serve(listen string, metrics *daemon.Metrics) error {
	if info, err := w.dir.ReadDaemonInfo(); err == nil && info.PID != os.Getpid() {
		w.log.Info("replacing daemon.json of an earlier daemon", "pid", info.PID, "addr", info.Addr)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", listen, err)
	}
	w.addr = ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		w.log.Warn("listening on a non-loopback address; anyone who can reach it and has the token can drive the world", "addr", w.addr)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler: (&daemon.Server{Backend: w.local, Token: w.token, Logger: w.log, Metrics: metrics.Registry,
			Executors: &daemon.Executors{W: w.k, Dispatcher: w.disp}}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Streams (journal follow, claim long polls) end when Close cancels it.
		BaseContext: func(net.Listener) context.Context { return base },
	}
	if err := w.dir.WriteDaemonInfo(daemon.DaemonInfo{Addr: w.addr, PID: os.Getpid()}); err != nil {
		cancel()
		ln.Close()
		return fmt.Errorf("write %s: %w", w.dir.Path(daemon.DaemonInfoFile), err)
	}
	w.srv, w.cancel, w.served = srv, cancel, make(chan struct{})
	go func() {
		w.srvErr = w.srv.Serve(ln)
		close(w.served)
	}()
	w.log.Info("serving", "world", string(w.dir), "addr", w.addr, "pid", os.Getpid())
	return nil
}

// Dir is the world directory.
func (w *World) Dir() string { return string(w.dir) }

// Addr is the HTTP API's address (host:port), "" when it is not served.
func (w *World) Addr() string { return w.addr }

// Token is the HTTP API's bearer token.
func (w *World) Token() string { return w.token }

// Kernel is the open kernel world: status, cells, traces, the journal.
func (w *World) Kernel() *kernel.World { return w.k }

// Apply loads the manifest at path (a file or a directory of JSON files),
// validates it, and makes it the world's manifest; dryRun reports what would
// change and changes nothing. The result is `aosd apply --json`'s. When the
// world is not quiescent the result lists the blockers and the error is a
// *daemon.Error with code not_quiescent.
func (w *World) Apply(ctx context.Context, path string, dryRun bool) (*daemon.ApplyOutput, error) {
	return w.local.Apply(ctx, daemon.ApplyRequest{Path: path, DryRun: dryRun})
}

// Send injects one domain event, value as JSON, and returns its journal
// sequence once it is durable. Invalid input is refused with an error naming
// the schema and the JSON pointer, and nothing is journaled.
func (w *World) Send(ctx context.Context, schema string, value json.RawMessage) (uint64, error) {
	res, err := w.local.Send(ctx, []daemon.EventIn{{Schema: schema, Value: value}})
	if err != nil {
		return 0, err
	}
	return res[0].Seq, nil
}

// Cell is one cell of a keyed workflow as `aosd cells show --json` shows it:
// status and state as JSON. key is JSON if it parses as JSON, else a string
// ("a" and `"a"` are the same key); an unkeyed workflow takes "".
func (w *World) Cell(ctx context.Context, workflow, key string) (*kernel.CellView, error) {
	return w.local.Cell(ctx, workflow, key)
}

// Wait blocks until ctx is done (nil) or the HTTP API stops on its own (its
// error). Without an API it waits for ctx.
func (w *World) Wait(ctx context.Context) error {
	if w.served == nil {
		<-ctx.Done()
		return nil
	}
	select {
	case <-ctx.Done():
		return nil
	case <-w.served:
		if errors.Is(w.srvErr, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("http api: %w", w.srvErr)
	}
}

// Close stops the HTTP API (streams end, requests in flight finish), closes
// the kernel (everything acknowledged is durable), stops the executors and
// closes the store. It returns the first error; later calls return it again.
func (w *World) Close() error {
	w.closeOnce.Do(func() {
		var errs []error
		if w.srv != nil {
			w.cancel()
			sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			if err := w.srv.Shutdown(sctx); err != nil {
				errs = append(errs, fmt.Errorf("shutdown http: %w", err))
			}
			cancel()
			<-w.served
		}
		if err := w.k.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close world: %w", err))
		}
		w.disp.Stop()
		if err := w.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
		if w.srv != nil {
			w.dir.RemoveDaemonInfo()
		}
		w.closeErr = errors.Join(errs...)
	})
	return w.closeErr
}
