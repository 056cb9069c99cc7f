package kernel_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/schemas"
)

// The hostile guest (testdata/guests/hostile) is built once per test binary
// from source, with the flags `aosd build` uses.
var hostile struct {
	once  sync.Once
	dir   string // holds hostile.wasm and the compilation cache
	bytes []byte
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hostile.dir != "" {
		os.RemoveAll(hostile.dir)
	}
	os.Exit(code)
}

func hostileGuest(t testing.TB) (wasmPath string, cacheDir string) {
	t.Helper()
	hostile.once.Do(func() {
		dir, err := os.MkdirTemp("", "aos-kernel-guest-")
		if err != nil {
			hostile.err = err
			return
		}
		hostile.dir = dir
		out := filepath.Join(dir, "hostile.wasm")
		if err := build.Package(context.Background(), "", "./testdata/guests/hostile", out); err != nil {
			hostile.err = err
			return
		}
		hostile.bytes, hostile.err = os.ReadFile(out)
	})
	if hostile.err != nil {
		t.Fatal(hostile.err)
	}
	return filepath.Join(hostile.dir, "hostile.wasm"), filepath.Join(hostile.dir, "cache")
}

const hostileManifest = `[
 {"$kind":"defschema","name":"test/HostileEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/HostileState@1","schema":{"type":"object","properties":{"calls":{"type":"integer"},"global":{"type":"integer"},"note":{"type":"string"}},"required":["calls","global"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"test/hostile_mod@1","runtime":{"kind":"wasm","artifact":"hostile.wasm","hash":"%s","max_memory_mib":64}},
 {"$kind":"defworkflow","name":"test/hostile@1","state":"test/HostileState@1","event":"test/HostileEvent@1","key_schema":"test/Key@1","effects_emitted":[],"impl":{"module":"test/hostile_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"test/hostile","routing":{"subscriptions":[{"event":"test/HostileEvent@1","workflow":"test/hostile@1","key_field":"key"}]}}
]`

// hostileManifestDir writes the hostile world's manifest beside a copy of
// the guest and returns the directory.
func hostileManifestDir(t testing.TB) string {
	t.Helper()
	wasmPath, _ := hostileGuest(t)
	dir := t.TempDir()
	b, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostile.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(hostileManifest, schemas.HashBytes(b))
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hostileEvent(key, act string) kernel.Event {
	return kernel.Event{Schema: "test/HostileEvent@1", JSON: []byte(fmt.Sprintf(`{"key":%q,"act":%q}`, key, act))}
}

type hostileState struct {
	Calls  uint64 `cbor:"calls" json:"calls"`
	Global uint64 `cbor:"global" json:"global"`
	Note   string `cbor:"note,omitempty" json:"note,omitempty"`
}

func hostileCell(t testing.TB, w *kernel.World, key string) (*kernel.CellView, hostileState) {
	t.Helper()
	v, err := w.Cell(context.Background(), "test/hostile@1", schemas.MustMarshal(key))
	if err != nil {
		t.Fatal(err)
	}
	var s hostileState
	if v.State != nil && stateJSON(v) != "null" {
		if err := schemas.UnmarshalTrusted(v.State, &s); err != nil {
			t.Fatalf("state %s: %v", stateJSON(v), err)
		}
	}
	return v, s
}

// TestWasmHostileGuestsContained: a guest that asks for randomness, opens a
// file, sleeps, loops forever, allocates without bound, traps, exits or
// returns too much fails only its own instance, with a journaled reason that
// says what it did; the world goes on serving, the next step starts on a
// fresh instance, and a reopened world replays all of it (adopting the one
// environmental fault, the wall-clock stop). A guest that reads the wall
// clock gets the frozen stand-in, never the host's time (Go's own garbage
// collector reads that clock, so reading it cannot be a fault).
func TestWasmHostileGuestsContained(t *testing.T) {
	dir := hostileManifestDir(t)
	_, cache := hostileGuest(t)
	engine := wasmtest.Engine(t, cache)
	// No wall-clock limit, except for the one case about it: no outcome
	// here may depend on how fast the machine is.
	timeout := time.Duration(-1)
	h := newHarnessWith(t, 11, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.Wasm = engine; c.StepTimeout = timeout }
	})
	applyDir(t, h, dir)

	if _, err := h.w.Submit(context.Background(), hostileEvent("clock", "clock")); err != nil {
		t.Fatal(err)
	}
	cv, cs := hostileCell(t, h.w, "clock")
	if cv.Status != kernel.StatusCompleted || !strings.HasPrefix(cs.Note, "2020-01-01 00:00:00 +0000 UTC") {
		t.Fatalf("a guest reading the clock: %s, note %q; want the frozen stand-in", cv.Status, cs.Note)
	}

	cases := []struct {
		act   string
		wants []string
	}{
		{"random", []string{"random"}},
		{"file", []string{"file"}},
		{"sleep", []string{"sleep"}},
		{"trap", []string{"step panicked: runtime error: invalid memory address or nil pointer dereference"}},
		{"exit", []string{"exit", "3"}},
		{"alloc", []string{"out of memory"}},
		{"big", []string{"step output is", "limit"}},
		{"loop", []string{"environmental", "timeout"}},
	}
	for _, c := range cases {
		t.Run(c.act, func(t *testing.T) {
			if c.act == "loop" {
				// Only a runaway guest meets the limit: reopen with one.
				timeout = 300 * time.Millisecond
				h.reopen()
			}
			if _, err := h.w.Submit(context.Background(), hostileEvent("bad-"+c.act, c.act)); err != nil {
				t.Fatalf("submit: %v", err)
			}
			v, _ := hostileCell(t, h.w, "bad-"+c.act)
			if v.Status != kernel.StatusFailed {
				t.Fatalf("status %s (state %s), want failed", v.Status, stateJSON(v))
			}
			for _, w := range c.wants {
				if !strings.Contains(v.Reason, w) {
					t.Errorf("reason %q does not say %q", v.Reason, w)
				}
			}
			if c.act == "loop" {
				timeout = -1
				h.reopen() // replay adopts the environmental fault
			}
			// Still serving, and on a fresh instance unless the failure
			// was found by the kernel after the guest returned (output
			// too big), where the warm instance rightly lives on.
			if _, err := h.w.Submit(context.Background(), hostileEvent("fine-"+c.act, "count")); err != nil {
				t.Fatalf("submit after %s: %v", c.act, err)
			}
			fv, fs := hostileCell(t, h.w, "fine-"+c.act)
			if fv.Status != kernel.StatusCompleted || fs.Calls != 1 {
				t.Fatalf("after %s: %s %+v", c.act, fv.Status, fs)
			}
			if c.act != "big" && fs.Global != 1 {
				t.Errorf("after %s the next step saw global %d: the failed instance was reused", c.act, fs.Global)
			}
		})
	}
	before := allRecords(t, h.w)
	h.reopen()
	after := allRecords(t, h.w)
	if len(before) != len(after) {
		t.Fatalf("journal has %d records after replay, %d before", len(after), len(before))
	}
	for _, c := range cases {
		if v, _ := hostileCell(t, h.w, "bad-"+c.act); v.Status != kernel.StatusFailed {
			t.Errorf("after replay bad-%s is %s", c.act, v.Status)
		}
	}
}

// fixedClock and zeroEntropy make every stamp a function of the journal, so
// a world that crashed and restarted can be compared byte for byte with one
// that did not.
type fixedClock struct{}

func (fixedClock) NowNs() uint64 { return 1_700_000_000_000_000_000 }

type zeroEntropy struct{}

func (zeroEntropy) Fill(p []byte) { clear(p) }

func globalsConfig(engine modules.Compiler) kernel.Config {
	return kernel.Config{Clock: fixedClock{}, Entropy: zeroEntropy{}, Wasm: engine, Builtins: testBuiltins(), StepTimeout: -1}
}

const globalsEvents = 12

func globalsEvent(i int) kernel.Event { return hostileEvent(fmt.Sprintf("k%d", i%3), "count") }

// TestWasmGlobalsFollowTheJournal: the hostile guest keeps a counter in a
// global and writes it into every state. A world killed with SIGKILL halfway
// and reopened (which replays, re-creating the instance and its global)
// continues exactly where a world that never crashed is: the two journals are
// byte-identical, and replaying either reproduces it.
func TestWasmGlobalsFollowTheJournal(t *testing.T) {
	if os.Getenv("AOS_GLOBALS_CHILD") != "" {
		globalsChild()
		return
	}
	manDir := hostileManifestDir(t)
	_, cache := hostileGuest(t)
	engine := wasmtest.Engine(t, cache)
	ctx := context.Background()
	m, err := manifest.Load(manDir)
	if err != nil {
		t.Fatal(err)
	}

	// The reference: every event in one life.
	refDir := t.TempDir()
	ref, err := openDir(refDir, globalsConfig(engine))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Apply(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < globalsEvents; i++ {
		if _, err := ref.Submit(ctx, globalsEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := allRecords(t, ref.World)
	_, last := hostileCell(t, ref.World, fmt.Sprintf("k%d", (globalsEvents-1)%3))
	if last.Global != globalsEvents {
		t.Fatalf("reference: last step saw global %d, want %d", last.Global, globalsEvents)
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}

	// The crash: a child process sends half the events one by one and is
	// killed with the world open.
	world := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWasmGlobalsFollowTheJournal$", "-test.v=false")
	cmd.Env = append(os.Environ(), "AOS_GLOBALS_CHILD=1", "AOS_GLOBALS_WORLD="+world, "AOS_GLOBALS_MANIFEST="+manDir, "AOS_GLOBALS_CACHE="+cache)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	for sc := bufio.NewScanner(out); acked < globalsEvents/2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "ACK ") {
			acked++
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if acked < globalsEvents/2 {
		t.Fatalf("child acknowledged %d events before dying", acked)
	}

	// Restart: replay re-creates the instance; continue from the journal.
	w, err := openDir(world, globalsConfig(engine))
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	journaled := 0
	for _, r := range allRecords(t, w.World) {
		if r.Kind == journal.KindEvent {
			journaled++
		}
	}
	if journaled < acked {
		t.Fatalf("%d events acknowledged, %d journaled", acked, journaled)
	}
	for i := journaled; i < globalsEvents; i++ {
		if _, err := w.Submit(ctx, globalsEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	got := allRecords(t, w.World)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("crashed world has %d records, the reference %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Body, want[i].Body) {
			t.Fatalf("record %d differs after SIGKILL and restart (%s vs %s)", want[i].Seq, got[i].Kind, want[i].Kind)
		}
	}

	// Replay: reopening the reference replays all of it and must agree.
	ref, err = openDir(refDir, globalsConfig(engine))
	if err != nil {
		t.Fatalf("replay of the reference: %v", err)
	}
	defer ref.Close()
	if _, s := hostileCell(t, ref.World, fmt.Sprintf("k%d", (globalsEvents-1)%3)); s.Global != globalsEvents {
		t.Fatalf("after replay the last state has global %d", s.Global)
	}
}

func globalsChild() {
	ctx := context.Background()
	engine, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: os.Getenv("AOS_GLOBALS_CACHE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child engine:", err)
		os.Exit(2)
	}
	w, err := openDir(os.Getenv("AOS_GLOBALS_WORLD"), globalsConfig(engine))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	m, err := manifest.Load(os.Getenv("AOS_GLOBALS_MANIFEST"))
	if err == nil {
		_, err = w.Apply(ctx, m, false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child apply:", err)
		os.Exit(2)
	}
	for i := 0; i < globalsEvents/2; i++ {
		if _, err := w.Submit(ctx, globalsEvent(i)); err != nil {
			fmt.Fprintln(os.Stderr, "child submit:", err)
			os.Exit(2)
		}
		fmt.Println("ACK " + strconv.Itoa(i))
	}
	select {} // the parent kills us here, with the world open
}

// TestWasmGlobalsRestartAtCheckpoint: a checkpoint gives every wasm module a
// fresh instance, in the live world and wherever the world is later opened
// from. The hostile guest counts steps in a global: after a snapshot it
// counts from zero again, a world reopened from that snapshot journals
// exactly what the world that went on did, and a replay from genesis
// (which passes the checkpoint) agrees too.
func TestWasmGlobalsRestartAtCheckpoint(t *testing.T) {
	manDir := hostileManifestDir(t)
	_, cache := hostileGuest(t)
	engine := wasmtest.Engine(t, cache)
	ctx := context.Background()
	m, err := manifest.Load(manDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := globalsConfig(engine)
	cfg.SnapshotEvery, cfg.SnapshotInterval = -1, -1
	run := func(reopen bool) (string, []journal.Record) {
		dir := t.TempDir()
		w, err := openDir(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Apply(ctx, m, false); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < globalsEvents; i++ {
			if i == globalsEvents/2 {
				if _, err := w.Snapshot(ctx); err != nil {
					t.Fatal(err)
				}
				if reopen {
					w.Close()
					if w, err = openDir(dir, cfg); err != nil {
						t.Fatal(err)
					}
					if w.OpenInfo().Snapshot == 0 {
						t.Fatal("reopened without the snapshot")
					}
				}
			}
			if _, err := w.Submit(ctx, globalsEvent(i)); err != nil {
				t.Fatal(err)
			}
		}
		_, last := hostileCell(t, w.World, fmt.Sprintf("k%d", (globalsEvents-1)%3))
		if last.Global != globalsEvents-globalsEvents/2 {
			t.Fatalf("last step saw global %d, want %d: the instance did not restart at the checkpoint", last.Global, globalsEvents-globalsEvents/2)
		}
		recs := allRecords(t, w.World)
		w.Close()
		return dir, recs
	}
	dir, want := run(false)
	_, got := run(true)
	if len(got) != len(want) {
		t.Fatalf("reopened world has %d records, the one that went on %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Body, want[i].Body) {
			t.Fatalf("record %d differs (%s vs %s)", want[i].Seq, got[i].Kind, want[i].Kind)
		}
	}
	gcfg := cfg
	gcfg.FromGenesis, gcfg.VerifySnapshots = true, true
	g, err := openDir(dir, gcfg)
	if err != nil {
		t.Fatalf("replay from genesis: %v", err)
	}
	defer g.Close()
	if g.VerifiedSnapshots() != 1 {
		t.Fatalf("genesis replay verified %d snapshots", g.VerifiedSnapshots())
	}
}
