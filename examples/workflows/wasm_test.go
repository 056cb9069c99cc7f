package workflows_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// The wasm builds of the examples, made once per test binary with the Go
// toolchain exactly as docs/wasm-abi.md says, and run here through a
// minimal wazero host of the ABI (the kernel's host is modules/wasm).

var wasmBuild struct {
	once sync.Once
	dir  string
	bins map[string][]byte // by module name
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if wasmBuild.dir != "" {
		os.RemoveAll(wasmBuild.dir)
	}
	os.Exit(code)
}

// wasmDir is the wasm main of each example module.
func wasmDir(module string) string { return "./" + strings.TrimPrefix(module, "examples/") + "/wasm" }

func buildAll(tb testing.TB) map[string][]byte {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds every example with the Go toolchain")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		tb.Skip("no go toolchain on PATH")
	}
	wasmBuild.once.Do(func() {
		wasmBuild.dir, wasmBuild.err = os.MkdirTemp("", "aos-examples-wasm-")
		if wasmBuild.err != nil {
			return
		}
		wasmBuild.bins = map[string][]byte{}
		for _, mod := range workflows.Modules() {
			out := filepath.Join(wasmBuild.dir, filepath.Base(mod.Name())+".wasm")
			if wasmBuild.err = build.Package(context.Background(), goBin, wasmDir(mod.Name()), out); wasmBuild.err != nil {
				return
			}
			if wasmBuild.bins[mod.Name()], wasmBuild.err = os.ReadFile(out); wasmBuild.err != nil {
				return
			}
		}
	})
	if wasmBuild.err != nil {
		tb.Fatal(wasmBuild.err)
	}
	return wasmBuild.bins
}

// TestWasmBuilds builds every example's wasm main and checks the module has
// the ABI's exports and imports nothing but WASI, and that the build links
// nothing of the kernel.
func TestWasmBuilds(t *testing.T) {
	bins := buildAll(t)
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	want := map[string][2][]api.ValueType{
		"aos_abi_v1":  {nil, nil},
		"aos_alloc":   {{i32}, {i32}},
		"aos_step":    {{i32, i32, i32, i32}, {i64}},
		"_initialize": {nil, nil},
	}
	for _, mod := range workflows.Modules() {
		t.Run(mod.Name(), func(t *testing.T) {
			cm, err := r.CompileModule(ctx, bins[mod.Name()])
			if err != nil {
				t.Fatal(err)
			}
			exp := cm.ExportedFunctions()
			for name, sig := range want {
				f, ok := exp[name]
				if !ok {
					t.Errorf("no export %s", name)
					continue
				}
				if !slices.Equal(f.ParamTypes(), sig[0]) || !slices.Equal(f.ResultTypes(), sig[1]) {
					t.Errorf("%s: %v -> %v, want %v -> %v", name, f.ParamTypes(), f.ResultTypes(), sig[0], sig[1])
				}
			}
			if _, ok := cm.ExportedMemories()["memory"]; !ok {
				t.Error("no memory export")
			}
			for _, imp := range cm.ImportedFunctions() {
				if m, _, _ := imp.Import(); m != wasi_snapshot_preview1.ModuleName {
					t.Errorf("imports %s from %s", imp.Name(), m)
				}
			}
			t.Logf("%s: %d bytes", mod.Name(), len(bins[mod.Name()]))
		})
	}

	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...")
	cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(p, "github.com/aos-kernel/aos/"); ok &&
			rest != "sdk" && rest != "modules" && rest != "modules/sys" && rest != "internal/canon" && !strings.HasPrefix(rest, "examples/workflows") {
			t.Errorf("the examples' wasm builds link %s", p)
		}
	}
}

// host is a minimal host of docs/wasm-abi.md: one warm instance per module.
type host struct {
	rt      wazero.Runtime
	inst    map[string]api.Module
	inStep  bool
	illegal []string // WASI calls made during a step that a step must not make
}

// newHost instantiates every module, on wazero's compiler for speed of
// execution (benchmarks), or else on its interpreter, which compiles in a
// fraction of the time (the race detector slows the compiler to minutes),
// watching every WASI call the guest makes.
func newHost(tb testing.TB, bins map[string][]byte, compiler bool) *host {
	tb.Helper()
	ctx := context.Background()
	h := &host{inst: map[string]api.Module{}}
	cfg := wazero.NewRuntimeConfigCompiler()
	if !compiler {
		cfg = wazero.NewRuntimeConfigInterpreter()
		ctx = experimental.WithFunctionListenerFactory(ctx, h)
	}
	h.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { h.rt.Close(context.Background()) })
	wasi_snapshot_preview1.MustInstantiate(ctx, h.rt)
	for name, bin := range bins {
		cm, err := h.rt.CompileModule(ctx, bin)
		if err != nil {
			tb.Fatal(err)
		}
		// No WithSysWalltime, WithSysNanotime or WithRandSource: the
		// instance sees wazero's deterministic stand-ins.
		inst, err := h.rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(name).WithStartFunctions("_initialize"))
		if err != nil {
			tb.Fatal(err)
		}
		h.inst[name] = inst
	}
	return h
}

// NewFunctionListener watches the WASI calls a guest makes during a step.
// Only the clocks are allowed: the Go runtime reads the monotonic clock, and
// the wall clock at the end of every GC cycle (the kernel's host answers that
// with a frozen stand-in; a step that used it would differ from its native
// build, which the byte comparison catches).
func (h *host) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.ModuleName() != wasi_snapshot_preview1.ModuleName {
		return nil
	}
	return experimental.FunctionListenerFunc(func(_ context.Context, _ api.Module, def api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
		if h.inStep && def.Name() != "clock_time_get" {
			h.illegal = append(h.illegal, fmt.Sprintf("%s%v", def.Name(), params))
		}
	})
}

// step runs entry on the input envelope and returns the result buffer (a
// copy): a tag byte, then the output envelope or the fault text.
func (h *host) step(module, entry string, input []byte) ([]byte, error) {
	ctx := context.Background()
	inst := h.inst[module]
	mem := inst.Memory()
	res, err := inst.ExportedFunction("aos_alloc").Call(ctx, uint64(len(entry)+len(input)))
	if err != nil {
		return nil, err
	}
	p := uint32(res[0])
	if !mem.WriteString(p, entry) || !mem.Write(p+uint32(len(entry)), input) {
		return nil, errors.New("aos_alloc returned a buffer outside memory")
	}
	h.inStep = true
	res, err = inst.ExportedFunction("aos_step").Call(ctx, uint64(p), uint64(len(entry)), uint64(p)+uint64(len(entry)), uint64(len(input)))
	h.inStep = false
	if err != nil {
		return nil, err
	}
	buf, ok := mem.Read(uint32(res[0]>>32), uint32(res[0]))
	if !ok {
		return nil, fmt.Errorf("result %#x outside memory", res[0])
	}
	return bytes.Clone(buf), nil
}

// resultOf is the ABI result buffer a native step's outcome corresponds to.
func resultOf(out *modules.Output, err error) []byte {
	if err != nil {
		return append([]byte{1}, err.Error()...)
	}
	return append([]byte{0}, schemas.MustMarshal(out)...)
}

// TestWasmMatchesNative is the one-source-two-targets proof: every step case
// gives the same result bytes (output envelope or fault text) from the
// native builtin and from the wasm build, and the wasm step asks the host
// for nothing a step must not have.
func TestWasmMatchesNative(t *testing.T) {
	h := newHost(t, buildAll(t), false)
	for world, cases := range allCases() {
		for _, c := range cases {
			t.Run(world+"/"+c.name, func(t *testing.T) {
				want := resultOf(native(t, &c))
				got, err := h.step(c.mod.Name(), c.entrypoint(), schemas.MustMarshal(c.input()))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("wasm   %q\nnative %q", got, want)
				}
			})
		}
	}
	// The guest's own faults: no such entrypoint, a malformed envelope.
	for name, c := range map[string]struct {
		module, entry string
		input         []byte
		want          string
	}{
		"unknown entrypoint": {"examples/choreography", "step", schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Value: []byte{0xa0}}}),
			`module examples/choreography has no entrypoint "step"`},
		"malformed input": {"examples/counter", "step", []byte{0xa0}, "sdk: malformed input envelope: no version"},
	} {
		got, err := h.step(c.module, c.entry, c.input)
		if err != nil {
			t.Fatal(err)
		}
		if want := append([]byte{1}, c.want...); !bytes.Equal(got, want) {
			t.Errorf("%s: result %q, want %q", name, got, want)
		}
	}
	if len(h.illegal) > 0 {
		t.Errorf("wasm steps made WASI calls a step must not: %v", h.illegal)
	}
}

// BenchmarkWasmStep is a guest's cost per step through wazero's compiler,
// warm instance, host-side copies included.
func BenchmarkWasmStep(b *testing.B) {
	h := newHost(b, buildAll(b), true)
	for _, c := range []stepCase{counterCases()[1], ordersCases()[0], ordersCases()[3]} {
		in := schemas.MustMarshal(c.input())
		b.Run(c.mod.Name()+"/"+c.name, func(b *testing.B) {
			for b.Loop() {
				r, err := h.step(c.mod.Name(), c.entrypoint(), in)
				if err != nil || r[0] != 0 {
					b.Fatalf("%q %v", r, err)
				}
			}
		})
	}
}
