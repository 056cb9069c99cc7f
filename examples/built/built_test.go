package built_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

func TestMain(m *testing.M) {
	// A cache of this binary's own, empty at the start, so
	// TestWarmCoversTestBinaries sees what one warm-up writes.
	cache, err := os.MkdirTemp("", "aos-built-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("AOS_TEST_WASM_CACHE", cache)
	code := m.Run()
	built.Cleanup()
	os.RemoveAll(cache)
	os.Exit(code)
}

// TestPinnedHashesAreCurrent: the hashes the checked-in example manifests
// pin are what building their sources gives now, so `aosd build` on a
// checkout changes nothing and a manifest hash in the docs is the one users
// see. The bytes depend on the Go release too; this holds for the release CI
// runs.
func TestPinnedHashesAreCurrent(t *testing.T) {
	dir := built.Dir(t)
	repo := filepath.Join("..", "..", "examples", "manifests")
	files, err := filepath.Glob(filepath.Join(repo, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests under %s (%v)", repo, err)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(repo, f)
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("examples/manifests/%s pins a hash its source no longer builds (with %s): run `go run ./cmd/aosd build examples/manifests/%s` and commit the result",
				rel, runtime.Version(), filepath.Dir(rel))
		}
	}
}

// TestWarmCoversTestBinaries: the warm-up writes compiled code where a test
// binary's wazero looks, not only where aosd's does (their versions
// differ, and each reads only its own directory), one entry per example
// module at least; so a -race test binary never compiles them itself.
func TestWarmCoversTestBinaries(t *testing.T) {
	cache := built.WasmCache(t)
	own := filepath.Join(cache, "wazero-"+built.WazeroVersion()+"-"+runtime.GOARCH+"-"+runtime.GOOS)
	ents, err := os.ReadDir(own)
	if err != nil {
		t.Fatalf("nothing compiled for this test binary's wazero: %v", err)
	}
	mods, err := filepath.Glob(filepath.Join(built.Dir(t), "*", "*.wasm"))
	if err != nil || len(mods) == 0 {
		t.Fatalf("no built modules (%v)", err)
	}
	if len(ents) < len(mods) {
		t.Fatalf("%s holds %d entries for %d example modules", own, len(ents), len(mods))
	}
}
