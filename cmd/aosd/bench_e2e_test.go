package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// benchReport is the part of `aosd bench --json` the tests read.
type benchReport struct {
	Target      string  `json:"target"`
	Events      int     `json:"events"`
	Warmup      int     `json:"warmup_events"`
	Requests    int     `json:"requests"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Keys        int     `json:"keys"`
	Template    bool    `json:"template"`
	Client      string  `json:"client"`
	Seconds     float64 `json:"seconds"`
	EventsPerS  float64 `json:"events_per_second"`
	Latency     struct {
		P50, P90, P99, Max, Mean float64
	} `json:"latency_ms"`
	DaemonCPU      *float64 `json:"daemon_cpu_seconds"`
	DaemonCPUPer1k *float64 `json:"daemon_cpu_seconds_per_1k_events"`
	BenchCPU       *float64 `json:"bench_cpu_seconds"`
	BenchCPUPer1k  *float64 `json:"bench_cpu_seconds_per_1k_events"`
	GroupCommit    *struct {
		Flushes     uint64  `json:"flushes"`
		Records     uint64  `json:"records"`
		MeanRecords float64 `json:"mean_records_per_flush"`
	} `json:"group_commit"`
	Verify struct {
		OK         bool   `json:"ok"`
		Seqs       int    `json:"seqs"`
		Quiescent  bool   `json:"quiescent"`
		Failed     int    `json:"failed"`
		Keys       int    `json:"keys_checked"`
		Problem    string `json:"problem"`
		Mismatches []struct {
			Key       string `json:"key"`
			Want, Got int64
		} `json:"mismatches"`
	} `json:"verify"`
}

func benchJSON(t *testing.T, r result) benchReport {
	t.Helper()
	var rep benchReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep
}

// servedWorld is a fresh world with an example manifest applied and a
// daemon serving it.
func servedWorld(t *testing.T, example string) string {
	t.Helper()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, example))
	startDaemon(t, w)
	return w
}

func cellCount(t *testing.T, w, key string) int64 {
	t.Helper()
	var c struct {
		State struct {
			Count int64 `json:"count"`
		} `json:"state"`
	}
	jsonOut(t, w, &c, "cells", "show", counterWF, key)
	return c.State.Count
}

func TestBenchVerifiesAgainstADaemon(t *testing.T) {
	t.Parallel()
	w := servedWorld(t, "counter")
	r := aosd(t, w, "bench", "--events", "200", "--warmup", "20", "--concurrency", "8", "--keys", "50", "--key-prefix", "t-", "--json")
	if r.code != 0 {
		t.Fatalf("bench: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rep := benchJSON(t, r)
	if rep.Events != 200 || rep.Warmup != 20 || rep.Requests != 200 || rep.Batch != 1 || rep.Concurrency != 8 || rep.Keys != 50 || rep.Template || rep.Client != "lean" {
		t.Fatalf("report echoes the wrong load: %+v", rep)
	}
	v := rep.Verify
	if !v.OK || v.Seqs != 220 || !v.Quiescent || v.Failed != 0 || v.Keys != 50 || len(v.Mismatches) != 0 || v.Problem != "" {
		t.Fatalf("verify = %+v", v)
	}
	l := rep.Latency
	if !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max && l.Mean > 0 && l.Mean <= l.Max) {
		t.Fatalf("latency percentiles out of order: %+v", l)
	}
	if rep.Seconds <= 0 || rep.EventsPerS <= 0 {
		t.Fatalf("no throughput: %+v", rep)
	}
	if rep.DaemonCPU == nil || rep.DaemonCPUPer1k == nil || rep.BenchCPU == nil {
		t.Fatalf("CPU figures missing: daemon %v per 1k %v bench %v", rep.DaemonCPU, rep.DaemonCPUPer1k, rep.BenchCPU)
	}
	if g := rep.GroupCommit; g == nil || g.Flushes == 0 || g.Records < 200 || g.MeanRecords < 1 {
		t.Fatalf("group commit = %+v, want flushes covering at least the 200 events", g)
	}
	// What bench says it sent is what the world holds: 220 events over
	// 50 keys, keys 0-19 five each, the rest four.
	if got := cellCount(t, w, "t-0"); got != 5 {
		t.Errorf("cell t-0 = %d, want 5", got)
	}
	if got := cellCount(t, w, "t-49"); got != 4 {
		t.Errorf("cell t-49 = %d, want 4", got)
	}

	// The readable report says the same, and a second run on the same
	// world with the default (random) prefix does not collide with the first.
	out := ok(t, w, "bench", "--events", "40", "--warmup", "0", "--concurrency", "4", "--keys", "10")
	for _, want := range []string{"40 events (+0 warm-up)", "events/s", "p50", "p99", "daemon CPU", "ms per 1,000 events", "group commit", "verified      10 keys hold the counts sent, 40 distinct seqs"} {
		if !strings.Contains(out, want) {
			t.Errorf("readable report lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchStdClient is `aosd bench --client std` against a real daemon:
// the events go through Go's net/http client, the run verifies, and the
// report names the client beside the daemon's and the client's CPU per
// event, in the JSON and in the readable report.
func TestBenchStdClient(t *testing.T) {
	t.Parallel()
	w := servedWorld(t, "counter")
	r := aosd(t, w, "bench", "--client", "std", "--events", "200", "--warmup", "20", "--concurrency", "8", "--keys", "50", "--key-prefix", "s-", "--json")
	if r.code != 0 {
		t.Fatalf("bench --client std: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rep := benchJSON(t, r)
	if rep.Client != "std" || !rep.Verify.OK || rep.Verify.Seqs != 220 || rep.Verify.Keys != 50 || rep.Requests != 200 {
		t.Fatalf("report: client %q, %d requests, verify %+v", rep.Client, rep.Requests, rep.Verify)
	}
	if rep.DaemonCPUPer1k == nil || rep.BenchCPUPer1k == nil || rep.EventsPerS <= 0 || !(rep.Latency.P50 > 0 && rep.Latency.P50 <= rep.Latency.P99) {
		t.Fatalf("figures missing: daemon CPU per 1k %v, client CPU per 1k %v, %v events/s, latency %+v",
			rep.DaemonCPUPer1k, rep.BenchCPUPer1k, rep.EventsPerS, rep.Latency)
	}
	if got := cellCount(t, w, "s-0"); got != 5 {
		t.Errorf("cell s-0 = %d, want 5 (220 events over 50 keys)", got)
	}
	r = aosd(t, w, "bench", "--client", "std", "--events", "50", "--warmup", "0", "--concurrency", "2", "--keys", "5", "--key-prefix", "s2-")
	for _, want := range []string{"2 in flight, 5 keys, std client", "daemon CPU ", "per 1,000 events, the std client's)", "verified      5 keys"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("bench --client std: exit %d, report lacks %q:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
}

func TestBenchDetectsAWrongFinalState(t *testing.T) {
	t.Parallel()
	w := servedWorld(t, "counter")
	// One event behind bench's back, to a key bench will count.
	ok(t, w, "send", countEv, `{"key":"x-3","by":1}`)
	r := aosd(t, w, "bench", "--events", "100", "--warmup", "0", "--concurrency", "8", "--keys", "10", "--key-prefix", "x-", "--json")
	if r.code != 1 {
		t.Fatalf("bench on a tampered key: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "key x-3: count 11, want 10") {
		t.Errorf("stderr does not name the key and the counts: %s", r.stderr)
	}
	rep := benchJSON(t, r)
	m := rep.Verify.Mismatches
	if rep.Verify.OK || len(m) != 1 || m[0].Key != "x-3" || m[0].Want != 10 || m[0].Got != 11 {
		t.Fatalf("verify = %+v, want one mismatch x-3 10/11", rep.Verify)
	}
	if !strings.Contains(rep.Verify.Problem, "x-3") {
		t.Errorf("problem does not name the key: %q", rep.Verify.Problem)
	}
}

func TestBenchStartsItsOwnDaemon(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bench")
	tmpl := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(tmpl, []byte(`{"schema": "com.example/CountEvent@1", "value": {"key": "{{key}}", "by": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := aosd(t, filepath.Join(t.TempDir(), "unused"), "bench", "--start", dir, "--manifest", built.Path(t, "counter"),
		"--events", "100", "--warmup", "10", "--batch", "10", "--concurrency", "4", "--keys", "7", "--key-prefix", "s-", "--template", tmpl, "--json")
	if r.code != 0 {
		t.Fatalf("bench --start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rep := benchJSON(t, r)
	if !rep.Verify.OK || rep.Verify.Seqs != 110 || !rep.Template || rep.Requests != 10 || rep.Batch != 10 {
		t.Fatalf("report = %+v", rep)
	}
	// The daemon bench started is gone (daemon.json removed at a clean
	// stop), and its world holds what was sent: 110 events over 7 keys.
	world := filepath.Join(dir, "world")
	checkJournalAtEnd(t, world)
	if _, err := os.Stat(filepath.Join(world, "daemon.json")); !os.IsNotExist(err) {
		t.Fatalf("the started daemon did not stop cleanly: daemon.json %v", err)
	}
	if got := cellCount(t, world, "s-0"); got != 16 {
		t.Errorf("cell s-0 = %d, want 16", got)
	}
	if got := cellCount(t, world, "s-6"); got != 15 {
		t.Errorf("cell s-6 = %d, want 15", got)
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	w := newUncheckedWorld(t)
	full := filepath.Join(t.TempDir(), "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	constant := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(constant, []byte(`{"schema":"a/B@1","value":1}`), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--events", "0"}, 2, "--events 0: want at least 1"},
		{[]string{"--batch", "0"}, 2, "--batch 0"},
		{[]string{"--concurrency", "-3"}, 2, "--concurrency -3"},
		{[]string{"--keys", "0"}, 2, "--keys 0"},
		{[]string{"--key-prefix", "a b"}, 2, `--key-prefix "a b"`},
		{[]string{"--template", constant}, 2, "neither {{key}} nor {{seq}}"},
		{[]string{"--template", constant, "--effects"}, 2, "--effects and --template: give one"},
		{[]string{"--template", filepath.Join(full, "missing.json")}, 2, "--template: open"},
		{[]string{"--start", full}, 2, "not empty"},
		{[]string{"--start", full, "--addr", "127.0.0.1:1"}, 2, "--start and --addr"},
		{[]string{"--manifest", "m"}, 2, "--manifest is for --start"},
		{[]string{"--client", "curl"}, 2, `--client "curl": want lean`},
		{[]string{"extra"}, 2, "want no arguments"},
		{nil, 1, "no daemon serves"},
	} {
		r := aosd(t, w, append([]string{"bench"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

func TestServePprof(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, bad := range []string{"0.0.0.0:0", "nonsense"} {
		// --listen is bad too, so a serve that let the address through
		// would stop at once (exit 1) rather than serve forever.
		r := aosd(t, w, "serve", "--pprof", bad, "--listen", "nonsense")
		if r.code != 2 || !strings.Contains(r.stderr, "--pprof") {
			t.Errorf("serve --pprof %s: exit %d, stderr %q; want exit 2 naming --pprof", bad, r.code, r.stderr)
		}
	}
	cmd := exec.Command(aosdBin, "serve", "--listen", "127.0.0.1:0", "--pprof", "127.0.0.1:0", "--world", w)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, errb: errb}
	t.Cleanup(func() { d.stop(t, w) })
	// The pprof line is written before the API listens, so it is there
	// once the listening line is.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("serve did not start: %v\n%s", err, errb.String())
	}
	_, rest, found := strings.Cut(errb.String(), "pprof on ")
	if !found {
		t.Fatalf("no pprof line on stderr:\n%s", errb.String())
	}
	u := strings.Fields(rest)[0] + "cmdline"
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "serve") {
		t.Fatalf("GET %s: %d %q", u, resp.StatusCode, b)
	}
}

func TestBenchStopsOnARefusedEvent(t *testing.T) {
	t.Parallel()
	w := newWorld(t) // no manifest: every event is refused 409 no_manifest
	startDaemon(t, w)
	r := aosd(t, w, "bench", "--events", "10", "--warmup", "0", "--concurrency", "2", "--json")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("bench on a world without a manifest: exit %d, stdout %q; want exit 1 and no report", r.code, r.stdout)
	}
	for _, want := range []string{"POST /v1/events: HTTP 409", "no_manifest", "events "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
}

func orderStatus(t *testing.T, w, key string) string {
	t.Helper()
	var c struct {
		State struct {
			Status string `json:"status"`
		} `json:"state"`
	}
	jsonOut(t, w, &c, "cells", "show", orderWF, key)
	return c.State.Status
}

func TestBenchEffectMix(t *testing.T) {
	t.Parallel()
	w := servedWorld(t, "orders")
	r := aosd(t, w, "bench", "--effects", "--events", "60", "--warmup", "10", "--concurrency", "4", "--key-prefix", "e-", "--json")
	if r.code != 0 {
		t.Fatalf("bench --effects: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		benchReport
		Receipts *struct {
			Receipts  int     `json:"receipts"`
			PerSecond float64 `json:"receipts_per_second"`
			Executor  string  `json:"executor"`
			Latency   struct {
				P50, P90, P99, Max float64
			} `json:"latency_ms"`
		} `json:"receipts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --effects --json: %v\n%s", err, r.stdout)
	}
	if !rep.Verify.OK || rep.Verify.Keys != 70 || rep.Verify.Seqs != 70 || rep.Verify.Failed != 0 {
		t.Fatalf("verify = %+v", rep.Verify)
	}
	rc := rep.Receipts
	if rc == nil || rc.Receipts != 60 || rc.PerSecond <= 0 || rc.Executor != "bench-e" {
		t.Fatalf("receipts = %+v, want the 60 measured orders' receipts", rc)
	}
	if l := rc.Latency; !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
		t.Fatalf("receipt latency out of order: %+v", l)
	}
	// Every order bench made is paid, warm-up included; the key it
	// trusted for its executor is gone again.
	for _, k := range []string{"e-0", "e-9", "e-69"} {
		if st := orderStatus(t, w, k); st != "paid" {
			t.Errorf("order %s: %s, want paid", k, st)
		}
	}
	if ls := ok(t, w, "keys", "ls"); strings.Contains(ls, "bench-e") {
		t.Errorf("bench's executor key is still trusted:\n%s", ls)
	}
}

func TestBenchEffectMixDetectsAnUnpaidOrder(t *testing.T) {
	t.Parallel()
	w := servedWorld(t, "orders")
	// Behind bench's back, order e-5 is created and cancelled: bench's own
	// create for it changes nothing, and its charge's receipt leaves it
	// cancelled.
	ok(t, w, "send", "com.example/OrderCreated@1", `{"order_id":"e-5","amount_cents":100,"customer":"x"}`)
	ok(t, w, "send", "com.example/OrderCancel@1", `{"order_id":"e-5"}`)
	r := aosd(t, w, "bench", "--effects", "--events", "20", "--warmup", "0", "--concurrency", "4", "--key-prefix", "e-")
	if r.code != 1 || !strings.Contains(r.stderr, `order e-5: status "cancelled", want "paid"`) {
		t.Fatalf("bench --effects with a cancelled order: exit %d, want 1 naming e-5\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// metricsText is the daemon's /metrics answer.
func metricsText(t *testing.T, d *daemon, world string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token(t, world))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestServeRuntimeSettings: serve runs with two Ps more than Go's default
// (cmd/aosd/serve.go, extraProcs) and with GOGC at gcPercent, unless the
// environment's GOMAXPROCS or GOGC chose them: then those.
func TestServeRuntimeSettings(t *testing.T) {
	t.Parallel()
	dflt := runtime.GOMAXPROCS(0) // the default, unless this test's GOMAXPROCS chose it
	if os.Getenv("GOMAXPROCS") != "" {
		dflt = runtime.NumCPU()
	}
	// An empty variable is unset to Go and to serve; exec keeps the last
	// of duplicate names, so it overrides this test's own.
	for _, c := range []struct {
		env         []string
		procs, gogc int
	}{
		{[]string{"GOMAXPROCS=", "GOGC="}, dflt + 2, 200},
		{[]string{"GOMAXPROCS=3", "GOGC=150"}, 3, 150},
	} {
		w := newWorld(t)
		d := startDaemonEnv(t, w, c.env)
		body := metricsText(t, d, w)
		if got := gauge(t, body, "go_sched_gomaxprocs_threads"); got != c.procs {
			t.Errorf("serve with %q runs with %d Ps, want %d", c.env, got, c.procs)
		}
		if got := gauge(t, body, "go_gc_gogc_percent"); got != c.gogc {
			t.Errorf("serve with %q runs with GOGC %d, want %d", c.env, got, c.gogc)
		}
	}
}

// gauge is the integer value of the unlabelled metric name in a /metrics
// text.
func gauge(t *testing.T, body, name string) int {
	t.Helper()
	_, rest, found := strings.Cut(body, "\n"+name+" ")
	if !found {
		t.Fatalf("no %s in /metrics:\n%s", name, body)
	}
	got, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return got
}
