package manifest_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/aos-kernel/aos/manifest"
)

// FuzzLoad feeds arbitrary bytes to the loader as a manifest file. It must
// never panic; it either loads (and then the manifest must survive a round
// trip through Source with the same hash) or returns Problems.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(world(nil)))
	f.Add([]byte(`{"$kind":"manifest","name":"a/b"}`))
	f.Add([]byte(`[{"$kind":"defschema","name":"a/b@1","variant":{"A":"a/b@1"}},{"$kind":"manifest","name":"a/b"}]`))
	f.Add([]byte(`[{"a":1,"a":2}, 1e400, -0.0, "\ud800"]`))
	manifest.AddManifestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		name := filepath.Join(t.TempDir(), "world.json")
		m, err := manifest.LoadBytes(name, data)
		if err != nil {
			var ps manifest.Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error %T is not Problems: %v", err, err)
			}
			for _, p := range ps {
				if p.Msg == "" {
					t.Fatalf("problem without a message: %+v", p)
				}
			}
			return
		}
		back, err := manifest.FromSource(m.Source, nil)
		if err != nil {
			t.Fatalf("loaded, but FromSource fails:\n%v", err)
		}
		if back.Hash != m.Hash {
			t.Fatalf("FromSource hash %v, want %v", back.Hash, m.Hash)
		}
	})
}
