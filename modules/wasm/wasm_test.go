package wasm_test

import (
	"context"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/schemas"
)

func TestStepOutput(t *testing.T) {
	m := abi(t)
	in := counterInput([]byte{0xa0}, 2)
	got := step(t, m, "ok", in)
	want := &modules.Output{
		State:        []byte{0xa0},
		DomainEvents: []modules.EventOut{{Schema: "test/Echoed@1", Value: in.Event.Value}},
		Effects:      []modules.EffectOut{{Effect: "timer.set", Params: []byte{0xa0}, IdempotencyKey: []byte{1, 2}, IssuerRef: "r1"}},
		Ann:          []byte{1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("output\n got %+v\nwant %+v", got, want)
	}
	if out := step(t, m, "delete", nil); out.State != nil {
		t.Fatalf("delete: state %x, want nil", out.State)
	}
}

// The guest sees the input envelope as schemas.Marshal writes it.
func TestStepInputEnvelope(t *testing.T) {
	m := abi(t)
	for _, in := range []*modules.Input{
		{Version: 1, Event: modules.EventIn{Schema: "a/B@1", Value: []byte{0xf6}}},
		{Version: 1, State: []byte{}, Event: modules.EventIn{Schema: "a/B@1", Value: []byte{0x01}, Key: []byte{0x61, 'k'}}},
		{Version: 1, State: cborMap("count", 7), Event: modules.EventIn{Schema: "a/B@1", Value: cborMap("by", 1)}, Ctx: cborMap("now_ns", 5)},
	} {
		want := schemas.MustMarshal(in)
		if got := step(t, m, "input", in).State; string(got) != string(want) {
			t.Errorf("guest saw %x\nwant %x", got, want)
		}
	}
}

func TestStepCounter(t *testing.T) {
	m := abi(t)
	out := step(t, m, "counter", counterInput(nil, 3))
	out = step(t, m, "counter", counterInput(out.State, 4))
	if n := count(t, out.State); n != 7 {
		t.Fatalf("count %d, want 7", n)
	}
}

// A guest's globals live as long as its instance: across steps, until
// Reset or a failed step.
func TestWarmInstance(t *testing.T) {
	m := abi(t)
	next := func() uint64 { return count(t, step(t, m, "counter-global", nil).State) }
	for want := uint64(1); want <= 3; want++ {
		if n := next(); n != want {
			t.Fatalf("step %d: count %d", want, n)
		}
	}
	m.Reset()
	if n := next(); n != 1 {
		t.Fatalf("after Reset: count %d, want 1", n)
	}
	next()
	if _, err := m.Step(context.Background(), "fault", counterInput(nil, 1)); err == nil {
		t.Fatal("fault: no error")
	}
	if n := next(); n != 1 {
		t.Fatalf("after a failed step: count %d, want 1", n)
	}
}

// Each hostile entry is a business fault naming what the guest did, and
// the next step runs on a fresh instance.
func TestFaults(t *testing.T) {
	m := compile(t, newEngine(t, wasm.Config{MaxResultBytes: 4096}), "abi", 0)
	for _, tc := range []struct {
		entry string
		want  []string // substrings of the reason
	}{
		{"random", []string{"wasm guest asked for randomness (wasi random_get) during a step"}},
		{"randompanic", []string{"wasm guest asked for randomness (wasi random_get) during a step"}},
		{"file", []string{"wasm guest tried to use the filesystem (wasi path_open) during a step"}},
		{"sleep", []string{"wasm guest tried to sleep or wait (wasi poll_oneoff) during a step"}},
		{"trap", []string{"wasm guest trapped: out of bounds memory access"}},
		{"panic", []string{"wasm guest trapped: unreachable; stderr: panic: boom", "main.step"}},
		{"exit", []string{"wasm guest exited with code 3"}},
		{"printexit", []string{"wasm guest exited with code 4; stderr: to stderr; stdout: to stdout"}},
		{"fault", []string{"business says no"}},
		{"nosuch", []string{`unknown entrypoint "nosuch"`}},
		{"badtag", []string{"wasm guest result starts with tag 7"}},
		{"empty", []string{"wasm guest returned an empty result"}},
		{"noncanonical", []string{"wasm guest output is not canonical CBOR: head of 1 not in its shortest form"}},
		{"unknownkey", []string{`wasm guest output: unknown key "x"`}},
		{"bigoutput", []string{"wasm guest result is 8203 bytes, over the host's limit of 4096"}},
		{"badptr", []string{"wasm guest result of 16 bytes at 0xffffff00 is outside its memory"}},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			step(t, m, "counter-global", nil) // warm, with a global count of 1 at least
			out, err := m.Step(context.Background(), tc.entry, counterInput(nil, 1))
			var f modules.Fault
			if !errors.As(err, &f) {
				t.Fatalf("got %+v, %v; want a Fault", out, err)
			}
			t.Logf("reason: %s", f)
			for _, w := range tc.want {
				if !strings.Contains(string(f), w) {
					t.Errorf("reason %q\ndoes not contain %q", f, w)
				}
			}
			if n := count(t, step(t, m, "counter-global", nil).State); n != 1 {
				t.Errorf("next step: count %d, want 1 (a fresh instance)", n)
			}
		})
	}
}

// The same failure gives the same reason, byte for byte.
func TestFaultTextDeterministic(t *testing.T) {
	m := abi(t)
	var first string
	for i := range 3 {
		_, err := m.Step(context.Background(), "panic", counterInput(nil, 1))
		if err == nil {
			t.Fatal("panic: no error")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("reason changed:\n%s\n%s", first, err)
		}
	}
}

// What would be ambient is a deterministic stand-in: _initialize sees the
// same clock and randomness in every instance, and a step reads a frozen
// wall clock.
func TestStandIns(t *testing.T) {
	m := abi(t)
	first := step(t, m, "initvals", nil).State
	m.Reset()
	if again := step(t, m, "initvals", nil).State; string(again) != string(first) {
		t.Fatalf("a fresh instance saw %x, the first %x", again, first)
	}
	if n := count(t, step(t, m, "clock", nil).State); n != wasm.WallStandIn {
		t.Fatalf("wall clock read %d, want the stand-in %d", n, uint64(wasm.WallStandIn))
	}
}

// The Go runtime reads the wall clock at every GC and polls with a zero
// timeout while it collects: neither may fail a step.
func TestGoRuntimeNeedsNoFaults(t *testing.T) {
	m := abi(t)
	for i := range 40 {
		seed := []byte("x")
		if i%4 == 0 {
			seed = []byte("G") // runtime.GC()
		}
		if _, err := m.Step(context.Background(), "gc", &modules.Input{Version: 1, State: seed}); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
}

func TestDeadline(t *testing.T) {
	m := abi(t)
	step(t, m, "counter-global", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := m.Step(ctx, "loop", counterInput(nil, 1))
	var env *modules.EnvError
	if !errors.As(err, &env) || env.Cause != "timeout" || env.Module != "abi" {
		t.Fatalf("got %v; want an EnvError with cause timeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not wrap context.DeadlineExceeded", err)
	}
	if n := count(t, step(t, m, "counter-global", nil).State); n != 1 {
		t.Fatalf("next step: count %d, want 1 (a fresh instance)", n)
	}

	// While the guest spins, the collector must be able to stop the world.
	// The step is cancelled only once collections have completed, so a
	// guest that held the collector up would never be stopped: the test
	// would hang and fail on its timeout. No clock decides the verdict.
	gcCtx, gcCancel := context.WithCancel(context.Background())
	go func() {
		for range 5 {
			runtime.GC()
		}
		gcCancel()
	}()
	if _, err := m.Step(gcCtx, "loop", counterInput(nil, 1)); !errors.As(err, &env) || env.Cause != "timeout" {
		t.Fatalf("step cancelled after the collections: %v, want an EnvError with cause timeout", err)
	}

	// Cancelled before the step starts, and on a fresh instance.
	m.Reset()
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := m.Step(ctx, "counter", counterInput(nil, 1)); !errors.As(err, &env) || env.Cause != "timeout" {
		t.Fatalf("cancelled: got %v; want an EnvError with cause timeout", err)
	}
	step(t, m, "counter", nil)
}

func TestMemoryLimit(t *testing.T) {
	m := compile(t, newEngine(t, wasm.Config{}), "abi", 24)
	_, err := m.Step(context.Background(), "alloc", counterInput(nil, 1))
	var f modules.Fault
	t.Logf("reason: %s", err)
	if !errors.As(err, &f) || !strings.Contains(string(f), "out of memory") {
		t.Fatalf("got %v; want a Fault mentioning out of memory", err)
	}
	step(t, m, "counter", nil)
}

func TestCompileRefuses(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"foreign", guest(t, "foreign"), `wasm module foreign: imports "env"."foo" (a function); a workflow module may import only wasi_snapshot_preview1 functions`},
		{"nostep", guest(t, "nostep"), "wasm module nostep: does not export aos_step (i32, i32, i32, i32) -> (i64)"},
		{"badsig", guest(t, "badsig"), "wasm module badsig: exports aos_step as (i32, i32, i32, i32) -> (i32); the aos module ABI v1 wants (i32, i32, i32, i32) -> (i64)"},
		{"global", wasmBinary(importSection(wasmImportEntry("wasi_snapshot_preview1", "g", 3, 0x7f, 0))),
			`wasm module global: imports "wasi_snapshot_preview1"."g" (a global); a workflow module may import only`},
		{"unknownwasi", wasmBinary(typeSection(), importSection(wasmImportEntry("wasi_snapshot_preview1", "nonesuch", 0, 0))),
			`wasm module unknownwasi: imports "wasi_snapshot_preview1"."nonesuch" (a function), which WASI preview 1 does not define`},
		{"wasisig", wasmBinary(typeSection(), importSection(wasmImportEntry("wasi_snapshot_preview1", "fd_write", 0, 0)), section(5, []byte{1, 0, 1})),
			`wasm module wasisig: imports "wasi_snapshot_preview1"."fd_write" as () -> (); WASI preview 1 defines it as (i32, i32, i32, i32) -> (i32)`},
		{"nomemory", wasmBinary(), `wasm module nomemory: defines no memory; the ABI wants one, exported as "memory"`},
		{"garbage", []byte("not wasm"), "wasm module garbage: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.CompileModule(context.Background(), tc.name, "", tc.code, 0)
			if err == nil {
				m.Close()
				t.Fatal("compiled")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
	if _, err := e.CompileModule(context.Background(), "huge", "", guest(t, "abi"), 5000); err == nil ||
		!strings.Contains(err.Error(), "memory limit 5000 MiB is over") {
		t.Fatalf("5000 MiB: %v", err)
	}
}

// A minimal wasm binary writer for the refusals Go cannot produce.
func wasmBinary(sections ...[]byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

func section(id byte, content []byte) []byte {
	return append([]byte{id, byte(len(content))}, content...) // short sections only
}

// typeSection declares one function type, () -> ().
func typeSection() []byte { return section(1, []byte{1, 0x60, 0, 0}) }

func importSection(entries ...[]byte) []byte {
	c := []byte{byte(len(entries))}
	for _, e := range entries {
		c = append(c, e...)
	}
	return section(2, c)
}

func wasmImportEntry(module, name string, kind byte, desc ...byte) []byte {
	b := append([]byte{byte(len(module))}, module...)
	b = append(append(b, byte(len(name))), name...)
	return append(append(b, kind), desc...)
}

func TestCompileCache(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	a := compile(t, e, "abi", 0)
	b := compile(t, e, "abi", 0)
	if !wasm.SameCode(a, b) {
		t.Fatal("the same hash compiled twice")
	}
	// Each Module has its own instance.
	step(t, a, "counter-global", nil)
	if n := count(t, step(t, b, "counter-global", nil).State); n != 1 {
		t.Fatalf("b's first count %d, want 1", n)
	}
	c := compile(t, e, "abi", 64)
	if wasm.SameCode(a, c) {
		t.Fatal("another memory limit shares the compiled module")
	}
	// Code outlives one of its Modules, and is compiled again after the last.
	a.Close()
	step(t, b, "counter", nil)
	b.Close()
	step(t, compile(t, e, "abi", 0), "counter", nil)
}

// A Module dropped without Close releases its instance and code when it is
// collected.
func TestAbandonedModule(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	code := guest(t, "abi")
	func() {
		m, err := e.CompileModule(context.Background(), "abi", "", code, 0)
		if err != nil {
			t.Fatal(err)
		}
		step(t, m, "counter", nil)
	}()
	// Finalizers run on their own goroutine after a collection: collect and
	// yield to it until the count drops. A leak never drops it; 10,000
	// collections of this small heap take about a second.
	for i := 0; wasm.CompiledCount(e) != 0; i++ {
		if i == 10_000 {
			t.Fatal("the compiled module outlived its only Module")
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func TestConcurrentCompile(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	code := guest(t, "abi")
	hash := schemas.HashBytes(code).String()
	mods := make([]*wasm.Module, 4)
	var wg sync.WaitGroup
	for i := range mods {
		wg.Go(func() {
			m, err := e.CompileModule(context.Background(), "abi", hash, code, 0)
			if err != nil {
				t.Error(err)
				return
			}
			mods[i] = m
			if _, err := m.Step(context.Background(), "counter", counterInput(nil, 1)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, m := range mods[1:] {
		if m != nil && mods[0] != nil && !wasm.SameCode(mods[0], m) {
			t.Error("concurrent compiles of one hash made two compiled modules")
		}
	}
	for _, m := range mods {
		if m != nil {
			m.Close()
		}
	}
}

// Compiled code outlives its engine in a CacheDir. (The directory is the one
// every test engine shares, so the first engine may find it filled already;
// BenchmarkCompileFromCacheDir shows what it saves.)
func TestCacheDirSurvivesEngine(t *testing.T) {
	guest(t, "abi")
	dir := guests.cache
	code := guest(t, "abi")
	for i := range 2 {
		e, err := wasm.NewEngine(context.Background(), wasm.Config{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.CompileModule(context.Background(), "abi", "", code, 0)
		if err != nil {
			t.Fatal(err)
		}
		step(t, m, "counter", nil)
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if entries, _ := os.ReadDir(dir); len(entries) == 0 {
				t.Fatal("the cache directory is empty")
			}
		}
	}
}

func TestClosed(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	m := compile(t, e, "abi", 0)
	step(t, m, "counter", nil)
	m.Close()
	var env *modules.EnvError
	if _, err := m.Step(context.Background(), "counter", counterInput(nil, 1)); !errors.As(err, &env) || !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("step after Close: %v", err)
	}
	m2 := compile(t, e, "abi", 0)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CompileModule(context.Background(), "abi", "", guest(t, "abi"), 0); !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("compile after Close: %v", err)
	}
	if _, err := m2.Step(context.Background(), "counter", counterInput(nil, 1)); !modules.IsEnvironmental(err) {
		t.Fatalf("step after the engine's Close: %v", err)
	}
}
