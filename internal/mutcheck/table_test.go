package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
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

// TestTableTestsExist keeps the table from pointing at tests that moved:
// every test a Go mutation names in run (alternatives split at |, anchors
// and subtests dropped; unanchored, a prefix) is declared in a _test.go file of its package, so
// a package split or a renamed test fails here rather than as a mutation
// that "survived" because no test ran.
func TestTableTestsExist(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutations {
		if strings.HasSuffix(m.file, ".ts") {
			continue
		}
		dir := filepath.Join(root, m.pkg)
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: package %s has no tests (%v)", m.name, m.pkg, err)
			continue
		}
		var all []byte
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, b...)
		}
		for _, alt := range strings.Split(m.run, "|") {
			top := strings.SplitN(alt, "/", 2)[0]
			want := "func " + strings.Trim(top, "^$")
			if strings.HasSuffix(top, "$") {
				want += "(" // anchored: the whole name; otherwise a prefix
			}
			if !bytes.Contains(all, []byte(want)) {
				t.Errorf("%s: no test matching %s in %s", m.name, top, m.pkg)
			}
		}
	}
}
