package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun runs the program twice on one world: the state survives a close
// and a reopen, and the second apply finds the manifest unchanged.
func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "world")
	for _, want := range []string{`cell a: completed {"count":42}`, `cell a: completed {"count":84}`} {
		var out bytes.Buffer
		if err := run(context.Background(), dir, "manifest", &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), `"state":{"count":`) {
			t.Fatalf("output:\n%s\nwant %q", out.String(), want)
		}
	}
}

// TestDocShowsThisProgram: docs/embedding.md shows this file verbatim, so
// the documented example is the one that compiles and passes TestRun.
func TestDocShowsThisProgram(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.go", filepath.Join("manifest", "tally.json")} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, src) {
			t.Errorf("docs/embedding.md does not contain examples/embed/%s verbatim", f)
		}
	}
}
