package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoVersionStated: README's requirement is go.mod's go line, and the
// go.mod aosd new writes for a project outside any module carries it too.
func TestGoVersionStated(t *testing.T) {
	root := filepath.Join("..", "..")
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var v string
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "go" {
			v = f[1]
		}
	}
	if v == "" {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + v + " or later: go.mod says `go " + v + "`"; !strings.Contains(string(readme), want) {
		t.Errorf("README does not say %q", want)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newGoMod("acme.com/x", abs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\ngo "+v+"\n") {
		t.Errorf("aosd new's go.mod does not require go %s:\n%s", v, b)
	}
}
