package kernel_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// Benchmarks of snapshots and reopening (docs/PERFORMANCE.md, "Snapshots
// and reopen"). They report timings and never assert them; they do check
// that each world is what it should be (height, cells, where replay
// started), so a wrong figure cannot come from a wrong world.

// killWorld is a counter world built in a child process that is then
// SIGKILLed: records journal records (two per event: the event and its
// step), over min(records/2, 1,000,000) cells, every event bumping one
// cell by 1, the cells taken round robin.
type killWorld struct {
	records int
	every   int // Config.SnapshotEvery; negative: no snapshots at all
}

func (kw killWorld) events() int { return kw.records / 2 }
func (kw killWorld) cells() int  { return min(kw.events(), 1_000_000) }

func (kw killWorld) name() string {
	s := "snapshots=never"
	if kw.every >= 0 {
		s = "snapshots=every-" + strconv.Itoa(kw.every)
	}
	return fmt.Sprintf("records=%d/%s", kw.records, s)
}

// config is what the world runs with, in the child and when reopened.
func (kw killWorld) config() kernel.Config {
	c := kernel.Config{Builtins: testBuiltins(), SnapshotEvery: kw.every}
	if kw.every < 0 {
		c.SnapshotInterval = -1
	}
	return c
}

// builtWorld is a killWorld on disk, as the SIGKILL left it, and what the
// child said about building it.
type builtWorld struct {
	kw      killWorld
	dir     string  // never opened after the kill: each run opens a copy
	height  uint64  // journal height when the child had submitted every event
	seconds float64 // how long submitting them took
	cpu     float64 // the child's CPU seconds meanwhile (0: a world built before it was reported)
	snaps   int     // automatic snapshots the child took meanwhile
	// their loop pauses and durations (median and longest)
	pauseMedian, pauseMax, durMedian, durMax time.Duration
}

// liveRate is the child's ingest rate: records journaled per second while
// it built the world, automatic snapshots included.
func (bw *builtWorld) liveRate() float64 { return float64(bw.height) / bw.seconds }

// BenchmarkOpenAfterKill measures kernel.Open on a world of counter cells
// that a child process was building when it was SIGKILLed, split into
// Badger's open (its own crash recovery included), loading the latest
// snapshot (kernel.Open up to the start of replay: finding, reading and
// restoring it, and creating the world's wasm engine) and replaying the
// tail after the snapshot's checkpoint. open=genesis opens the same
// journal with Config.FromGenesis and reports the replay rate against the
// child's live ingest rate, as a ratio; open=genesis-bgmaterialize does
// too with Config.MaterializeInBackground, so replay writes cell slices
// off the loop the way the live world's snapshots did.
//
// Every run opens a fresh copy of the killed directory, synced (neither is
// timed; the files stay in the page cache as far as memory allows, as
// after a process crash rather than a machine's). The worlds are
// 1,000,000 records with automatic snapshots every 50,000 records (the
// default) and without snapshots; AOS_BENCH_RECORDS=n1,n2 sets the sizes
// (10,000,000 takes 5-8 minutes to build, 8 GB on disk, and 7 minutes to
// replay from genesis). AOS_BENCH_DIR=dir keeps the built worlds there,
// so later runs reuse them. AOS_BENCH_CHILD_CPUPROFILE=file profiles the
// child while it builds (select one world). Run a world's runs in one
// invocation:
//
//	go test ./kernel -run '^$' -bench OpenAfterKill -benchtime 5x -timeout 60m
//	AOS_BENCH_RECORDS=10000000 go test ./kernel -run '^$' -bench 'OpenAfterKill/records=10000000/snapshots=every/open=latest' -benchtime 5x -timeout 60m
func BenchmarkOpenAfterKill(b *testing.B) {
	sizes := []int{1_000_000}
	if v := os.Getenv("AOS_BENCH_RECORDS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 2 {
				b.Fatalf("AOS_BENCH_RECORDS=%q: want record counts (at least 2) separated by commas", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		for _, every := range []int{kernel.DefaultSnapshotEvery, -1} {
			kw := killWorld{records: n, every: every}
			b.Run(kw.name(), func(b *testing.B) {
				bw := buildKilledWorld(b, kw)
				b.Run("open=latest", func(b *testing.B) { benchOpen(b, bw, openMode{}) })
				if every >= 0 { // without snapshots, open=latest is from genesis already
					b.Run("open=genesis", func(b *testing.B) { benchOpen(b, bw, openMode{genesis: true}) })
				}
				b.Run("open=genesis-bgmaterialize", func(b *testing.B) { benchOpen(b, bw, openMode{genesis: true, background: true}) })
			})
		}
	}
}

// openRun is one timed kernel.Open.
type openRun struct {
	badger, load, replay, total time.Duration
	replayCPU                   time.Duration // the process's CPU time (user and system) while it replayed
	replayFaults                int64         // the process's major page faults (reads from disk) while it replayed
	info                        kernel.OpenInfo
}

// openMode is how a benchmark opens the killed world: from genesis
// (Config.FromGenesis) or not, and with Config.MaterializeInBackground.
type openMode struct{ genesis, background bool }

func benchOpen(b *testing.B, bw *builtWorld, mode openMode) {
	b.Logf("built: height %d in %.1f s (%.0f records/s live, %.2f cores busy); %d automatic snapshots, loop pause median %v max %v, duration median %v max %v",
		bw.height, bw.seconds, bw.liveRate(), bw.cpu/bw.seconds, bw.snaps, bw.pauseMedian.Round(time.Microsecond), bw.pauseMax.Round(time.Microsecond),
		bw.durMedian.Round(time.Millisecond), bw.durMax.Round(time.Millisecond))
	var runs []openRun
	for b.Loop() {
		b.StopTimer()
		dir, err := os.MkdirTemp(b.TempDir(), "run")
		if err != nil {
			b.Fatal(err)
		}
		copyWorld(b, bw.dir, dir)
		syscall.Sync() // the copy's dirty pages are written back before, not during, the open
		b.StartTimer()
		r, w := openTimed(b, dir, bw.kw, mode)
		b.StopTimer()
		checkOpenedAfterKill(b, bw, w, r.info, mode.genesis)
		if cs, err := w.CellStats(context.Background()); err == nil {
			for _, c := range cs {
				b.Logf("%s after open: %d cell reads from memory, %d from the index; %d cells prefetched", c.Workflow, c.Stats.CacheHits, c.Stats.CacheMisses, c.Stats.Prefetched)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(dir)
		runs = append(runs, r)
		b.Logf("open %v = badger %v + snapshot load %v + replay %v of %d records (snapshot record %d, checkpoint %d; %.2f cores busy, %d major page faults) + %v after",
			r.total.Round(time.Millisecond), r.badger.Round(time.Millisecond), r.load.Round(time.Millisecond),
			r.replay.Round(time.Millisecond), r.info.Replayed, r.info.Snapshot, r.info.Checkpoint,
			r.replayCPU.Seconds()/r.replay.Seconds(), r.replayFaults, (r.total - r.badger - r.load - r.replay).Round(time.Millisecond))
		b.StartTimer()
	}
	ms := func(f func(openRun) time.Duration) []float64 {
		out := make([]float64, len(runs))
		for i, r := range runs {
			out[i] = float64(f(r)) / 1e6
		}
		return out
	}
	total := ms(func(r openRun) time.Duration { return r.total })
	b.ReportMetric(median(total), "open-ms")
	b.ReportMetric(slices.Min(total), "open-ms-min")
	b.ReportMetric(slices.Max(total), "open-ms-max")
	b.ReportMetric(median(ms(func(r openRun) time.Duration { return r.badger })), "badger-ms")
	b.ReportMetric(median(ms(func(r openRun) time.Duration { return r.load })), "load-ms")
	b.ReportMetric(median(ms(func(r openRun) time.Duration { return r.replay })), "replay-ms")
	replayed := make([]float64, len(runs))
	rates := make([]float64, len(runs))
	for i, r := range runs {
		replayed[i] = float64(r.info.Replayed)
		rates[i] = float64(r.info.Replayed) / r.replay.Seconds()
	}
	b.ReportMetric(median(replayed), "replayed-records")
	b.ReportMetric(median(ms(func(r openRun) time.Duration { return r.replayCPU }))/median(ms(func(r openRun) time.Duration { return r.replay })), "replay-cores")
	if runs[0].info.Snapshot == 0 { // the whole journal: comparable with the live rate
		b.ReportMetric(median(rates), "replay-records/s")
		b.ReportMetric(bw.liveRate(), "live-records/s")
		b.ReportMetric(median(rates)/bw.liveRate(), "replay/live")
		if bw.cpu > 0 {
			// CPU per record, replay over live: what the ratio of rates
			// would be if both had the machine's cores to themselves, or
			// shared them with the same load (below 1: replay does less).
			cpu := median(ms(func(r openRun) time.Duration { return r.replayCPU })) / 1e3
			b.ReportMetric((cpu/median(replayed))/(bw.cpu/float64(bw.height)), "replay/live-cpu-per-record")
		}
	}
}

// copyWorld copies a world directory with cp, which keeps files sparse:
// Badger preallocates its value log (2 GiB) and memtable files, and a copy
// that wrote their holes out (os.CopyFS does) would time the page cache
// writing gigabytes of zeros back, not the open.
func copyWorld(b *testing.B, from, to string) {
	if out, err := exec.Command("cp", "-a", "--sparse=always", from+"/.", to).CombinedOutput(); err != nil {
		b.Fatalf("copy the killed world: %v: %s", err, out)
	}
}

// openTimed opens the world in dir, timing Badger's open, the snapshot
// load and the replay apart. The caller closes the world and its store
// (Close on the returned world does both).
func openTimed(b *testing.B, dir string, kw killWorld, mode openMode) (openRun, *dirWorld) {
	var ph openPhases
	cfg := kw.config()
	cfg.FromGenesis, cfg.MaterializeInBackground = mode.genesis, mode.background
	cfg.Progress = ph.start
	t0 := time.Now()
	db, err := worldstore.Open(dir)
	if err != nil {
		b.Fatalf("badger open after SIGKILL: %v", err)
	}
	t1 := time.Now()
	w, err := kernel.Open(db.Stores(), cfg)
	if err != nil {
		db.Close()
		b.Fatalf("kernel open after SIGKILL: %v", err)
	}
	t2 := time.Now()
	if ph.started.IsZero() || ph.finished.IsZero() {
		b.Fatal("kernel.Open did not report its replay through Config.Progress")
	}
	return openRun{badger: t1.Sub(t0), load: ph.started.Sub(t1), replay: ph.finished.Sub(ph.started), total: t2.Sub(t0),
		replayCPU: ph.cpuFinished - ph.cpuStarted, replayFaults: ph.faultsFinished - ph.faultsStarted, info: w.OpenInfo()}, &dirWorld{World: w, db: db}
}

// openPhases is a Config.Progress that notes when replay starts and ends,
// and the process's CPU time then: kernel.Open starts its "replay" bar once
// the snapshot is restored.
type openPhases struct {
	started, finished             time.Time
	cpuStarted, cpuFinished       time.Duration
	faultsStarted, faultsFinished int64
}

func (p *openPhases) start(label string, _ uint64) kernel.ProgressBar {
	if label == "replay" {
		p.started = time.Now()
		p.cpuStarted, p.faultsStarted = processCPU()
	}
	return p
}
func (*openPhases) Add(uint64) {}
func (p *openPhases) Finish() {
	p.finished = time.Now()
	p.cpuFinished, p.faultsFinished = processCPU()
}

// processCPU is the CPU time this process has used, user and system, all
// threads, and its major page faults: over a replay they say how much of
// the machine's cores the replay kept busy (its loop, the read-ahead, the
// drains, Badger's compactions, the garbage collector), and how often it
// waited for the disk (a page of a memory-mapped Badger file the kernel had
// evicted from its page cache).
func processCPU() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Majflt
}

// checkOpenedAfterKill: the world holds every cell, its height is the journal's,
// and replay started where it should have.
func checkOpenedAfterKill(b *testing.B, bw *builtWorld, w *dirWorld, info kernel.OpenInfo, genesis bool) {
	s, err := w.Status(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if got := s.Cells["com.test/counter@1"]; got != bw.kw.cells() {
		b.Fatalf("reopened with %d counter cells, want %d", got, bw.kw.cells())
	}
	if s.JournalHeight < bw.height {
		b.Fatalf("reopened at height %d, below the %d the child had reached", s.JournalHeight, bw.height)
	}
	switch {
	case len(info.Skipped) > 0:
		b.Fatalf("snapshots skipped at open: %v", info.Skipped)
	case (genesis || bw.kw.every < 0) && info.Snapshot > 0:
		b.Fatalf("opened from snapshot record %d, want from genesis", info.Snapshot)
	case !genesis && bw.snaps > 0 && info.Snapshot == 0:
		b.Fatalf("opened from genesis, but %d snapshots were durable before the kill", bw.snaps)
	case info.Checkpoint+info.Replayed != s.JournalHeight:
		b.Fatalf("replayed %d records after checkpoint %d, but the journal ends at %d", info.Replayed, info.Checkpoint, s.JournalHeight)
	}
}

// buildKilledWorld builds kw in a child process and SIGKILLs it once it has
// submitted every event (it goes on submitting until killed).
func buildKilledWorld(b *testing.B, kw killWorld) *builtWorld {
	root := b.TempDir()
	if d := os.Getenv("AOS_BENCH_DIR"); d != "" {
		root = filepath.Join(d, strings.ReplaceAll(kw.name(), "/", "-"))
		if line, err := os.ReadFile(filepath.Join(root, "built.txt")); err == nil {
			bw, err := parseBuilt(string(line))
			if err != nil {
				b.Fatalf("%s: %v", root, err)
			}
			bw.kw, bw.dir = kw, filepath.Join(root, "world")
			b.Logf("reusing the world killed in %s", root)
			return bw
		}
		if err := os.RemoveAll(root); err != nil { // a build that did not finish
			b.Fatal(err)
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	man := filepath.Join(root, "manifest.json")
	if err := os.WriteFile(man, []byte(counterManifest), 0o644); err != nil {
		b.Fatal(err)
	}
	world := filepath.Join(root, "world")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenAfterKillChild$", "-test.v=false", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "AOS_BENCH_CHILD_WORLD="+world, "AOS_BENCH_CHILD_MANIFEST="+man,
		"AOS_BENCH_CHILD_RECORDS="+strconv.Itoa(kw.records), "AOS_BENCH_CHILD_EVERY="+strconv.Itoa(kw.every))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var built string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "BUILT ") {
			built = sc.Text()
			break
		}
	}
	// The child is still submitting: this is the crash.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	_ = cmd.Wait()
	if built == "" {
		b.Fatal("the child ended without building the world (its stderr is above)")
	}
	bw, err := parseBuilt(built)
	if err != nil {
		b.Fatal(err)
	}
	bw.kw, bw.dir = kw, world
	if os.Getenv("AOS_BENCH_DIR") != "" {
		if err := os.WriteFile(filepath.Join(root, "built.txt"), []byte(built), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return bw
}

// builtFormat is the child's report: height, seconds, snapshots, then the
// snapshots' pause median and max and duration median and max, in ns. The
// child then appends builtCPU (older reports lack it).
const builtFormat = "BUILT height=%d seconds=%g snapshots=%d pause_ns=%d/%d duration_ns=%d/%d"

// builtCPU is the child's CPU seconds while it submitted the events.
const builtCPU = " cpu_s=%g"

func parseBuilt(line string) (*builtWorld, error) {
	bw := &builtWorld{}
	if _, err := fmt.Sscanf(strings.TrimSpace(line), builtFormat, &bw.height, &bw.seconds, &bw.snaps,
		&bw.pauseMedian, &bw.pauseMax, &bw.durMedian, &bw.durMax); err != nil {
		return nil, fmt.Errorf("the child's report %q: %w", line, err)
	}
	if i := strings.Index(line, " cpu_s="); i >= 0 {
		if _, err := fmt.Sscanf(strings.TrimSpace(line[i:]), strings.TrimSpace(builtCPU), &bw.cpu); err != nil {
			return nil, fmt.Errorf("the child's report %q: %w", line, err)
		}
	}
	return bw, nil
}

// TestOpenAfterKillChild is BenchmarkOpenAfterKill's child process: it
// builds the world, prints BUILT with what it measured, and goes on
// submitting until it is killed.
func TestOpenAfterKillChild(t *testing.T) {
	world := os.Getenv("AOS_BENCH_CHILD_WORLD")
	if world == "" {
		t.Skip("the child process of BenchmarkOpenAfterKill")
	}
	records, err1 := strconv.Atoi(os.Getenv("AOS_BENCH_CHILD_RECORDS"))
	every, err2 := strconv.Atoi(os.Getenv("AOS_BENCH_CHILD_EVERY"))
	if err1 != nil || err2 != nil {
		t.Fatalf("child: AOS_BENCH_CHILD_RECORDS or AOS_BENCH_CHILD_EVERY: %v %v", err1, err2)
	}
	kw := killWorld{records: records, every: every}
	var obs snapshotStats
	cfg := kw.config()
	cfg.Clock, cfg.Entropy, cfg.Observer = &stepClock{}, newEntropy(1), &obs
	w, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("child open: %v", err)
	}
	m, err := manifest.Load(os.Getenv("AOS_BENCH_CHILD_MANIFEST"))
	if err != nil {
		t.Fatalf("child manifest: %v", err)
	}
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		t.Fatalf("child apply: %v", err)
	}
	if p := os.Getenv("AOS_BENCH_CHILD_CPUPROFILE"); p != "" {
		// The child is killed, so its profile must be written before.
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	cpu0, _ := processCPU()
	if err := feedCounter(w.World, 0, kw.events(), kw.cells()); err != nil {
		t.Fatalf("child: %v", err)
	}
	el := time.Since(start)
	pprof.StopCPUProfile()
	n, pm, px, dm, dx := obs.summary()
	cpu1, _ := processCPU()
	fmt.Printf(builtFormat+builtCPU+"\n", w.Journal().Height(), el.Seconds(), n, pm, px, dm, dx, (cpu1 - cpu0).Seconds())
	err = feedCounter(w.World, kw.events(), math.MaxInt, kw.cells())
	t.Fatalf("child: stopped submitting before it was killed: %v", err)
}

// snapshotStats keeps the loop pause and duration of every snapshot a
// world takes.
type snapshotStats struct {
	flushStats
	mu           sync.Mutex
	pauses, durs []float64
}

func (s *snapshotStats) Snapshotted(pause, total time.Duration, _ int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pauses = append(s.pauses, float64(pause))
	s.durs = append(s.durs, float64(total))
}

// summary: how many, then median and longest pause and duration, in ns.
func (s *snapshotStats) summary() (n int, pauseMedian, pauseMax, durMedian, durMax int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pauses) == 0 {
		return 0, 0, 0, 0, 0
	}
	return len(s.pauses), int64(median(s.pauses)), int64(slices.Max(s.pauses)), int64(median(s.durs)), int64(slices.Max(s.durs))
}

// feedCounter submits counter events from..to-1, event i bumping cell
// "cell-<i mod cells>" by 1, from four clients sending batches of 1,000
// (like submitCounterCells). Bumps by 1 keep every count below 10 while
// each cell gets fewer than ten events, so no Total event follows: two
// records per event.
func feedCounter(w *kernel.World, from, to, cells int) error {
	const batch = 1000
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	next := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]kernel.Event, 0, batch)
			for start := range next {
				evs = evs[:0]
				for i := start; i < min(start+batch, to); i++ {
					evs = append(evs, kernel.Event{Schema: "com.test/CountEvent@1", JSON: fmt.Appendf(nil, `{"key":"cell-%07d","by":1}`, i%cells)})
				}
				if _, err := w.Submit(context.Background(), evs...); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	for i := from; i < to && failed.Load() == nil; i += batch {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := failed.Load(); err != nil {
		return fmt.Errorf("submit counter events: %w", *err)
	}
	return nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkSnapshotDirtyCells: a snapshot of 100,000 dirty cells in a
// 1,000,000-cell world on Badger. The world is built through the kernel
// (~1 minute) without automatic snapshots, snapshotted once so every cell
// is in the index, and reopened with Config.MaterializeAt above 100,000,
// so the kernel drains nothing by itself. Each run then bumps 100,000 cells (untimed) and takes
// World.Snapshot (timed), checking it materialized exactly those.
// Reported: SnapshotResult.Duration (checkpoint to durable record) and
// .Pause (what the loop spent at the checkpoint), and the longest a query
// issued every millisecond to the loop (World.Cell of a cached cell) took
// while the snapshot was being written: what a client saw of the loop. A
// query is answered once the records before it are durable, so the
// longest journal commit meanwhile is reported too.
// Keep -benchtime under 80x (each cell must stay below ten bumps).
// AOS_BENCH_CELLS=n builds a smaller world (n/10 dirty) to try it out.
//
//	go test ./kernel -run '^$' -bench SnapshotDirtyCells -benchtime 5x -timeout 30m
func BenchmarkSnapshotDirtyCells(b *testing.B) {
	cellsN := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("AOS_BENCH_CELLS")); err == nil && n >= 1000 {
		cellsN = n // a smaller world, to try the benchmark out
	}
	dirty := cellsN / 10
	noAuto := func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	h := newHarnessWith(b, 23, true, func(h *harness) { h.extra = noAuto })
	mustApply(b, h, counterManifest)
	t0 := time.Now()
	if err := feedCounter(h.w, 0, cellsN, cellsN); err != nil {
		b.Fatal(err)
	}
	first, err := h.w.Snapshot(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d cells in %v; first explicit snapshot: %d dirty, %v (pause %v)", cellsN,
		time.Since(t0).Round(time.Second), first.Dirty, first.Duration.Round(time.Millisecond), first.Pause.Round(time.Microsecond))
	var commits slowestCommit
	h.extra = func(c *kernel.Config) { noAuto(c); c.MaterializeAt, c.Observer = 2*dirty, &commits }
	h.reopen()
	probeKey := schemas.MustMarshal("cell-0000000")
	var durs, pauses, stalls, syncs []float64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		from := (i * dirty) % cellsN
		if err := feedCounter(h.w, from, from+dirty, cellsN); err != nil {
			b.Fatal(err)
		}
		probe := probeLoop(h.w, probeKey)
		commits.slowest.Store(0)
		b.StartTimer()
		res, err := h.w.Snapshot(context.Background())
		b.StopTimer()
		maxStall, perr := probe()
		maxCommit := time.Duration(commits.slowest.Load())
		if err != nil {
			b.Fatal(err)
		}
		if perr != nil {
			b.Fatalf("loop query during the snapshot: %v", perr)
		}
		if res.Dirty != dirty || res.Cells != uint64(cellsN) {
			b.Fatalf("snapshot of %d dirty cells out of %d, want %d of %d", res.Dirty, res.Cells, dirty, cellsN)
		}
		durs = append(durs, float64(res.Duration)/1e6)
		pauses = append(pauses, float64(res.Pause)/1e6)
		stalls = append(stalls, float64(maxStall)/1e6)
		syncs = append(syncs, float64(maxCommit)/1e6)
		b.Logf("snapshot of %d dirty cells: %v, loop pause %v, slowest loop query meanwhile %v, slowest commit %v, object %d bytes",
			res.Dirty, res.Duration.Round(time.Millisecond), res.Pause.Round(time.Microsecond), maxStall.Round(time.Microsecond),
			maxCommit.Round(time.Microsecond), res.Bytes)
		b.StartTimer()
	}
	b.ReportMetric(median(durs), "duration-ms")
	b.ReportMetric(slices.Max(durs), "duration-ms-max")
	b.ReportMetric(median(pauses), "pause-ms")
	b.ReportMetric(slices.Max(pauses), "pause-ms-max")
	b.ReportMetric(slices.Max(stalls), "query-ms-max")
	b.ReportMetric(slices.Max(syncs), "commit-ms-max")
}

// slowestCommit records the longest journal commit (group commit: one
// Badger write and sync) since it was last reset.
type slowestCommit struct {
	flushStats
	slowest atomic.Int64
}

func (c *slowestCommit) Flushed(_ int, d time.Duration, _ error) {
	for {
		p := c.slowest.Load()
		if int64(d) <= p || c.slowest.CompareAndSwap(p, int64(d)) {
			return
		}
	}
}

// probeLoop asks the loop for one cell every millisecond until the
// returned function is called, which returns the longest answer (or the
// first error).
func probeLoop(w *kernel.World, key []byte) func() (time.Duration, error) {
	stop := make(chan struct{})
	type result struct {
		worst time.Duration
		err   error
	}
	done := make(chan result)
	go func() {
		var r result
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- r
				return
			case <-t.C:
				if r.err != nil {
					continue
				}
				t0 := time.Now()
				_, r.err = w.Cell(context.Background(), "com.test/counter@1", key)
				r.worst = max(r.worst, time.Since(t0))
			}
		}
	}()
	return func() (time.Duration, error) {
		close(stop)
		r := <-done
		return r.worst, r.err
	}
}
