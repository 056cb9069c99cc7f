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
	code := m.Run()
	built.Cleanup()
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
