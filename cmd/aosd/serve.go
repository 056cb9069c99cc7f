package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/pgdb"
)

func cmdServe(fs *flag.FlagSet, a *app) func([]string) error {
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback by default; port 0 picks a free port)")
	prof := fs.String("pprof", "", "also serve Go's profiles (net/http/pprof, no token) on this loopback address, e.g. 127.0.0.1:6060")
	create := fs.Bool("init", false, "create the world first (as aosd init) when --world holds none: for containers and service units")
	var pgi host.PostgresInit
	fs.StringVar(&pgi.URL, "postgres", "", "with --init: make --world a node of the world in PostgreSQL at this postgres:// URL (as aosd init --postgres: created if the schema holds none, joined otherwise) when --world holds none; no password in the URL (give it through PGPASSWORD or PGPASSFILE)")
	fs.StringVar(&pgi.Schema, "schema", "", "with --init --postgres: the PostgreSQL schema holding the world (default aos)")
	var lim api.HTTPLimits
	fs.DurationVar(&lim.HeaderTimeout, "header-timeout", api.DefaultHeaderTimeout, "a request's line and headers must arrive within this, else the connection is closed")
	fs.DurationVar(&lim.BodyTimeout, "body-timeout", api.DefaultBodyTimeout, "a request's body must arrive within this once its headers are in, else 408")
	fs.DurationVar(&lim.IdleTimeout, "idle-timeout", api.DefaultIdleTimeout, "a kept-alive connection without a request is closed after this")
	fs.IntVar(&lim.MaxBatchEvents, "max-batch", api.DefaultMaxBatchEvents, "events one POST /v1/events may carry, else 413")
	var co host.ClusterOptions
	fs.StringVar(&co.Advertise, "advertise", "", "on a world on PostgreSQL: the HOST:PORT other nodes forward requests to while this node owns the world (default: the address it listens on)")
	fs.DurationVar(&co.Lease, "lease", host.DefaultLease, "on a world on PostgreSQL: how long the owner's lease lasts unless renewed (renewed every third of it); a standby takes the world once it lapses")
	fs.DurationVar(&co.Renew, "standby-poll", host.DefaultRenew, "on a world on PostgreSQL: how often a standby looks whether the lease is free, and the owner checks it still holds it")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		if err := checkHTTPLimits(lim); err != nil {
			return err
		}
		raiseProcs(os.Getenv)
		raiseGCPercent(os.Getenv)
		if *prof != "" {
			stop, err := servePprof(a, *prof)
			if err != nil {
				return err
			}
			defer stop()
		}
		if err := co.Check(); err != nil {
			return usagef("--lease %s, --standby-poll %s: %v", co.Lease, co.Renew, err)
		}
		if err := checkServeInit(*create, pgi); err != nil {
			return err
		}
		return serve(a, *listen, *create, pgi, lim, co)
	}
}

// checkServeInit refuses --postgres and --schema without what they go
// with, and a password in the URL: a node made by serve --init reconnects
// from postgres.json, which never holds one, so a password given only in
// the URL would be lost at the first reconnection.
func checkServeInit(create bool, pgi host.PostgresInit) error {
	switch {
	case pgi.URL != "" && !create:
		return usagef("--postgres: only with --init (a world made by aosd init --postgres is served without it)")
	case pgi.Schema != "" && pgi.URL == "":
		return usagef("--schema %s: only with --init --postgres", pgi.Schema)
	case pgi.URL == "":
		return nil
	}
	if _, had, err := host.StripPassword(pgi.URL); err != nil {
		return usagef("%v", err)
	} else if had {
		return usagef("--postgres: the URL holds a password; serve --init writes none and reconnects without it: give it through PGPASSWORD, PGPASSFILE or ~/.pgpass")
	}
	return nil
}

// initNode makes the world directory a node of the world in PostgreSQL
// when it holds no world (creating the world there, or joining the one the
// schema holds), as aosd init --postgres does. A directory that holds a
// world already is served as it is if it names the same database and
// schema, and refused otherwise: --init never serves a world other than
// the one asked for.
func initNode(a *app, pgi host.PostgresInit, cfg kernel.Config, so host.StoreOptions) error {
	d := host.Dir(a.world)
	if d.Check() != nil {
		c, err := host.InitPostgres(d, pgi, cfg, so)
		if err != nil {
			return err
		}
		what := "created world"
		if c.Joined {
			what = "joined world"
		}
		fmt.Fprintf(a.stderr, "%s %s in schema %s of %s as node %s\n", what, c.World, c.Postgres.Schema, c.Postgres.URL, c.Postgres.Node)
		return nil
	}
	pc, err := d.Postgres()
	if err != nil {
		return err
	}
	want, _, _ := host.StripPassword(pgi.URL)
	schema := pgi.Schema
	if schema == "" {
		schema = pgdb.DefaultSchema
	}
	switch {
	case pc == nil:
		return fmt.Errorf("serve --init --postgres %s: %s holds a world on Badger (%s/), not one on PostgreSQL; choose another --world", want, a.world, host.StoreDir)
	case pc.URL != want || pc.Schema != schema:
		return fmt.Errorf("serve --init --postgres %s --schema %s: %s is a node of the world in schema %s of %s; choose another --world", want, schema, a.world, pc.Schema, pc.URL)
	}
	return nil
}

// checkHTTPLimits refuses a limit that would not bound anything (usage
// error, naming the flag).
func checkHTTPLimits(lim api.HTTPLimits) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"header-timeout", lim.HeaderTimeout}, {"body-timeout", lim.BodyTimeout}, {"idle-timeout", lim.IdleTimeout}} {
		if d.v <= 0 {
			return usagef("--%s %s: want a duration above 0, such as 30s", d.flag, d.v)
		}
	}
	if lim.MaxBatchEvents <= 0 {
		return usagef("--max-batch %d: want a number of events above 0", lim.MaxBatchEvents)
	}
	return nil
}

// extraProcs is how many Ps aosd serve adds to Go's default GOMAXPROCS.
//
// The daemon's work runs through a few goroutines every request waits on in
// turn: the kernel's loop, its committer, Badger's writer and the callbacks
// of its commits. With one P per core they queue in Go's run queues behind
// the hundreds of connection goroutines a loaded daemon has runnable, and
// Go's scheduler does not preempt for a goroutine it has just woken. With
// two Ps more than cores, the operating system's scheduler, which does,
// interleaves them, and a P is idle more often to poll the network: at
// C=256 in aosd bench the p99 fell by a fifth to a quarter in alternated
// runs, for 5-9 % more CPU per event (docs/PERFORMANCE.md, session 5;
// docs/DECISIONS.md).
const extraProcs = 2

// raiseProcs sets GOMAXPROCS to Go's default plus extraProcs, unless the
// GOMAXPROCS environment variable chose it: then Go's choice stands. It
// returns the setting.
func raiseProcs(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := runtime.GOMAXPROCS(0) + extraProcs
	runtime.GOMAXPROCS(n)
	return n
}

// gcPercent is the GOGC aosd serve runs with: the heap may grow to three
// times what is live between collections, against Go's default of two.
//
// A loaded daemon allocates about 11 KB per event (HTTP parsing, JSON, the
// records it journals) over a live heap of a few tens of MB, mostly
// Badger's and the cell cache's, so with Go's default it collects every few
// thousand events. Each cycle takes one of the Ps for its mark worker and
// slows the allocating goroutines with assists, and the requests in flight
// meanwhile wait longer: at C=256 in aosd bench the p99 was lower than
// with Go's default in six of seven alternated rounds, by 4-15 %
// (docs/PERFORMANCE.md, session 6; docs/DECISIONS.md). The price is the
// heap: about a third more than Go's default would reserve. GOGC and
// GOMEMLIMIT in the environment still rule.
const gcPercent = 200

// raiseGCPercent sets the GC percent to gcPercent, unless the GOGC
// environment variable chose it: then Go's choice stands.
func raiseGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// servePprof serves /debug/pprof/ on addr, which must be loopback: the
// profiles answer without the API's token.
func servePprof(a *app, addr string) (stop func(), err error) {
	hostname, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--pprof %q: want HOST:PORT (%v)", addr, err)
	}
	if ip := net.ParseIP(hostname); hostname != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, usagef("--pprof %q: want a loopback address (the profiles are served without a token)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(a.stderr, "aosd serve: --pprof: %v\n", err)
		}
	}()
	fmt.Fprintf(a.stderr, "pprof on http://%s/debug/pprof/\n", ln.Addr())
	return func() { srv.Close() }, nil
}

// serve is host.Run with the CLI's edges: the logger, the configuration
// read from the environment, and the line that tells scripts where the API
// is, flushed before the first request can arrive.
func serve(a *app, listen string, create bool, pgi host.PostgresInit, lim api.HTTPLimits, co host.ClusterOptions) error {
	cfg, err := envConfig()
	if err != nil {
		return err
	}
	so, err := envStore()
	if err != nil {
		return err
	}
	if create && pgi.URL != "" {
		if err := initNode(a, pgi, cfg, so); err != nil {
			return err
		}
	}
	// SIGHUP re-reads the token file (docs/operations.md, "Rotating the API
	// token").
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	opts := host.Options{
		Listen: listen, Logger: logger(a.stderr, slog.LevelInfo), Kernel: cfg, Reload: hup, Create: create, HTTP: lim, Store: so,
		Ready: func(addr string) {
			fmt.Fprintf(a.stdout, "listening on http://%s\n", addr)
			if f, ok := a.stdout.(*os.File); ok {
				f.Sync()
			}
		},
	}
	// A world on PostgreSQL is served by a node: the owner while it holds
	// the lease, a standby forwarding to the owner otherwise.
	if pc, err := host.Dir(a.world).Postgres(); err != nil {
		return err
	} else if pc != nil {
		return host.RunNode(a.ctx, a.world, opts, co)
	}
	return host.Run(a.ctx, a.world, opts)
}
