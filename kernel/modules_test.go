package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestBuiltinIdentityPinned: a builtin def pins the identity its Go code
// declares; a program registering another identity under that name cannot
// apply it, and the refusal names the module and both identities.
func TestBuiltinIdentityPinned(t *testing.T) {
	h := newHarness(t, 1, false)
	height := h.w.Journal().Height() // the world record
	src := strings.ReplaceAll(counterManifest, `"identity":"test/counter@1"`, `"identity":"test/counter@0"`)
	_, err := h.applyJSON(src)
	if err == nil {
		t.Fatal("apply with a stale builtin identity succeeded")
	}
	for _, want := range []string{"com.test/counter_mod@1", `"test/counter@0"`, `"test/counter@1"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if st, _ := h.w.Status(context.Background()); st.JournalHeight != height {
		t.Fatalf("a refused apply journaled %d records", st.JournalHeight-height)
	}
}

// TestChangedBuiltinCodeNamedOnReplay: changing a builtin's code without
// changing its declared identity is caught when the world replays, with a
// message naming the module and what differs.
func TestChangedBuiltinCodeNamedOnReplay(t *testing.T) {
	h := newHarness(t, 2, true)
	mustApply(t, h, counterManifest)
	for i := 0; i < 5; i++ {
		if _, err := h.w.Submit(context.Background(), countEvent("k", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	// Same name, same identity, different code: counts twice as fast.
	b := testBuiltins()
	changed := modules.NewBuiltins()
	for _, n := range b.Names() {
		m, _ := b.Get(n)
		if n == "test/counter" {
			m = &modules.Builtin{Name: n, Identity: m.Identity, Entrypoints: map[string]modules.StepFunc{
				"step": func(in *modules.Input) (*modules.Output, error) {
					s, ev := stateCount(in.State), decodeCount(in.Event.Value)
					return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": s.Count + 2*ev.By})}, nil
				}}}
		}
		changed.MustAdd(*m)
	}
	cfg := h.config()
	cfg.Builtins = changed
	_, err := kernel.Open(h.db.Stores(), cfg)
	var re *kernel.ReplayError
	if !errors.As(err, &re) {
		t.Fatalf("open with changed code: %v, want a ReplayError", err)
	}
	for _, want := range []string{"module com.test/counter_mod@1", "builtin test/counter", `identity "test/counter@1"`,
		"state hash", "code changed under the same identity"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("replay error %q does not say %q", err, want)
		}
	}
	if re.Workflow != "com.test/counter@1" || string(re.Key) != string(schemas.MustMarshal("k")) {
		t.Errorf("replay error names %s %x, want the counter cell k", re.Workflow, re.Key)
	}
}

// fakeWasm is a modules.Compiler whose runners run a counter in Go, so the
// kernel's handling of wasm runners (reset points, fault classes, replay)
// is tested without a real guest; modules/wasm tests the real one.
type fakeWasm struct {
	mu       sync.Mutex
	compiled int
	resets   int
	steps    int
	// hang: events with this "by" wait for the step's deadline, then fail
	// environmentally; without a deadline they count like any other.
	hang int64
	// envFail: events with this "by" fail environmentally at once.
	envFail int64
}

func (f *fakeWasm) Compile(_ context.Context, name, hash string, code []byte, mib uint32) (modules.Runner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if string(code) == "refuse me" {
		return nil, fmt.Errorf("module %s imports env.clock, which is not allowed", name)
	}
	f.compiled++
	return &fakeRunner{f: f, name: name}, nil
}

type fakeRunner struct {
	f    *fakeWasm
	name string
}

func (r *fakeRunner) Reset() {
	r.f.mu.Lock()
	r.f.resets++
	r.f.mu.Unlock()
}

func (r *fakeRunner) Step(ctx context.Context, entry string, in *modules.Input) (*modules.Output, error) {
	r.f.mu.Lock()
	r.f.steps++
	hang, envFail := r.f.hang, r.f.envFail
	r.f.mu.Unlock()
	s, ev := stateCount(in.State), decodeCount(in.Event.Value)
	if ev.By == envFail && envFail != 0 {
		return nil, &modules.EnvError{Module: r.name, Cause: "host", Err: errors.New("out of host memory")}
	}
	if ev.By == hang && hang != 0 {
		if _, ok := ctx.Deadline(); ok {
			<-ctx.Done()
			return nil, &modules.EnvError{Module: r.name, Cause: "timeout", Err: ctx.Err()}
		}
	}
	if ev.By < 0 {
		return nil, modules.Fault(fmt.Sprintf("wasm guest trapped: negative by %d", ev.By))
	}
	return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": s.Count + ev.By})}, nil
}

func (f *fakeWasm) counts() (compiled, resets, steps int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.compiled, f.resets, f.steps
}

// wasmCounterManifest writes a counter world whose module is a wasm artifact
// holding code, and returns its directory.
func wasmCounterManifest(t *testing.T, code string) string {
	dir := t.TempDir()
	h := schemas.HashBytes([]byte(code))
	src := strings.Replace(counterManifest,
		`{"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}}`,
		fmt.Sprintf(`{"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"wasm","artifact":"counter.wasm","hash":%q,"max_memory_mib":16}}`, h), 1)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "counter.wasm"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newWasmHarness(t *testing.T, f *fakeWasm) *harness {
	return newHarnessWith(t, 3, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.Wasm = f; c.StepTimeout = 50e6 }
	})
}

func applyDir(t *testing.T, h *harness, dir string) {
	t.Helper()
	m, err := manifest.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.Apply(context.Background(), m, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func cellOf(t *testing.T, h *harness, key string) *kernel.CellView {
	t.Helper()
	v, err := h.w.Cell(context.Background(), "com.test/counter@1", schemas.MustMarshal(key))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWasmArtifactsLiveInTheWorld: apply stores each artifact in the CAS
// under its hash, and a reopened world replays with the artifact file gone.
func TestWasmArtifactsLiveInTheWorld(t *testing.T) {
	f := &fakeWasm{}
	h := newWasmHarness(t, f)
	dir := wasmCounterManifest(t, "counter code v1")
	applyDir(t, h, dir)
	if _, err := h.w.Submit(context.Background(), countEvent("a", 3)); err != nil {
		t.Fatal(err)
	}
	got, err := h.w.CAS().Get(schemas.HashBytes([]byte("counter code v1")))
	if err != nil || string(got) != "counter code v1" {
		t.Fatalf("artifact in CAS: %q, %v", got, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	if v := cellOf(t, h, "a"); stateJSON(v) != `{"count":3}` {
		t.Fatalf("state after reopen %s", stateJSON(v))
	}
}

// TestWasmCompileRefusalNamesModule: a module the engine refuses is a
// refused apply that names it, and changes nothing.
func TestWasmCompileRefusalNamesModule(t *testing.T) {
	f := &fakeWasm{}
	h := newWasmHarness(t, f)
	m, err := manifest.Load(wasmCounterManifest(t, "refuse me"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.w.Apply(context.Background(), m, false)
	if err == nil || !strings.Contains(err.Error(), "com.test/counter_mod@1") || !strings.Contains(err.Error(), "env.clock") {
		t.Fatalf("apply of a refused module: %v", err)
	}
	if res == nil || res.Applied {
		t.Fatalf("result %+v", res)
	}
	if st, _ := h.w.Status(context.Background()); st.JournalHeight != 1 { // the world record
		t.Fatalf("refused apply journaled %d records", st.JournalHeight-1)
	}
}

// TestWasmNeedsAnEngine: the kernel names no wasm engine. A world opened
// without one (Config.Wasm nil) refuses a manifest with a wasm module,
// naming the module and what is missing, and journals nothing; a world
// whose journal holds such a manifest does not open without one, and says
// so the same way.
func TestWasmNeedsAnEngine(t *testing.T) {
	var engine modules.Compiler // what each open is handed
	h := newHarnessWith(t, 3, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.Wasm = engine }
	})
	m, err := manifest.Load(wasmCounterManifest(t, "counter code"))
	if err != nil {
		t.Fatal(err)
	}
	wantErr := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "module com.test/counter_mod@1") || !strings.Contains(err.Error(), "kernel.Config.Wasm") {
			t.Fatalf("%s without a wasm engine: %v, want an error naming the module and Config.Wasm", what, err)
		}
	}
	res, err := h.w.Apply(context.Background(), m, false)
	wantErr("apply", err)
	if res == nil || res.Applied {
		t.Fatalf("result %+v", res)
	}
	if st, _ := h.w.Status(context.Background()); st.JournalHeight != 1 { // the world record
		t.Fatalf("refused apply journaled %d records", st.JournalHeight-1)
	}
	// With an engine the manifest applies; reopened without one, the
	// world cannot replay it.
	engine = &fakeWasm{}
	h.reopen()
	if _, err := h.w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	engine = nil
	_, err = kernel.Open(h.db.Stores(), h.config())
	wantErr("open", err)
}

// TestWasmInstancesResetAtJournaledPoints: a wasm module starts on a fresh
// instance when a manifest is installed, live and on replay alike, and a
// refused or dry-run apply leaves the live instance alone.
func TestWasmInstancesResetAtJournaledPoints(t *testing.T) {
	f := &fakeWasm{}
	h := newWasmHarness(t, f)
	dir := wasmCounterManifest(t, "counter code")
	applyDir(t, h, dir)
	if _, r, _ := f.counts(); r != 1 {
		t.Fatalf("resets after apply: %d, want 1", r)
	}
	m, _ := manifest.Load(dir)
	if _, err := h.w.Apply(context.Background(), m, true); err != nil {
		t.Fatal(err)
	}
	if _, r, _ := f.counts(); r != 1 {
		t.Fatalf("resets after a dry run: %d, want still 1", r)
	}
	if _, err := h.w.Submit(context.Background(), countEvent("a", 1)); err != nil {
		t.Fatal(err)
	}
	h.reopen() // replays the manifest record: one more reset, on the new runner
	if _, r, s := f.counts(); r != 2 || s != 2 {
		t.Fatalf("after reopen: %d resets, %d steps; want 2 and 2 (the step replayed once)", r, s)
	}
}

// TestEnvironmentalFaultAdoptedByReplay: a step the wall-clock limit stops
// is journaled as an environmental fault; the world goes on serving; replay
// adopts the record instead of running the step (which, with no deadline,
// would now succeed and diverge).
func TestEnvironmentalFaultAdoptedByReplay(t *testing.T) {
	f := &fakeWasm{hang: 7}
	h := newWasmHarness(t, f)
	applyDir(t, h, wasmCounterManifest(t, "counter code"))
	if _, err := h.w.Submit(context.Background(), countEvent("slow", 7)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.Submit(context.Background(), countEvent("other", 2)); err != nil {
		t.Fatal(err)
	}
	v := cellOf(t, h, "slow")
	if v.Status != kernel.StatusFailed || !strings.Contains(v.Reason, "environmental") || !strings.Contains(v.Reason, "timeout") {
		t.Fatalf("slow cell: status %s reason %q", v.Status, v.Reason)
	}
	if o := cellOf(t, h, "other"); stateJSON(o) != `{"count":2}` {
		t.Fatalf("the world stopped serving: other = %s", stateJSON(o))
	}
	var fault records.FaultRec
	for _, r := range allRecords(t, h.w) {
		if r.Kind == journal.KindFault {
			if err := schemas.UnmarshalTrusted(r.Body, &fault); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fault.Class != kernel.FaultEnvironmental {
		t.Fatalf("fault class %q, want %q", fault.Class, kernel.FaultEnvironmental)
	}
	_, resetsLive, stepsLive := f.counts()
	before := allRecords(t, h.w)
	h.reopen()
	_, resets, steps := f.counts()
	if steps-stepsLive != 1 {
		t.Fatalf("replay ran %d steps, want 1 (only the successful one)", steps-stepsLive)
	}
	// Live: apply + the environmental fault; replay: the same two again.
	if resetsLive != 2 || resets != 4 {
		t.Fatalf("resets live %d, after replay %d; want 2 and 4", resetsLive, resets)
	}
	if after := allRecords(t, h.w); len(after) != len(before) {
		t.Fatalf("journal grew on replay: %d -> %d", len(before), len(after))
	}
	if v := cellOf(t, h, "slow"); v.Status != kernel.StatusFailed {
		t.Fatalf("after replay the slow cell is %s", v.Status)
	}
}

// TestEnvironmentalFailureDuringReplayStops: the host failing while
// replaying a step that succeeded live stops the open with a clear error
// instead of journaling a different history; a later open succeeds.
func TestEnvironmentalFailureDuringReplayStops(t *testing.T) {
	f := &fakeWasm{}
	h := newWasmHarness(t, f)
	applyDir(t, h, wasmCounterManifest(t, "counter code"))
	if _, err := h.w.Submit(context.Background(), countEvent("a", 5)); err != nil {
		t.Fatal(err)
	}
	height := len(allRecords(t, h.w))
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	f.envFail = 5
	_, err := kernel.Open(h.db.Stores(), h.config())
	if err == nil || !strings.Contains(err.Error(), "environmental failure while replaying") {
		t.Fatalf("open with a failing host: %v", err)
	}
	f.envFail = 0
	h.open()
	if n := len(allRecords(t, h.w)); n != height {
		t.Fatalf("journal height %d after the failed open, want %d", n, height)
	}
	if v := cellOf(t, h, "a"); stateJSON(v) != `{"count":5}` {
		t.Fatalf("state %s", stateJSON(v))
	}
}

// TestWasmBusinessFaultReplayed: a guest's own fault is an ordinary
// journaled fault (no class) that replay reproduces by running the step.
func TestWasmBusinessFaultReplayed(t *testing.T) {
	f := &fakeWasm{}
	h := newWasmHarness(t, f)
	applyDir(t, h, wasmCounterManifest(t, "counter code"))
	if _, err := h.w.Submit(context.Background(), countEvent("neg", -1)); err != nil {
		t.Fatal(err)
	}
	v := cellOf(t, h, "neg")
	if v.Status != kernel.StatusFailed || v.Reason != "wasm guest trapped: negative by -1" {
		t.Fatalf("cell %s %q", v.Status, v.Reason)
	}
	_, _, stepsLive := f.counts()
	h.reopen()
	if _, _, s := f.counts(); s != stepsLive+1 {
		t.Fatalf("replay ran %d steps, want 1", s-stepsLive)
	}
}

func stateCount(b []byte) countFields {
	if b == nil {
		return countFields{}
	}
	return decodeCount(b)
}
