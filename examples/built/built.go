package built

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
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
// (one subdirectory per example), building it and warming WasmCache on
// first use. Call Cleanup from TestMain once the tests ran.
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

// WasmCache is the compiled-code cache Build warmed, for a wasm engine's
// CacheDir (wasmtest.Engine, aos.Options.WasmCacheDir) or AOS_WASM_CACHE
// in the environment of aosd processes. It is one directory for every test
// binary of this user, kept between runs as go keeps its build cache
// (AOS_TEST_WASM_CACHE names another): wazero keys compiled code by the
// module's bytes, the CPU and its own version, so an entry is never stale,
// and it writes each entry by rename, so test binaries running at once
// share it safely.
func WasmCache(tb testing.TB) string {
	tb.Helper()
	Dir(tb)
	return cacheDir()
}

// SharedWasmCache is WasmCache for a TestMain, after Build.
func SharedWasmCache() string { return cacheDir() }

func cacheDir() string {
	if d := os.Getenv("AOS_TEST_WASM_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "aos-test", "wasm-cache")
}

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
	var hashes []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(out, e.Name())
		if err := build.Copy(from, to); err != nil {
			os.RemoveAll(out)
			return "", err
		}
		rep, err := build.Build(ctx, to, build.Options{SourcesFrom: from})
		if err != nil {
			os.RemoveAll(out)
			return "", fmt.Errorf("example %s: %w", e.Name(), err)
		}
		for _, m := range rep.Modules {
			hashes = append(hashes, m.Hash)
		}
	}
	if err := warm(ctx, root, out, hashes); err != nil {
		os.RemoveAll(out)
		return "", fmt.Errorf("warm the wasm cache: %w", err)
	}
	return out, nil
}

// warm compiles every example module into the shared cache with plain
// (non-race) aosd binaries: init a scratch world and apply each example to
// it. Two of them when this test binary's wazero names its version
// differently from aosd's (a test binary's build information lists no
// dependencies, so its wazero says "dev" and looks in another directory of
// the cache, and rejects entries written under another version): the
// second is linked with the version this binary's wazero uses, so the
// modules are compiled once outside -race for it too, instead of inside it
// (15-40 s each). A marker file named after the modules and versions skips
// all of it when an earlier test binary warmed the same modules.
func warm(ctx context.Context, root, out string, hashes []string) error {
	cache := cacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	own := WazeroVersion()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod")) // aosd's wazero version is required there
	if err != nil {
		return err
	}
	sort.Strings(hashes)
	sum := sha256.Sum256([]byte(strings.Join(append(hashes, runtime.GOARCH, own, string(gomod)), "\n")))
	marker := filepath.Join(cache, "warm-"+hex.EncodeToString(sum[:12]))
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	scratch, err := os.MkdirTemp("", "aos-warm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	run := func(dir string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "AOS_WASM_CACHE="+cache)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, b)
		}
		return nil
	}
	bins := []string{filepath.Join(scratch, "aosd")}
	if err := run(root, "go", "build", "-o", bins[0], "./cmd/aosd"); err != nil {
		return err
	}
	if own == wazeroDefaultVersion {
		bins = append(bins, filepath.Join(scratch, "aosd-"+own))
		if err := run(root, "go", "build", "-ldflags=-X "+wazeroVersionVar+"="+own, "-o", bins[1], "./cmd/aosd"); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		return err
	}
	for i, bin := range bins {
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			w := filepath.Join(scratch, fmt.Sprintf("w%d-%s", i, e.Name()))
			if err := run(scratch, bin, "init", "--world", w); err != nil {
				return err
			}
			if err := run(scratch, bin, "apply", filepath.Join(out, e.Name()), "--world", w); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(marker, nil, 0o644)
}

// wazeroVersionVar is where wazero keeps the version it names its cache
// directory and entries after, when a linker flag sets it; unset, it reads
// the version from the binary's build information, or says
// wazeroDefaultVersion.
const (
	wazeroVersionVar     = "github.com/tetratelabs/wazero/internal/version.version"
	wazeroDefaultVersion = "dev"
)

// WazeroVersion is the version wazero finds in this binary, by its own rule
// (internal/version.GetWazeroVersion): the cache directory it reads is
// "wazero-" + WazeroVersion() + "-" + GOARCH + "-" + GOOS.
func WazeroVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if strings.Contains(d.Path, "github.com/tetratelabs/wazero") && d.Version != "" && d.Version != "(devel)" {
				return d.Version
			}
		}
	}
	return wazeroDefaultVersion
}
