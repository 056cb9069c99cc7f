package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/cmd/aosd/loadgen"
	"github.com/aos-kernel/aos/host"
)

const benchSummary = "drive a world through its HTTP API with a closed-loop load (keyed counter or --template), verify every final state, print events/s, latency percentiles, CPU per 1,000 events and group-commit sizes"

func cmdBench(fs *flag.FlagSet, a *app) func([]string) error {
	addr := fs.String("addr", "", "the daemon's HOST:PORT (default: the daemon serving --world, from its daemon.json)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (default: --world's token, or the started world's)")
	start := fs.String("start", "", "start a daemon of its own on a fresh world in DIR (DIR/world, DIR/manifest, DIR/serve.log) and stop it after")
	manifest := fs.String("manifest", "", "with --start: the built manifest to apply (default: examples/manifests/counter, built into DIR/manifest; needs the Go toolchain and the repository, as demo does)")
	pgURL := fs.String("postgres", "", "with --start: make the fresh world in PostgreSQL at this postgres:// URL (as aosd init --postgres; the schema must hold no world)")
	pgSchema := fs.String("schema", "", "with --start --postgres: the PostgreSQL schema (default aos)")
	events := fs.Int("events", 20_000, "measured events")
	warmup := fs.Int("warmup", 1_000, "events sent first and left out of every figure (they are verified)")
	batch := fs.Int("batch", 1, "events per request (1: one event object per POST /v1/events; more: an array)")
	conc := fs.Int("concurrency", 16, "requests in flight (closed loop)")
	keys := fs.Int("keys", 1_000, "distinct keys; event i goes to key i mod keys")
	prefix := fs.String("key-prefix", "", "keys are PREFIX0, PREFIX1, ... (default: b + 8 random hex digits + -, so reruns on one world do not mix)")
	tmpl := fs.String("template", "", "FILE: an event object {\"schema\": ..., \"value\": ...} sent instead of the counter's, with {{key}} and {{seq}} filled in per event")
	effects := fs.Bool("effects", false, "the effect mix: send the orders example's Created events (one order per event) and serve the charge each emits as an external executor (a key of its own through POST /v1/keys, claim, signed receipts), measuring the receipt round trip too")
	settle := fs.Duration("settle", time.Minute, "after the load, wait up to this long for quiescence before verifying")
	client := fs.String("client", loadgen.ClientLean, "how events are posted: lean (a connection per worker, written and read on the worker's goroutine) or std (Go's net/http Client, as an ordinary program posts them)")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		cfg := loadgen.Config{Events: *events, Warmup: *warmup, Batch: *batch, Concurrency: *conc,
			Keys: *keys, KeyPrefix: *prefix, Settle: *settle, Effects: *effects, Client: *client}
		if cfg.KeyPrefix == "" {
			var r [4]byte
			rand.Read(r[:])
			cfg.KeyPrefix = "b" + hex.EncodeToString(r[:]) + "-"
		}
		if *tmpl != "" {
			b, err := os.ReadFile(*tmpl)
			if err != nil {
				return usagef("--template: %v", err)
			}
			cfg.Template = b
		}
		cfg.Base = "http://placeholder" // checked for real once the daemon is found
		if err := cfg.Check(); err != nil {
			return usagef("%v", err)
		}
		if *start != "" && *addr != "" {
			return usagef("--start and --addr: give one (bench starts its own daemon, or drives a running one)")
		}
		if (*pgURL != "" || *pgSchema != "") && *start == "" {
			return usagef("--postgres and --schema are for --start (bench makes the world it starts)")
		}
		if *pgSchema != "" && *pgURL == "" {
			return usagef("--schema %s: only with --postgres", *pgSchema)
		}
		if *manifest != "" && *start == "" {
			return usagef("--manifest is for --start (a running daemon already has its manifest)")
		}
		var stop func() error
		var err error
		switch {
		case *start != "":
			cfg.Base, cfg.Token, stop, err = a.startBenchWorld(*start, *manifest, *effects, *batch, *pgURL, *pgSchema)
		case *addr != "":
			cfg.Base = "http://" + *addr
		default:
			info, ierr := host.Dir(a.world).ReadDaemonInfo()
			if ierr != nil {
				return fmt.Errorf("no daemon serves %s (%v): start one with `aosd serve --world %s`, give --addr, or use --start DIR", a.world, ierr, a.world)
			}
			cfg.Base = "http://" + info.Addr
		}
		if err != nil {
			return err
		}
		if cfg.Token == "" && *tokenFile != "" {
			b, terr := os.ReadFile(*tokenFile)
			if terr != nil {
				return fmt.Errorf("read token: %w", terr)
			}
			cfg.Token = strings.TrimSpace(string(b))
		} else if cfg.Token == "" {
			// The world's token: its file, or its database's.
			tok, terr := host.Dir(a.world).Token()
			if terr != nil {
				return terr
			}
			cfg.Token = tok
		}
		rep, err := loadgen.Run(a.ctx, cfg)
		if stop != nil {
			if serr := stop(); serr != nil && err == nil {
				err = serr
			}
		}
		if rep == nil {
			return err
		}
		if a.json {
			if perr := a.printJSON(rep); perr != nil {
				return perr
			}
		} else {
			printBench(a.stdout, rep)
		}
		return err
	}
}

// startBenchWorld makes a fresh world in dir, applies the manifest and
// starts `aosd serve` on it (this binary), returning its address, token
// and how to stop it.
func (a *app) startBenchWorld(dir, manifest string, effects bool, batch int, pgURL, pgSchema string) (base, token string, stop func() error, err error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return "", "", nil, usagef("--start %s: not empty; give a new or empty directory (bench makes a fresh world)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", nil, err
	}
	world := filepath.Join(dir, "world")
	var out bytes.Buffer
	step := func(args ...string) error {
		out.Reset()
		if code := run(a.ctx, args, nil, &out, &out); code != exitOK {
			return fmt.Errorf("--start: aosd %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		}
		return nil
	}
	if manifest == "" {
		example := "counter"
		if effects {
			example = "orders"
		}
		src := filepath.Join("examples", "manifests", example)
		if _, err := os.Stat(src); err != nil {
			return "", "", nil, fmt.Errorf("--start: the %s example is not at %s: run from the repository root, or give --manifest (a built manifest)", example, src)
		}
		manifest = filepath.Join(dir, "manifest")
		if err := build.Copy(src, manifest); err != nil {
			return "", "", nil, err
		}
		if err := step("build", manifest, "--sources-from", src); err != nil {
			return "", "", nil, err
		}
	}
	initArgs := []string{"init", "--world", world}
	if pgURL != "" {
		initArgs = append(initArgs, "--postgres", pgURL)
		if pgSchema != "" {
			initArgs = append(initArgs, "--schema", pgSchema)
		}
	}
	if err := step(initArgs...); err != nil {
		return "", "", nil, err
	}
	if err := step("apply", manifest, "--world", world); err != nil {
		return "", "", nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return "", "", nil, err
	}
	// The daemon it starts takes the batches it will send (a daemon of
	// one's own refuses more than --max-batch events per request).
	cmd := exec.Command(exe, "serve", "--world", world, "--listen", "127.0.0.1:0",
		"--max-batch", strconv.Itoa(max(batch, api.DefaultMaxBatchEvents)))
	cmd.Stderr = logf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return "", "", nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return "", "", nil, err
	}
	stop = func() error {
		defer logf.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		go io.Copy(io.Discard, pipe)
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("--start: the daemon exited with %v (see %s)", err, logf.Name())
		}
		return nil
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	addr, found := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !found {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		return "", "", nil, fmt.Errorf("--start: the daemon did not start (%v; see %s)", err, logf.Name())
	}
	tok, err := host.Dir(world).Token()
	if err != nil {
		stop()
		return "", "", nil, err
	}
	return addr, tok, stop, nil
}

// printBench is the readable report.
func printBench(w io.Writer, r *loadgen.Report) {
	load := "keyed counter"
	switch {
	case r.Template:
		load = "template"
	case r.Receipts != nil:
		load = "orders with an executor (effect mix)"
	}
	fmt.Fprintf(w, "aosd bench: %s, %d events (+%d warm-up) to %s, %d event(s)/request, %d in flight, %d keys, %s client\n",
		load, r.Events, r.Warmup, r.Target, r.Batch, r.Concurrency, r.Keys, r.Client)
	fmt.Fprintf(w, "throughput    %.0f events/s (%.0f requests/s) over %.2f s\n", r.EventsPerS, r.RequestsPS, r.Seconds)
	l := r.Latency
	fmt.Fprintf(w, "latency ms    p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f (per request)\n", l.P50, l.P90, l.P99, l.Max, l.Mean)
	if r.DaemonCPU != nil {
		fmt.Fprintf(w, "daemon CPU    %.2f s (%.1f ms per 1,000 events)\n", *r.DaemonCPU, *r.DaemonCPUPer1k*1000)
	} else {
		fmt.Fprintf(w, "daemon CPU    n/a (its /metrics has no process_cpu_seconds_total)\n")
	}
	fmt.Fprintf(w, "bench CPU     %.2f s (%.1f ms per 1,000 events, the %s client's)\n", r.BenchCPU, r.BenchCPUPer1k*1000, r.Client)
	if c := r.GroupCommit; c != nil {
		fmt.Fprintf(w, "group commit  %d flushes, %.1f events and %.1f records per flush, mean flush %.2f ms\n",
			c.Flushes, c.EventsPerFlsh, c.MeanRecords, c.MeanFlushMs)
	} else {
		fmt.Fprintf(w, "group commit  n/a (its /metrics has no aos_journal_flush_records)\n")
	}
	if rc := r.Receipts; rc != nil {
		l := rc.Latency
		fmt.Fprintf(w, "receipts      %d settled, %.0f receipts/s; round trip ms p50 %.3f  p90 %.3f  p99 %.3f  max %.3f (%d claims)\n",
			rc.Receipts, rc.PerSecond, l.P50, l.P90, l.P99, l.Max, rc.ClaimCalls)
	}
	v := r.Verify
	switch {
	case !v.OK:
		fmt.Fprintf(w, "verify        FAILED: %s\n", v.Problem)
	case r.Receipts != nil:
		fmt.Fprintf(w, "verified      %d orders paid, %d distinct seqs, no failed instance\n", v.Keys, v.Seqs)
	case r.Template:
		fmt.Fprintf(w, "verified      %d distinct seqs, quiescent, no failed instance\n", v.Seqs)
	default:
		fmt.Fprintf(w, "verified      %d keys hold the counts sent, %d distinct seqs, quiescent, no failed instance\n", v.Keys, v.Seqs)
	}
}
