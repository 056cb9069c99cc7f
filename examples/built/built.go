package built

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/build"
)

// Module is the aos module path, found above the test's working directory.
const Module = "github.com/aos-kernel/aos"

var (
	once sync.Once
	dir  string
	err  error
)

// Build returns the directory holding the built copy of examples/manifests
// (one subdirectory per example, and the warm cache), building it on first
// use. Call Cleanup from TestMain once the tests ran.
func Build() (string, error) {
	once.Do(func() { dir, err = buildAll(context.Background()) })
	return dir, err
}

// Dir is Build for a test: a failure fails tb.
func Dir(tb testing.TB) string {
	tb.Helper()
	d, err := Build()
	if err != nil {
		tb.Fatalf("build the example manifests: %v", err)
	}
	return d
}

// Path is Dir's copy of one example, e.g. Path(t, "counter").
func Path(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(Dir(tb), name)
}

// WasmCache is the warm compiled-code cache in dir (what Build returned),
// for kernel.Config.WasmCacheDir, aos.Options.WasmCacheDir, or
// AOS_WASM_CACHE in the environment of aosd processes.
func WasmCache(dir string) string { return filepath.Join(dir, "wasm-cache") }

// Cleanup removes the copy.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

func buildAll(ctx context.Context) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := build.FindModule(wd, Module)
	if err != nil {
		return "", err
	}
	src := filepath.Join(root, "examples", "manifests")
	ents, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp("", "aos-examples-")
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(out, e.Name())
		if err := build.Copy(from, to); err != nil {
			os.RemoveAll(out)
			return "", err
		}
		if _, err := build.Build(ctx, to, build.Options{SourcesFrom: from}); err != nil {
			os.RemoveAll(out)
			return "", fmt.Errorf("example %s: %w", e.Name(), err)
		}
	}
	if err := warm(ctx, root, out); err != nil {
		os.RemoveAll(out)
		return "", fmt.Errorf("warm the wasm cache: %w", err)
	}
	return out, nil
}

// warm compiles every example module into WasmCache(out) with a plain aosd:
// init a scratch world and apply each example to it.
func warm(ctx context.Context, root, out string) error {
	scratch, err := os.MkdirTemp("", "aos-warm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	bin := filepath.Join(scratch, "aosd")
	run := func(dir string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "AOS_WASM_CACHE="+WasmCache(out))
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, b)
		}
		return nil
	}
	if err := run(root, "go", "build", "-o", bin, "./cmd/aosd"); err != nil {
		return err
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == filepath.Base(WasmCache(out)) {
			continue
		}
		w := filepath.Join(scratch, "w-"+e.Name())
		if err := run(scratch, bin, "init", "--world", w); err != nil {
			return err
		}
		if err := run(scratch, bin, "apply", filepath.Join(out, e.Name()), "--world", w); err != nil {
			return err
		}
	}
	return nil
}
