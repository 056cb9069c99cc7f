package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/internal/progress"
	"github.com/aos-kernel/aos/kernel"
)

// Exit codes (docs/CLI.md).
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitNotQuiet  = 3
	defaultWorld  = ".aos"
	envWorld      = "AOS_WORLD"
	envLogLevel   = "AOS_LOG_LEVEL"
	envWasmCache  = "AOS_WASM_CACHE"
	envCellCache  = "AOS_CELL_CACHE_SIZE"
	envSnapEvery  = "AOS_SNAPSHOT_EVERY"
	envSnapTime   = "AOS_SNAPSHOT_INTERVAL"
	envReserve    = "AOS_DISK_RESERVE"
	envGOROOT     = "GOROOT"
	programHeader = "aosd — the aos daemon and CLI"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// app is one invocation: its streams and common flags.
type app struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	world          string
	json           bool
	direct         bool
	// everyBar draws every replay bar of a direct open, not only those of
	// openBarMin records or more: set by the commands whose work is replay.
	everyBar bool
}

// usageError is a command-line mistake (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit code for an error already reported.
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type command struct {
	name    string
	args    string // positional synopsis
	summary string
	example string
	flags   func(fs *flag.FlagSet, a *app) func([]string) error
}

func commands() []*command {
	return []*command{
		{"init", "", "create an empty world (store, API token, executor key); with --postgres URL, in PostgreSQL (or join the world there)",
			"aosd init --world /tmp/w", cmdInit},
		{"build", "[PATH]", "compile the manifest's wasm modules from their Go \"source\" packages and pin each artifact's hash in the manifest",
			"aosd build examples/manifests/counter", cmdBuild},
		{"new", "DIR", "scaffold a workflow project: a Go workflow on the SDK, its wasm main, and a manifest that builds it",
			"aosd new ./tally --module com.acme/tally", cmdNew},
		{"apply", "PATH [--pin]", "load a manifest file or directory, show what changes, and make it the world's manifest (refused, exit 3, unless quiescent; with --pin at once, what is in flight staying on its manifest)",
			"aosd apply examples/manifests/counter --world /tmp/w", cmdApply},
		{"send", "SCHEMA VALUE", "inject a domain event; VALUE is JSON, @file, or - for stdin",
			`aosd send com.example/CountEvent@1 '{"key":"a","by":1}' --world /tmp/w`, cmdSend},
		{"serve", "", "run the daemon: kernel and HTTP API (loopback, bearer token from DIR/token)",
			"aosd serve --world /tmp/w --listen 127.0.0.1:7878", cmdServe},
		{"status", "", "manifest hash, journal height, quiescence, instances by status, in-flight intents",
			"aosd status --world /tmp/w --json", cmdStatus},
		{"cells", "ls WORKFLOW | show WORKFLOW [KEY]", "list a workflow's cells, or show one cell (KEY is JSON if it parses, else a string)",
			"aosd cells show com.example/counter.step@1 a --world /tmp/w", cmdCells},
		{"journal", "[check | verify [--file EXPORT] [--keys KEYS]]", "print journal records, decoded (--json: one lossless object per line); check: check the journal's invariants (exit 1 on a violation); verify: re-verify every receipt and frame signature and intent hash against the trusted keys (exit 1 on a failure)",
			"aosd journal --from 1 --limit 20 --kind event,step --world /tmp/w", cmdJournal},
		{"trace", "WORKFLOW [KEY] | --intent HASH", "a cell's timeline (events in, steps, intents, frames, receipts, faults), or one intent's life",
			"aosd trace com.example/order.step@1 o-1 --world /tmp/w", cmdTrace},
		{"failed", "[ls] [WORKFLOW] | retry|reset|skip WORKFLOW [KEY] [--drop-parked]", failedSummary,
			"aosd failed retry com.example/order.step@1 o-1 --world /tmp/w", cmdFailed},
		{"manifests", "[ls] | retire HASH", manifestsSummary,
			"aosd manifests retire sha256:1f0c... --world /tmp/w", cmdManifests},
		{"cancel", "INTENT [--reason TEXT] [--by NAME]", cancelSummary,
			`aosd cancel sha256:6c1f… --reason "customer asked" --world /tmp/w`, cmdCancel},
		{"modules", "[ls] | resume MODULE", modulesSummary,
			"aosd modules resume com.example/orders@1 --world /tmp/w", cmdModules},
		{"shadow", "PATH [--events FILE|-] [--window N]", shadowSummary,
			"aosd shadow examples/manifests/orders --window 500 --world /tmp/w", cmdShadow},
		{"snapshot", "", "take a snapshot now: the state after a journaled checkpoint, written to the store so opening replays only what follows (refused, exit 3, while another is being written)",
			"aosd snapshot --world /tmp/w", cmdSnapshot},
		{"replay", "[--verify] | --manifest PATH [--export FILE [--artifacts DIR]]", "replay the journal into scratch worlds and compare with the live state: from the latest snapshot, and with --verify also from genesis, recomputing every snapshot (exit 1 on a difference); with --manifest, check every cell's history under the manifest at PATH, changing nothing (exit 1 when any cell diverges)",
			"aosd replay --verify --world /tmp/w", cmdReplay},
		{"upgrade", "WORKFLOW [KEY...] [--all] [--status S] [--dry-run]", upgradeSummary,
			"aosd upgrade com.example/order.step@1 --all --status waiting --world /tmp/w", cmdUpgrade},
		{"limits", "[show] | set NAME=VALUE ...", "show or change the world's limits (per step, per input, ingress); a change is journaled",
			"aosd limits set max_steps_per_input=20000 --world /tmp/w", cmdLimits},
		{"gc", "", "collect the CAS objects nothing reaches (kept snapshots, live cells, journaled manifests and blobs); --drop-journal applies retention",
			"aosd gc --keep-snapshots 2 --world /tmp/w", cmdGC},
		{"backup", "FILE", "write a consistent backup of the world to a new FILE, through the daemon while it serves (the world goes on) or from the store; read back and checked",
			"aosd backup /backups/w-2026-11-27.aosbackup --world /tmp/w", cmdBackup},
		{"restore", "FILE [DIR]", "make a new world directory (DIR, else --world) from a backup FILE and open it once (the same world: run only one of the two)",
			"aosd restore /backups/w-2026-11-27.aosbackup /tmp/w2", cmdRestore},
		{"token", "rotate [--grace DUR]", "write a fresh API token to the world's token file; a running daemon accepts it at once, and the old one for --grace",
			"aosd token rotate --grace 10m --world /tmp/w", cmdToken},
		{"keys", "ls | add NAME PUBLIC_KEY_FILE --effects E[,E...] | rm KEY_ID", "the executor keys whose signed receipts and frames the world trusts (PEM public keys), each for the effects it was added for",
			"aosd keys add payments payments.pub.pem --effects com.example/payment.charge@1 --world /tmp/w", cmdKeys},
		{"bench", "[--start DIR | --addr HOST:PORT]", benchSummary,
			"aosd bench --start /tmp/bench --concurrency 64 --events 20000", cmdBench},
		{"demo", "", "init a world (a temp dir unless --world), apply the counter example, send events, print cells and a trace",
			"go run ./cmd/aosd demo", cmdDemo},
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			args = []string{args[1], "--help"}
		} else {
			printUsage(stdout)
			if len(args) == 0 {
				return exitUsage
			}
			return exitOK
		}
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "aosd: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return exitUsage
	}
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("aosd "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv(envWorld)
	if def == "" {
		def = defaultWorld
	}
	fs.StringVar(&a.world, "world", def, "world directory (default $"+envWorld+", else ./"+defaultWorld+")")
	fs.BoolVar(&a.json, "json", false, "stable machine-readable JSON output")
	fs.BoolVar(&a.direct, "direct", false, "open the world directly even if a daemon serves it (fails while the daemon holds the store)")
	body := cmd.flags(fs, a)
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: aosd %s %s [flags]\n\n%s\n\nexample:\n  %s\n\nflags:\n", cmd.name, cmd.args, cmd.summary, cmd.example)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err == nil {
		err = body(pos)
	}
	var ue *usageError
	var ce *exitCodeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue) || isFlagError(err):
		fmt.Fprintf(stderr, "aosd %s: %v\n\n", cmd.name, err)
		usage(stderr)
		return exitUsage
	case errors.As(err, &ce):
		return ce.code
	default:
		fmt.Fprintf(stderr, "aosd %s: %v\n", cmd.name, err)
		var de *api.Error
		if errors.As(err, &de) && (de.Code == api.CodeNotQuiescent || de.Code == api.CodeNotIdle || de.Code == api.CodeNotDrained) {
			return exitNotQuiet
		}
		return exitError
	}
}

// flagError marks errors from flag parsing (always usage errors).
type flagError struct{ error }

func isFlagError(err error) bool {
	var fe flagError
	return errors.As(err, &fe)
}

// parseInterspersed parses flags anywhere among the positional arguments:
// `aosd cells ls WF --json` works like `aosd cells ls --json WF`. After "--"
// everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, flagError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nusage: aosd COMMAND [ARGS] [--world DIR] [--json]\n\ncommands:\n", programHeader)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'aosd COMMAND --help' for a command's flags and an example.\n%s\n", exitCodes)
}

// exitCodes is the usage's line on exit codes, docs/CLI.md's words
// (TestUsageExitCodesAsDocumented holds them equal).
const exitCodes = "Exit codes: 0 success, 1 error (stderr says what and where), 2 usage\n" +
	"error, 3 refused because the world is not quiescent (apply, shadow), a\n" +
	"snapshot is still being written (snapshot), or instances are still pinned\n" +
	"to the manifest (manifests retire)."

func wantArgs(pos []string, min, max int, synopsis string) error {
	if len(pos) < min || len(pos) > max {
		return usagef("want %s, got %d argument(s): %s", synopsis, len(pos), strings.Join(pos, " "))
	}
	return nil
}

func logger(w io.Writer, def slog.Level) *slog.Logger {
	lvl := def
	if v := os.Getenv(envLogLevel); v != "" {
		_ = lvl.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

// envConfig is the kernel configuration the environment sets:
// AOS_CELL_CACHE_SIZE, AOS_SNAPSHOT_EVERY and AOS_SNAPSHOT_INTERVAL. aosd is
// the one place that reads them; the packages below are handed the values.
func envConfig() (kernel.Config, error) {
	n, err := cellCacheSize(os.LookupEnv(envCellCache))
	if err != nil {
		return kernel.Config{}, err
	}
	every, err := snapshotEvery(os.Getenv(envSnapEvery))
	if err != nil {
		return kernel.Config{}, err
	}
	interval, err := snapshotInterval(os.Getenv(envSnapTime))
	if err != nil {
		return kernel.Config{}, err
	}
	return kernel.Config{Cells: cells.Config{CacheSize: n},
		SnapshotEvery: every, SnapshotInterval: interval}, nil
}

// snapshotEvery reads AOS_SNAPSHOT_EVERY into kernel.Config.SnapshotEvery:
// unset or empty is 0 (the kernel's default, 50,000 records), 0 or a
// negative number is never (the kernel's -1), anything but an integer a
// usage error naming the variable.
func snapshotEvery(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, usagef("%s=%q: want a number of records (0 or less: never)", envSnapEvery, s)
	}
	if n <= 0 {
		return -1, nil
	}
	return n, nil
}

// snapshotInterval reads AOS_SNAPSHOT_INTERVAL into
// kernel.Config.SnapshotInterval: unset or empty is 0 (the kernel's
// default, 5 minutes), a duration of 0 or less is never (the kernel's -1),
// anything but a Go duration a usage error naming the variable.
func snapshotInterval(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usagef("%s=%q: want a Go duration such as 5m or 90s (0: never)", envSnapTime, s)
	}
	if d <= 0 {
		return -1, nil
	}
	return d, nil
}

// envStore is what the environment sets of what a world keeps on disk:
// AOS_DISK_RESERVE (diskReserve) and AOS_WASM_CACHE (where the world's wasm
// engine keeps compiled code; unset: the world directory's wasm-cache).
func envStore() (host.StoreOptions, error) {
	n, err := diskReserve(os.Getenv(envReserve))
	return host.StoreOptions{DiskReserve: n, WasmCacheDir: os.Getenv(envWasmCache)}, err
}

// diskReserve reads AOS_DISK_RESERVE into StoreOptions.DiskReserve: unset
// or empty is 0 (the store's default), otherwise a positive number of
// bytes, with an optional KiB, MiB or GiB suffix; anything else is a usage
// error naming the variable.
func diskReserve(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	num, unit := s, int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, unit = strings.TrimSuffix(s, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/unit {
		return 0, usagef("%s=%q: want a positive size in bytes, or with a KiB, MiB or GiB suffix such as 256MiB (unset: the default)", envReserve, s)
	}
	return n * unit, nil
}

// cellCacheSize reads AOS_CELL_CACHE_SIZE: unset or empty is 0 (the cells
// default), anything but a positive integer an error naming the variable.
func cellCacheSize(s string, set bool) (int, error) {
	if !set || s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %s=%q: want a positive integer", cells.ErrBadConfig, envCellCache, s)
	}
	return n, nil
}

// kernelConfig is how the CLI opens a world. aosd links no workflow code:
// workflows are wasm modules the manifest pins (a program that embeds aos
// links its own, see package aos).
func (a *app) kernelConfig() (kernel.Config, error) {
	cfg, err := envConfig()
	cfg.Logger = logger(a.stderr, slog.LevelWarn)
	if r, on := a.bars(); on {
		least := uint64(openBarMin)
		if a.everyBar {
			least = 1
		}
		cfg.Progress = kernelBars(r, least)
	}
	return cfg, err
}

// openBarMin is how many records a direct open must replay for an
// ordinary command (status, send, ...) to draw the replay's bar: a short
// tail replays in a blink and its bar would only clutter the terminal.
const openBarMin = 10_000

// bars is the reporter progress bars are drawn with, on stderr, and
// whether it draws: only when stderr is a terminal and --json was not
// given (progress.Enabled).
func (a *app) bars() (*progress.Reporter, bool) {
	f, _ := a.stderr.(*os.File)
	on := progress.Enabled(f, a.json)
	return progress.New(a.stderr, on), on
}

// kernelBars draws the kernel's progress (the replay of an open, the runs
// of a verification) on r, for operations of at least least steps. The
// kernel knows the total of everything it reports, so a total of 0 is
// nothing to do and draws nothing.
func kernelBars(r *progress.Reporter, least uint64) kernel.Progress {
	return func(label string, total uint64) kernel.ProgressBar {
		if total == 0 || total < least {
			return quietBar{}
		}
		return r.Start(label, total)
	}
}

// quietBar is a bar not drawn.
type quietBar struct{}

func (quietBar) Add(uint64) {}
func (quietBar) Finish()    {}

// connect reaches the world through its daemon or directly (on
// PostgreSQL: as its owner, taking its lease).
func (a *app) connect(ctx context.Context) (*host.Conn, error) { return a.connectAs(ctx, false) }

// connectRead is connect for a command that only reads: a world on
// PostgreSQL no daemon serves is opened without taking its lease, so a
// read never takes the world from its owner.
func (a *app) connectRead(ctx context.Context) (*host.Conn, error) { return a.connectAs(ctx, true) }

func (a *app) connectAs(ctx context.Context, readOnly bool) (*host.Conn, error) {
	cfg, err := a.kernelConfig()
	if err != nil {
		return nil, err
	}
	so, err := envStore()
	if err != nil {
		return nil, err
	}
	return host.Connect(ctx, host.Dir(a.world), host.ConnectOptions{Direct: a.direct, ReadOnly: readOnly, Config: cfg, Store: so})
}

// withConn runs fn against the world and closes it after.
func (a *app) withConn(ctx context.Context, fn func(*host.Conn) error) error {
	return a.withConnAs(ctx, false, fn)
}

// withReadConn is withConn for a command that only reads (connectRead).
func (a *app) withReadConn(ctx context.Context, fn func(*host.Conn) error) error {
	return a.withConnAs(ctx, true, fn)
}

func (a *app) withConnAs(ctx context.Context, readOnly bool, fn func(*host.Conn) error) (err error) {
	c, err := a.connectAs(ctx, readOnly)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close world: %w", cerr)
		}
	}()
	return fn(c)
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
