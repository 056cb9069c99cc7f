package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestTableTextsOccurOnce keeps the table from rotting between mutcheck
// runs: every mutation's source text must occur exactly once in its file,
// so a refactor that moves a guard fails `go test ./...` at once rather than
// the slow mutation step at the end of CI.
func TestTableTextsOccurOnce(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range mutations {
		if names[m.name] {
			t.Errorf("mutation %s is named twice", m.name)
		}
		names[m.name] = true
		src, err := os.ReadFile(filepath.Join(root, m.file))
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		if n := bytes.Count(src, []byte(m.from)); n != 1 {
			t.Errorf("%s: %s holds the text to mutate %d times (want 1): %q", m.name, m.file, n, m.from)
		}
		if m.from == m.to {
			t.Errorf("%s: the mutation changes nothing", m.name)
		}
	}
}
