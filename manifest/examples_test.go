package manifest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

func TestMain(m *testing.M) {
	code := m.Run()
	built.Cleanup()
	os.Exit(code)
}

// exampleArtifacts is an artifact source holding every wasm module the
// example worlds' copies were built with (the .wasm files are never
// committed, so the tests build them: examples/built).
func exampleArtifacts(t testing.TB) func(schemas.Hash) ([]byte, error) {
	t.Helper()
	arts := map[schemas.Hash][]byte{}
	err := filepath.WalkDir(built.Dir(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".wasm") {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil {
			arts[schemas.HashBytes(b)] = b
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(h schemas.Hash) ([]byte, error) {
		if b, ok := arts[h]; ok {
			return b, nil
		}
		return nil, errors.Join(manifest.ErrNoArtifact, errors.New(h.String()))
	}
}

// TestExamplesLoad loads every example world (built): they are the
// documentation users copy from, so each must stay valid.
func TestExamplesLoad(t *testing.T) {
	examplesDir := built.Dir(t)
	arts := exampleArtifacts(t)
	ents, err := os.ReadDir("../examples/manifests") // the copy has them all, built
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			m, err := manifest.Load(filepath.Join(examplesDir, e.Name()))
			if err != nil {
				t.Fatalf("load:\n%v", err)
			}
			if m.Hash.IsZero() || len(m.Source) == 0 || m.Registry == nil {
				t.Fatalf("incomplete manifest: hash %v, %d source bytes", m.Hash, len(m.Source))
			}
			for _, s := range m.Routing.Subscriptions {
				if m.Workflows[s.Workflow] == nil {
					t.Errorf("subscription to missing workflow %s", s.Workflow)
				}
			}
			back, err := manifest.FromSource(m.Source, arts)
			if err != nil {
				t.Fatalf("from source:\n%v", err)
			}
			if back.Hash != m.Hash {
				t.Fatalf("FromSource hash %v, want %v", back.Hash, m.Hash)
			}
		})
	}
	if n < 5 {
		t.Fatalf("found %d example worlds, want at least 5", n)
	}
}
