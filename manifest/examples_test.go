package manifest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aos-kernel/aos/manifest"
)

const examplesDir = "../examples/manifests"

// TestExamplesLoad loads every example world: they are the documentation users
// copy from, so each must stay valid.
func TestExamplesLoad(t *testing.T) {
	ents, err := os.ReadDir(examplesDir)
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
			back, err := manifest.FromSource(m.Source, nil)
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
