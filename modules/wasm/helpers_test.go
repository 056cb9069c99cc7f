package wasm_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/schemas"
)

// The test guests, built once per test binary from testdata/guests/<name>
// (testdata is outside ./..., so only these builds see them).
var guestNames = []string{"abi", "foreign", "nostep", "badsig", "initpanic", "initspin"}

var guests struct {
	once  sync.Once
	dir   string
	cache string // a CacheDir every test engine shares: compile each guest once
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guests.dir != "" {
		os.RemoveAll(guests.dir)
	}
	os.Exit(code)
}

func buildGuests() {
	dir, err := os.MkdirTemp("", "aos-wasm-test-")
	if err != nil {
		guests.err = err
		return
	}
	guests.dir, guests.cache = dir, filepath.Join(dir, "cache")
	goTool, err := exec.LookPath("go")
	if err != nil {
		guests.err = err
		return
	}
	errs := make([]error, len(guestNames))
	var wg sync.WaitGroup
	for i, name := range guestNames {
		wg.Go(func() {
			errs[i] = build.Package(context.Background(), goTool, "./testdata/guests/"+name, filepath.Join(dir, name+".wasm"))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			guests.err = err
			return
		}
	}
}

// guest returns the wasm of test guest name.
func guest(tb testing.TB, name string) []byte {
	tb.Helper()
	guests.once.Do(buildGuests)
	if guests.err != nil {
		tb.Fatal(guests.err)
	}
	b, err := os.ReadFile(filepath.Join(guests.dir, name+".wasm"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newEngine returns an engine on the shared compilation cache, closed when
// the test ends.
func newEngine(tb testing.TB, cfg wasm.Config) *wasm.Engine {
	tb.Helper()
	guests.once.Do(buildGuests)
	if guests.err != nil {
		tb.Fatal(guests.err)
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = guests.cache
	}
	e, err := wasm.NewEngine(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// compile compiles test guest name, closed when the test ends.
func compile(tb testing.TB, e *wasm.Engine, name string, maxMemoryMiB uint32) *wasm.Module {
	tb.Helper()
	code := guest(tb, name)
	m, err := e.CompileModule(context.Background(), name, schemas.HashBytes(code).String(), code, maxMemoryMiB)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// abi is a Module of the abi guest on a default engine.
func abi(tb testing.TB) *wasm.Module {
	tb.Helper()
	return compile(tb, newEngine(tb, wasm.Config{}), "abi", 0)
}

func cborMap(kv ...any) []byte {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return schemas.MustMarshal(m)
}

func counterInput(state []byte, by uint64) *modules.Input {
	return &modules.Input{
		Version: 1,
		State:   state,
		Event:   modules.EventIn{Schema: "test/Add@1", Value: cborMap("by", by)},
	}
}

func step(tb testing.TB, m *wasm.Module, entry string, in *modules.Input) *modules.Output {
	tb.Helper()
	if in == nil {
		in = counterInput(nil, 1)
	}
	out, err := m.Step(context.Background(), entry, in)
	if err != nil {
		tb.Fatalf("step %s: %v", entry, err)
	}
	return out
}

// count decodes a {count: n} state.
func count(tb testing.TB, state []byte) uint64 {
	tb.Helper()
	var s struct {
		Count uint64 `cbor:"count"`
	}
	if err := schemas.Unmarshal(state, &s); err != nil {
		tb.Fatalf("state %x: %v", state, err)
	}
	return s.Count
}
