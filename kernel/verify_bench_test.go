package kernel_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
)

// BenchmarkVerifyMemory measures kernel.Verify (`aosd replay --verify`:
// a replay from genesis recomputing every journaled snapshot, then one from
// the latest snapshot) over the counter worlds BenchmarkOpenAfterKill
// builds (AOS_BENCH_RECORDS and AOS_BENCH_DIR as there; 1,000,000 records
// with a snapshot every 50,000 by default). Each run verifies a fresh copy
// of the killed world in a child process and reports that process's peak
// resident memory (VmHWM) after it opened the world and took its state, and
// after the verification, and the verification's time and rate. It checks
// that the verification passed and replayed the whole journal, so a figure
// never comes from a verification that stopped early.
// AOS_VERIFY_HEAPPROFILE=file writes the child's heap profile when the
// replay from genesis is 90% through.
//
//	go test ./kernel -run '^$' -bench VerifyMemory -benchtime 1x -timeout 60m
//	AOS_BENCH_RECORDS=10000000 AOS_BENCH_DIR=/tmp/w go test ./kernel -run '^$' -bench VerifyMemory -benchtime 1x -timeout 120m
func BenchmarkVerifyMemory(b *testing.B) {
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
		kw := killWorld{records: n, every: kernel.DefaultSnapshotEvery}
		b.Run(kw.name(), func(b *testing.B) {
			bw := buildKilledWorld(b, kw)
			var peak, opened, secs, anon, file []float64
			for b.Loop() {
				b.StopTimer()
				dir, err := os.MkdirTemp(b.TempDir(), "run")
				if err != nil {
					b.Fatal(err)
				}
				copyWorld(b, bw.dir, dir)
				b.StartTimer()
				r := verifyInChild(b, dir, kw)
				b.StopTimer()
				os.RemoveAll(dir)
				if !r.ok || r.replayed < bw.height {
					b.Fatalf("verification failed or fell short: %+v (the world's height is at least %d)", r, bw.height)
				}
				b.Logf("verified height %d (genesis run replayed %d records, %d snapshots recomputed) in %.1f s (%.0f records/s); peak RSS %.0f MB after open, %.0f MB after verify; during it, peak anonymous %.0f MB, peak file-backed %.0f MB",
					r.height, r.replayed, r.snapshots, r.seconds, float64(r.replayed)/r.seconds, r.openedMB, r.peakMB, r.anonMB, r.fileMB)
				peak, opened, secs = append(peak, r.peakMB), append(opened, r.openedMB), append(secs, r.seconds)
				anon, file = append(anon, r.anonMB), append(file, r.fileMB)
				b.StartTimer()
			}
			b.ReportMetric(median(peak), "peak-rss-MB")
			b.ReportMetric(median(opened), "opened-rss-MB")
			b.ReportMetric(median(anon), "peak-anon-MB")
			b.ReportMetric(median(file), "peak-file-MB")
			b.ReportMetric(median(secs), "verify-s")
			b.ReportMetric(float64(bw.height)/median(secs), "records/s")
		})
	}
}

// verified is the child's report.
type verified struct {
	ok               bool
	height, replayed uint64
	snapshots        int
	seconds          float64
	openedMB, peakMB float64
	anonMB, fileMB   float64 // peaks during the verification, sampled
}

const verifiedFormat = "VERIFIED ok=%t height=%d replayed=%d snapshots=%d seconds=%g opened_mb=%g peak_mb=%g peak_anon_mb=%g peak_file_mb=%g"

func verifyInChild(b *testing.B, dir string, kw killWorld) verified {
	cmd := exec.Command(os.Args[0], "-test.run=^TestVerifyMemoryChild$", "-test.v=false", "-test.timeout=0")
	cmd.Env = append(os.Environ(), "AOS_VERIFY_CHILD_WORLD="+dir, "AOS_VERIFY_CHILD_EVERY="+strconv.Itoa(kw.every))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var r verified
	var found bool
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VERIFIED ") {
			if _, err := fmt.Sscanf(sc.Text(), verifiedFormat, &r.ok, &r.height, &r.replayed, &r.snapshots, &r.seconds, &r.openedMB, &r.peakMB, &r.anonMB, &r.fileMB); err != nil {
				b.Fatalf("the child's report %q: %v", sc.Text(), err)
			}
			found = true
		}
	}
	if err := cmd.Wait(); err != nil || !found {
		b.Fatalf("the verifying child failed (its stderr is above): %v", err)
	}
	return r
}

// peakRSSMB is this process's peak resident set (VmHWM), in MB.
func peakRSSMB() float64 { return procStatusMB("VmHWM:") }

// procStatusMB is a field of /proc/self/status, in MB: VmHWM (the peak
// resident set), RssAnon (resident anonymous memory: the heap, stacks) or
// RssFile (resident pages of mapped files: Badger's memory-mapped tables
// and value log, which the page cache holds and the kernel may reclaim).
func procStatusMB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// rssSampler samples RssAnon and RssFile every 50 ms and keeps their
// peaks: VmHWM counts both, and only the anonymous part is the process's
// own memory.
type rssSampler struct {
	stop       chan struct{}
	done       chan struct{}
	anon, file float64
}

func sampleRSS() *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			s.anon, s.file = max(s.anon, procStatusMB("RssAnon:")), max(s.file, procStatusMB("RssFile:"))
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) peaks() (anon, file float64) {
	close(s.stop)
	<-s.done
	return s.anon, s.file
}

// TestVerifyMemoryChild is BenchmarkVerifyMemory's child: it opens the
// world, takes its state and verifies it.
func TestVerifyMemoryChild(t *testing.T) {
	dir := os.Getenv("AOS_VERIFY_CHILD_WORLD")
	if dir == "" {
		t.Skip("the child process of BenchmarkVerifyMemory")
	}
	every, err := strconv.Atoi(os.Getenv("AOS_VERIFY_CHILD_EVERY"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := killWorld{every: every}.config()
	w, err := openDir(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	live, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	opened := peakRSSMB()
	vcfg := cfg
	if p := os.Getenv("AOS_VERIFY_HEAPPROFILE"); p != "" {
		vcfg.Progress = func(label string, total uint64) kernel.ProgressBar {
			return &profileAt{path: p, at: total * 9 / 10, on: label == "verify from genesis"}
		}
	}
	smp := sampleRSS()
	t0 := time.Now()
	rep, err := kernel.Verify(ctx, w.db.Stores(), vcfg, live)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	anon, file := smp.peaks()
	if !rep.OK {
		t.Errorf("verify: %+v", rep)
	}
	g := rep.Runs[0]
	fmt.Printf(verifiedFormat+"\n", rep.OK, rep.Height, g.Opened.Replayed, g.Verified, el.Seconds(), opened, peakRSSMB(), anon, file)
}

// profileAt writes a heap profile once its bar has advanced at steps.
type profileAt struct {
	path string
	at   uint64
	on   bool
	n    atomic.Uint64
}

func (p *profileAt) Add(n uint64) {
	if p.on && p.n.Add(n) >= p.at && p.n.Load()-n < p.at {
		if f, err := os.Create(p.path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}
func (*profileAt) Finish() {}
