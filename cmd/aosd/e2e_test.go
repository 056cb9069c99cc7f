package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// aosdBin is the real binary, built once; tests drive it as a user would.
var aosdBin string

// aosdKillBin is the binary for a daemon the test ends with SIGKILL: the
// same code, never built with -race. A race-built process fails only at
// its exit (status 66), and a SIGKILLed one has none, so a race there was
// never reported; built with -race it only ran 5-10 times slower (the crash
// harness's epochs, TestUpgradeSIGKILL's rounds). A daemon that is stopped
// and whose exit is checked runs aosdBin, under -race when the test is.
var aosdKillBin string

func TestMain(m *testing.M) {
	// The end-to-end tests spend most of their time waiting on the aosd
	// processes they start, so more of them run at once than go test's
	// default (GOMAXPROCS); -parallel given on the command line wins.
	flag.Parse()
	if !flagSet("test.parallel") {
		flag.Set("test.parallel", strconv.Itoa(max(4, 2*runtime.GOMAXPROCS(0))))
	}
	dir, err := os.MkdirTemp("", "aosd-e2e-")
	if err != nil {
		panic(err)
	}
	aosdBin = filepath.Join(dir, "aosd")
	// Every aosd process shares one compiled-code cache, warmed with the
	// example modules: a module compiles once, not once per world (15-40 s
	// each under -race).
	_, err = built.Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, "build the example manifests:", err)
		os.Exit(1)
	}
	os.Setenv("AOS_WASM_CACHE", built.SharedWasmCache())
	// The daemon under test is built the way this test binary was: with
	// -race only under -race. AOS_E2E_NORACE=1 builds it without -race
	// even then, for figures that time the daemon (the inspector's
	// timeline, docs/PERFORMANCE.md).
	var race []string
	if raceEnabled && os.Getenv("AOS_E2E_NORACE") != "1" {
		race = []string{"-race"}
	}
	aosdKillBin = aosdBin
	killBuild := make(chan error, 1)
	if race != nil {
		aosdKillBin = filepath.Join(dir, "aosd-norace")
		go func() {
			b := exec.Command("go", "build", "-o", aosdKillBin, ".")
			b.Stdout, b.Stderr = os.Stderr, os.Stderr
			killBuild <- b.Run()
		}()
	} else {
		killBuild <- nil
	}
	build := exec.Command("go", append(append([]string{"build"}, race...), "-o", aosdBin, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		// -race needs cgo; fall back to a plain build.
		build = exec.Command("go", "build", "-o", aosdBin, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build aosd:", err)
			os.Exit(1)
		}
	}
	if err := <-killBuild; err != nil {
		fmt.Fprintln(os.Stderr, "build aosd without -race:", err)
		os.Exit(1)
	}
	code := m.Run()
	built.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// flagSet says whether the flag name was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// repoManifests are the example manifests as checked in; tests apply the
// built copies built.Path gives, and only the demo reads these.
var repoManifests = filepath.Join("..", "..", "examples", "manifests")

const (
	counterWF = "com.example/counter.step@1"
	orderWF   = "com.example/order.step@1"
	countEv   = "com.example/CountEvent@1"
)

type result struct {
	stdout, stderr string
	code           int
}

func aosd(t testing.TB, world string, args ...string) result {
	t.Helper()
	return aosdEnv(t, world, nil, args...)
}

// aosdEnv is aosd with env (NAME=VALUE) added to its environment.
func aosdEnv(t testing.TB, world string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(aosdBin, append(args, "--world", world)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return runCmd(t, cmd)
}

// runCmd runs an aosd command and collects its output and exit code.
func runCmd(t testing.TB, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return result{out.String(), errb.String(), code}
}

func ok(t testing.TB, world string, args ...string) string {
	t.Helper()
	r := aosd(t, world, args...)
	if r.code != 0 {
		t.Fatalf("aosd %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func jsonOut(t *testing.T, world string, v any, args ...string) {
	t.Helper()
	out := ok(t, world, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("aosd %v --json: %v\n%s", args, err, out)
	}
}

type status struct {
	World         string         `json:"world"`
	ManifestHash  *string        `json:"manifest_hash"`
	JournalHeight uint64         `json:"journal_height"`
	Quiescent     bool           `json:"quiescent"`
	Instances     map[string]int `json:"instances"`
	Inflight      int            `json:"inflight"`
	QueuedEffects int            `json:"queued_effects"`
}

func getStatus(t *testing.T, world string) status {
	t.Helper()
	var s status
	jsonOut(t, world, &s, "status")
	return s
}

// newWorld inits a world whose journal is checked at the test's end.
func newWorld(t *testing.T) string {
	t.Helper()
	w := newUncheckedWorld(t)
	checkJournalAtEnd(t, w)
	return w
}

// newUncheckedWorld inits a world whose journal the test corrupts.
func newUncheckedWorld(t *testing.T) string {
	t.Helper()
	w := filepath.Join(t.TempDir(), "world")
	ok(t, w, "init")
	return w
}

// journalCheck is `aosd journal check --json`.
type journalCheck struct {
	OK         bool   `json:"ok"`
	Records    uint64 `json:"records"`
	First      uint64 `json:"first"`
	From       uint64 `json:"from"`
	To         uint64 `json:"to"`
	Snapshot   uint64 `json:"snapshot"`
	Omitted    int    `json:"omitted"`
	Violations []struct {
		Seq      uint64          `json:"seq"`
		Rule     string          `json:"rule"`
		Workflow string          `json:"workflow"`
		Key      json.RawMessage `json:"key"`
		Detail   string          `json:"detail"`
	} `json:"violations"`
}

// checkJournalAtEnd checks world's journal with `aosd journal check` once
// the test is over (after its daemons stopped: cleanups run last first):
// every world an end-to-end test makes must keep the journal's rules
// (docs/journal-check.md).
func checkJournalAtEnd(t *testing.T, world string) {
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(world, "store")); err != nil {
			t.Errorf("journal check at the end: the world %s is gone: %v", world, err)
			return
		}
		r := aosd(t, world, "journal", "check", "--json")
		var rep journalCheck
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.OK {
			t.Errorf("journal check at the end: exit %d (%v)\n%s%s", r.code, err, r.stdout, r.stderr)
		}
	})
}

// daemon is a running `aosd serve`.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	errb *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon runs serve and reads the address it prints once listening
// (daemon.json is written before that line).
func startDaemon(t *testing.T, world string) *daemon {
	t.Helper()
	return startDaemonEnv(t, world, nil)
}

// startDaemonEnv is startDaemon with env (NAME=VALUE) added to the
// daemon's environment and args added to serve's flags.
func startDaemonEnv(t *testing.T, world string, env []string, args ...string) *daemon {
	t.Helper()
	return startDaemonBin(t, aosdBin, world, env, args...)
}

// startKilledDaemon is startDaemon for a daemon the test will SIGKILL: it
// runs aosdKillBin, without -race.
func startKilledDaemon(t *testing.T, world string) *daemon {
	t.Helper()
	return startDaemonBin(t, aosdKillBin, world, nil)
}

func startDaemonBin(t *testing.T, bin, world string, env []string, args ...string) *daemon {
	t.Helper()
	cmd, addr, errb := launch(t, bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--world", world}, args...), env)
	d := &daemon{cmd: cmd, addr: addr, errb: errb}
	t.Cleanup(func() { d.stop(t, world) })
	return d
}

// launch starts bin with args (a serve) and env (NAME=VALUE, added to the
// test's environment), and reads the address serve prints once it listens
// (daemon.json is written before that line). A serve that does not start
// fails the test with its stderr; one still running when the test ends is
// killed (SIGCONT first, in case the test stopped it).
func launch(t testing.TB, bin string, args, env []string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%q did not start: %v\n%s", args, err, errb.String())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, strings.TrimPrefix(strings.TrimSpace(line), "listening on http://"), errb
}

func (d *daemon) stop(t *testing.T, world string) {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("serve exited with %v\n%s", err, d.errb.String())
	}
	if _, err := os.Stat(filepath.Join(world, "daemon.json")); !os.IsNotExist(err) {
		t.Errorf("daemon.json left behind after a clean shutdown (%v)", err)
	}
}

func token(t *testing.T, world string) string {
	b, err := os.ReadFile(filepath.Join(world, "token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// withAndWithoutDaemon runs f on a fresh world, first opened directly by
// each command, then through a running daemon.
func withAndWithoutDaemon(t *testing.T, f func(t *testing.T, world string, d *daemon)) {
	t.Run("direct", func(t *testing.T) {
		t.Parallel()
		f(t, newWorld(t), nil)
	})
	t.Run("daemon", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		f(t, w, startDaemon(t, w))
	})
}

func TestCounterLifecycle(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		var ap struct {
			Applied      bool   `json:"applied"`
			ManifestHash string `json:"manifest_hash"`
			BlockedBy    []any  `json:"blocked_by"`
		}
		jsonOut(t, w, &ap, "apply", built.Path(t, "counter"))
		if !ap.Applied || !strings.HasPrefix(ap.ManifestHash, "sha256:") || ap.BlockedBy == nil || len(ap.BlockedBy) != 0 {
			t.Fatalf("apply: %+v", ap)
		}
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		// flags after positional args; VALUE from a file and from stdin
		f := filepath.Join(t.TempDir(), "ev.json")
		os.WriteFile(f, []byte(`{"key":"a","by":2}`), 0o600)
		ok(t, w, "send", countEv, "@"+f, "--wait", "5s")
		cmd := exec.Command(aosdBin, "send", countEv, "-", "--world", w)
		cmd.Stdin = strings.NewReader(`{"key":"b","by":10}`)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("send from stdin: %v\n%s", err, out)
		}

		var cells struct {
			Cells []struct {
				Key       json.RawMessage `json:"key"`
				StateHash string          `json:"state_hash"`
				Size      int             `json:"size"`
				Status    string          `json:"status"`
			} `json:"cells"`
			Next *string `json:"next"`
		}
		jsonOut(t, w, &cells, "cells", "ls", counterWF)
		if len(cells.Cells) != 2 || cells.Next != nil {
			t.Fatalf("cells ls: %+v", cells)
		}
		var show struct {
			Workflow  string          `json:"workflow"`
			Key       json.RawMessage `json:"key"`
			Status    string          `json:"status"`
			State     map[string]int  `json:"state"`
			StateHash string          `json:"state_hash"`
			Inflight  []string        `json:"inflight"`
		}
		jsonOut(t, w, &show, "cells", "show", counterWF, "a")
		if show.State["count"] != 3 || string(show.Key) != `"a"` || show.Status != "completed" || show.Workflow != counterWF || show.Inflight == nil {
			t.Fatalf("cells show: %+v", show)
		}
		jsonOut(t, w, &show, "cells", "show", counterWF, `"b"`) // KEY as JSON
		if show.State["count"] != 10 {
			t.Fatalf("cells show b: %+v", show)
		}
		var trace []struct {
			Seq  uint64 `json:"seq"`
			Kind string `json:"kind"`
		}
		jsonOut(t, w, &trace, "trace", counterWF, "a")
		if len(trace) != 4 || trace[0].Kind != "event" || trace[1].Kind != "step" {
			t.Fatalf("trace: %+v", trace)
		}
		lines := strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "event")), "\n")
		if len(lines) != 3 {
			t.Fatalf("journal --kind event: %d lines\n%s", len(lines), lines)
		}
		for _, l := range lines {
			var r struct {
				Seq  uint64 `json:"seq"`
				Kind string `json:"kind"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil || r.Seq == 0 || r.Kind != "event" {
				t.Fatalf("journal line %q: %v", l, err)
			}
		}
		if n := len(strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--from", "2", "--limit", "2")), "\n")); n != 2 {
			t.Fatalf("journal --limit 2: %d lines", n)
		}
		s := getStatus(t, w)
		if !s.Quiescent || s.Instances["completed"] != 2 || s.JournalHeight != 8 || s.ManifestHash == nil {
			t.Fatalf("status: %+v", s)
		}
		for _, args := range [][]string{{"status"}, {"cells", "ls", counterWF}, {"trace", counterWF, "a"}, {"journal"}} {
			if out := ok(t, w, args...); out == "" {
				t.Errorf("aosd %v printed nothing", args)
			}
		}
		// With a daemon, trace ends with the inspector's link to the cell.
		tr := strings.Split(strings.TrimSpace(ok(t, w, "trace", counterWF, "a")), "\n")
		if link := tr[len(tr)-1]; d != nil && link != "inspector: http://"+d.addr+"/cells/com.example%2Fcounter.step@1/%22a%22" {
			t.Errorf("trace through the daemon ends with %q, want the inspector's link", link)
		} else if d == nil && strings.Contains(strings.Join(tr, "\n"), "inspector:") {
			t.Errorf("trace without a daemon names an inspector:\n%s", strings.Join(tr, "\n"))
		}
		if d != nil && !strings.Contains(ok(t, w, "status"), "daemon at http://"+d.addr) {
			t.Errorf("status did not go through the daemon")
		}
		// Compiled code went to AOS_WASM_CACHE, not to the world's own cache.
		if ents, _ := os.ReadDir(filepath.Join(w, "wasm-cache")); len(ents) != 0 {
			t.Errorf("world wasm-cache has %d entries with AOS_WASM_CACHE set", len(ents))
		}
		if ents, err := os.ReadDir(os.Getenv("AOS_WASM_CACHE")); err != nil || len(ents) == 0 {
			t.Errorf("AOS_WASM_CACHE %s: %d entries, %v", os.Getenv("AOS_WASM_CACHE"), len(ents), err)
		}
	})
}

// TestBadInputChangesNothing: each refusal is a clear error (exit 1) naming
// what and where, and the world's journal and manifest stay as they were.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		before := getStatus(t, w)
		badManifest := filepath.Join(t.TempDir(), "bad.json")
		os.WriteFile(badManifest, []byte(`[{"$kind": "defschema", "name": "x/y@1", "schema": {"type": "nope"}}]`), 0o600)
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown schema", []string{"send", "com.example/Nope@1", `{}`}, `unknown event schema "com.example/Nope@1"`},
			{"invalid JSON", []string{"send", countEv, `{"key":`}, "not valid JSON"},
			{"schema violation", []string{"send", countEv, `{"key":"a","by":"x"}`}, "/by"},
			{"empty key", []string{"send", countEv, `{"key":"","by":1}`}, "/key"},
			{"unknown workflow", []string{"cells", "ls", "com.example/nope@1"}, `unknown workflow "com.example/nope@1"`},
			{"bad cursor", []string{"cells", "ls", counterWF, "--after", "nope"}, `after: "nope" is not a cell cursor`},
			{"page too large", []string{"cells", "ls", counterWF, "--limit", "10001"}, "limit: 10001 is not a page size: want 1..10000"},
			{"key does not validate", []string{"cells", "show", counterWF, `""`}, "does not match com.example/CounterKey@1"},
			{"no such cell", []string{"cells", "show", counterWF, "zzz"}, "no such cell"},
			{"manifest does not load", []string{"apply", badManifest}, "bad.json"},
			{"manifest missing", []string{"apply", filepath.Join(t.TempDir(), "nope")}, "cannot read manifest"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := aosd(t, w, c.args...)
				if r.code != 1 || !strings.Contains(r.stderr, c.want) {
					t.Errorf("aosd %v: exit %d, stderr %q; want exit 1 and %q", c.args, r.code, r.stderr, c.want)
				}
			})
		}
		for _, args := range [][]string{{"send", countEv}, {"cells", "ls"}, {"bogus"}, {"status", "--bogus"}, {"cells", "frob", "x"},
			{"journal", "--kind", "bogus"}} {
			if r := aosd(t, w, args...); r.code != 2 {
				t.Errorf("aosd %v: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
			}
		}
		if r := aosd(t, w, "journal", "--kind", "bogus"); !strings.Contains(r.stderr, `unknown record kind "bogus"`) {
			t.Errorf("journal --kind bogus does not name the kind: %s", r.stderr)
		}
		if after := getStatus(t, w); after.JournalHeight != before.JournalHeight || *after.ManifestHash != *before.ManifestHash {
			t.Fatalf("bad input changed the world: before %+v after %+v", before, after)
		}
	})
}

// TestApplyRefusedUnlessQuiescent: an order waits on its payment and timer
// intents (no executors exist yet), so apply is refused with exit 3 listing
// the blockers, with and without --wait, and nothing changes. On a quiescent
// world the same apply goes through.
func TestApplyRefusedUnlessQuiescent(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "orders"))
		ok(t, w, "send", "com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":500,"customer":"c"}`)
		before := getStatus(t, w)
		if before.Quiescent || before.Instances["waiting"] != 1 || before.Inflight != 2 {
			t.Fatalf("status: %+v", before)
		}
		var show struct {
			Status   string   `json:"status"`
			Inflight []string `json:"inflight"`
		}
		jsonOut(t, w, &show, "cells", "show", orderWF, "o1")
		if show.Status != "waiting" || len(show.Inflight) != 2 {
			t.Fatalf("cells show: %+v", show)
		}
		for _, extra := range [][]string{nil, {"--wait", "200ms"}, {"--dry-run"}} {
			r := aosd(t, w, append([]string{"apply", built.Path(t, "counter"), "--json"}, extra...)...)
			var out struct {
				Applied   bool `json:"applied"`
				BlockedBy []struct {
					Kind     string          `json:"kind"`
					Workflow string          `json:"workflow"`
					Key      json.RawMessage `json:"key"`
				} `json:"blocked_by"`
			}
			if r.code != 3 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Applied || len(out.BlockedBy) != 3 {
				t.Fatalf("apply %v: exit %d, out %s, err %s", extra, r.code, r.stdout, r.stderr)
			}
			if b := out.BlockedBy[0]; b.Kind != "instance" || b.Workflow != orderWF || string(b.Key) != `"o1"` {
				t.Errorf("blocker: %+v", b)
			}
			if !strings.Contains(r.stderr, "not quiescent") {
				t.Errorf("stderr: %s", r.stderr)
			}
		}
		if r := aosd(t, w, "apply", built.Path(t, "counter")); r.code != 3 || !strings.Contains(r.stdout, `instance waiting com.example/order.step@1 key "o1"`) {
			t.Errorf("apply table: exit %d\n%s", r.code, r.stdout)
		}
		after := getStatus(t, w)
		if after.JournalHeight != before.JournalHeight || *after.ManifestHash != *before.ManifestHash {
			t.Fatalf("refused apply changed the world: %+v -> %+v", before, after)
		}
	})
	t.Run("quiescent world applies", func(t *testing.T) {
		w := newWorld(t)
		ok(t, w, "apply", built.Path(t, "counter"))
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		dry := ok(t, w, "apply", built.Path(t, "choreography"), "--dry-run")
		if !strings.Contains(dry, "dry run") || !strings.Contains(dry, "- def com.example/counter.step@1") {
			t.Errorf("dry run: %s", dry)
		}
		out := ok(t, w, "apply", built.Path(t, "choreography"), "--wait", "1s")
		if !strings.Contains(out, "applied at journal seq") {
			t.Errorf("apply: %s", out)
		}
		if out := ok(t, w, "apply", built.Path(t, "choreography")); !strings.Contains(out, "unchanged") {
			t.Errorf("re-apply: %s", out)
		}
		// the choreography cascades: placed -> paid -> shipped -> audit
		ok(t, w, "send", "com.example/OrderPlaced@1", `{"order_id":"o9","amount_cents":250}`)
		var show struct {
			State map[string]int `json:"state"`
		}
		jsonOut(t, w, &show, "cells", "show", "com.example/choreo.audit.step@1")
		if show.State["paid"] != 1 || show.State["shipped"] != 1 || show.State["paid_cents"] != 250 {
			t.Errorf("audit: %+v", show.State)
		}
	})
}

func TestDaemonHTTP(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startDaemon(t, w)
	base := "http://" + d.addr
	tok := token(t, w)
	ok(t, w, "apply", built.Path(t, "counter"))
	do := func(method, path, body, auth string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for _, auth := range []string{"", "Bearer wrong"} {
		code, body := do("GET", "/v1/status", "", auth)
		if code != 401 || !strings.Contains(body, `"code":"unauthorized"`) {
			t.Errorf("auth %q: %d %s", auth, code, body)
		}
	}
	bearer := "Bearer " + tok
	if code, body := do("POST", "/v1/events", `{"schema":"`+countEv+`","value":{"key":"a","by":1}}`, bearer); code != 200 || !strings.Contains(body, `"seq":`) {
		t.Errorf("post event: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/events", `[{"schema":"`+countEv+`","value":{"key":"a","by":1}},{"schema":"`+countEv+`","value":{"key":"b","by":1}}]`, bearer); code != 200 || !strings.Contains(body, `"seqs":[`) {
		t.Errorf("post events: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/events", `{"schema":"`+countEv+`","value":{"key":"a","by":"x"}}`, bearer); code != 400 ||
		!strings.Contains(body, `"code":"invalid_input"`) || !strings.Contains(body, "/by") {
		t.Errorf("bad event: %d %s", code, body)
	}
	big := `{"schema":"` + countEv + `","value":{"key":"` + strings.Repeat("x", 9<<20) + `","by":1}}`
	if code, body := do("POST", "/v1/events", big, bearer); code != 413 || !strings.Contains(body, "too_large") {
		t.Errorf("oversize: %d %.200s", code, body)
	}
	if code, body := do("GET", "/v1/cells/"+url.PathEscape(counterWF)+"/a", "", bearer); code != 200 || !strings.Contains(body, `"count":2`) {
		t.Errorf("cell: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/cells/nope%40x", "", bearer); code != 404 || !strings.Contains(body, `"where"`) {
		t.Errorf("unknown workflow: %d %s", code, body)
	}
	if code, body := do("GET", "/metrics", "", bearer); code != 200 || !strings.Contains(body, "aos_events_ingested_total 3") ||
		!strings.Contains(body, "aos_journal_flush_duration_seconds_bucket") || !strings.Contains(body, "aos_cell_cache_hit_ratio") {
		t.Errorf("metrics: %d %.300s", code, body)
	}

	// Many clients push at once; every acknowledged event is counted.
	var wg sync.WaitGroup
	const clients, each = 16, 20
	errs := make(chan string, clients*each)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest("POST", base+"/v1/events", strings.NewReader(fmt.Sprintf(`{"schema":"%s","value":{"key":"k%d","by":1}}`, countEv, c)))
				req.Header.Set("Authorization", bearer)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- resp.Status
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("concurrent push: %s", e)
	}
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, w, &show, "cells", "show", counterWF, "k7")
	if show.State["count"] != each {
		t.Errorf("k7 count = %d, want %d", show.State["count"], each)
	}

	// journal --follow streams records appended after it started.
	from := getStatus(t, w).JournalHeight + 1
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/journal?follow=true&kind=event&from=%d", base, from), nil)
	req.Header.Set("Authorization", bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ok(t, w, "send", countEv, `{"key":"late","by":1}`)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if err != nil || !strings.Contains(line, `"late"`) {
		t.Errorf("follow: %q %v", line, err)
	}

	// A second process forced to open the store directly gets a clear
	// locked error, and the daemon keeps serving unharmed.
	before := getStatus(t, w)
	r := aosd(t, w, "status", "--direct")
	if r.code != 1 || !strings.Contains(r.stderr, "locked") {
		t.Errorf("direct open while served: exit %d %s", r.code, r.stderr)
	}
	if r := aosd(t, w, "init"); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("init over a world: exit %d %s", r.code, r.stderr)
	}
	if after := getStatus(t, w); after.JournalHeight != before.JournalHeight {
		t.Errorf("height moved: %d -> %d", before.JournalHeight, after.JournalHeight)
	}

	// After a clean stop the CLI opens the world itself and sees everything.
	d.stop(t, w)
	if after := getStatus(t, w); after.JournalHeight != before.JournalHeight {
		t.Errorf("after stop: height %d, want %d", after.JournalHeight, before.JournalHeight)
	}
}

// TestStaleDaemonInfo: a daemon.json whose process is gone is ignored.
func TestStaleDaemonInfo(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	os.WriteFile(filepath.Join(w, "daemon.json"), []byte(`{"addr":"127.0.0.1:1","pid":999999999}`), 0o600)
	if out := ok(t, w, "status"); !strings.Contains(out, "direct") {
		t.Errorf("status with a stale daemon.json: %s", out)
	}
}

func TestHelpAndDemo(t *testing.T) {
	t.Parallel()
	w := filepath.Join(t.TempDir(), "w")
	for _, c := range []string{"build", "new", "init", "apply", "send", "serve", "status", "cells", "journal", "trace", "snapshot", "replay", "demo"} {
		if out := ok(t, w, c, "--help"); !strings.Contains(out, "example:") {
			t.Errorf("%s --help: %s", c, out)
		}
	}
	checkJournalAtEnd(t, w)
	out := ok(t, w, "demo", "--manifests", repoManifests)
	if !strings.Contains(out, `"count": 42`) {
		t.Errorf("demo: %s", out)
	}
	// It shows an effect and its receipt: the reminder's timer fired.
	if !regexp.MustCompile(`receipt\s+sys/timer.set@1 ok: fired \d{4}-\d\d-\d\d [0-9:.]+Z, attempt 1 from aos/builtin`).MatchString(out) || !strings.Contains(out, `"status": "fired"`) {
		t.Errorf("the demo shows no effect and receipt:\n%s", out)
	}
	// It ends with commands that work, and says how to get aosd on PATH.
	_, next, found := strings.Cut(out, "Next, try:")
	if !found {
		t.Fatalf("the demo suggests nothing next:\n%s", out)
	}
	var cmds []string
	for _, l := range strings.Split(next, "\n") {
		if strings.HasPrefix(l, "    aosd ") {
			cmds = append(cmds, strings.TrimPrefix(l, "    aosd "))
		}
	}
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "cells ls ") || !strings.HasPrefix(cmds[1], "serve --world ") {
		t.Fatalf("suggested commands %q", cmds)
	}
	r := runCmd(t, exec.Command(aosdBin, strings.Fields(cmds[0])...))
	if r.code != 0 || !strings.Contains(r.stdout, `"a"`) || !strings.Contains(r.stdout, `"b"`) {
		t.Errorf("aosd %s: exit %d\n%s%s", cmds[0], r.code, r.stdout, r.stderr)
	}
	if _, err := exec.LookPath("aosd"); err != nil && !strings.Contains(next, "aosd is not on your PATH. From the repository root:\n\n    go install ./cmd/aosd") {
		t.Errorf("no word on getting aosd on PATH:\n%s", next)
	}
}
