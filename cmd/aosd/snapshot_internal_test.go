package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/internal/progress"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/storefault"
)

// TestSnapshotNotIdleExits3: `aosd snapshot` against a daemon whose world
// is still writing a snapshot exits 3 and prints the blocker. The daemon
// is this test's own HTTP server over a world whose store holds the first
// snapshot's object write, so the second snapshot is refused
// deterministically.
func TestSnapshotNotIdleExits3(t *testing.T) {
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	gate := storefault.NewGate(storefault.CASPut) // holds the first snapshot's object write
	store := &storefault.CAS{Store: cas.NewMemory(), BeforeWrite: gate.Hook}
	w, err := kernel.Open(kernel.Stores{CAS: store, Journal: journal.NewMemory()}, kernel.Config{SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: tok}).Handler())
	defer hs.Close()
	if err := dir.WriteDaemonInfo(host.DaemonInfo{Addr: strings.TrimPrefix(hs.URL, "http://"), PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}

	defer gate.Open() // first of the deferred: a failing test must not leave the snapshot held
	gate.Arm()
	first := make(chan error, 1)
	go func() {
		_, err := w.Snapshot(context.Background())
		first <- err
	}()
	<-gate.Entered()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"snapshot", "--world", string(dir)}, nil, &out, &errb)
	if code != exitNotQuiet || !strings.Contains(errb.String(), "the snapshot of checkpoint 2 is still being written") {
		t.Errorf("snapshot while one is written: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
	gate.Open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"snapshot", "--world", string(dir)}, nil, &out, &errb); code != exitOK ||
		!strings.Contains(out.String(), "the state after checkpoint 4") {
		t.Errorf("snapshot once idle: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
}

// TestSnapshotPolicyValues: AOS_SNAPSHOT_EVERY and AOS_SNAPSHOT_INTERVAL
// map to the kernel's settings (unset: its default; 0 or less: never) and
// anything else is a usage error naming the variable.
func TestSnapshotPolicyValues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", 0}, {"1000", 1000}, {"0", -1}, {"-5", -1}} {
		if n, err := snapshotEvery(c.in); n != c.want || err != nil {
			t.Errorf("%s=%q: %d %v, want %d", envSnapEvery, c.in, n, err, c.want)
		}
	}
	for _, c := range []struct {
		in   string
		want time.Duration
	}{{"", 0}, {"90s", 90 * time.Second}, {"0", -1}, {"0s", -1}, {"-1m", -1}} {
		if d, err := snapshotInterval(c.in); d != c.want || err != nil {
			t.Errorf("%s=%q: %v %v, want %v", envSnapTime, c.in, d, err, c.want)
		}
	}
	var ue *usageError
	if _, err := snapshotEvery("lots"); !errors.As(err, &ue) || !strings.Contains(err.Error(), envSnapEvery) {
		t.Errorf("%s=lots: %v, want a usage error naming it", envSnapEvery, err)
	}
	if _, err := snapshotInterval("5"); !errors.As(err, &ue) || !strings.Contains(err.Error(), envSnapTime) {
		t.Errorf("%s=5: %v, want a usage error naming it", envSnapTime, err)
	}
	t.Setenv(envSnapEvery, "7")
	t.Setenv(envSnapTime, "0")
	if cfg, err := envConfig(); err != nil || cfg.SnapshotEvery != 7 || cfg.SnapshotInterval != -1 {
		t.Errorf("envConfig: every %d interval %v, %v", cfg.SnapshotEvery, cfg.SnapshotInterval, err)
	}
}

// TestKernelBarsThreshold: the kernel's bars are drawn from least steps
// on, never for nothing to do.
func TestKernelBarsThreshold(t *testing.T) {
	var buf bytes.Buffer
	p := kernelBars(progress.New(&buf, true), 10)
	for _, total := range []uint64{0, 9} {
		b := p("replay", total)
		b.Add(total)
		b.Finish()
	}
	if buf.Len() != 0 {
		t.Fatalf("bars under the threshold drew %q", buf.String())
	}
	b := p("replay", 10)
	b.Add(10)
	b.Finish()
	if !strings.Contains(buf.String(), "replay") || !strings.Contains(buf.String(), "10 / 10") {
		t.Fatalf("a bar at the threshold drew %q", buf.String())
	}
}
