package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/aos-kernel/aos"

// pkg is what `go list -json` says of one package of the module.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// layers reads the fenced ```layers block of docs/ARCHITECTURE.md: lines
// "N: pkg pkg ...", package paths relative to the module ("." is the root).
func layers(t *testing.T) map[string]int {
	t.Helper()
	path := filepath.Join("..", "..", "docs", "ARCHITECTURE.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "```layers":
			in = true
			continue
		case in && line == "```":
			in = false
			continue
		case !in || line == "":
			continue
		}
		num, rest, ok := strings.Cut(line, ":")
		level, err := strconv.Atoi(strings.TrimSpace(num))
		if !ok || err != nil {
			t.Fatalf("%s:%d: want \"N: pkg pkg ...\", got %q", path, n, line)
		}
		for _, p := range strings.Fields(rest) {
			if _, dup := out[p]; dup {
				t.Fatalf("%s:%d: %s is in two layers", path, n, p)
			}
			out[p] = level
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no ```layers block", path)
	}
	return out
}

func rel(importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, module+"/")
	return r, ok
}

// TestImportsFollowTheLayers: every package of the module is in a layer of
// docs/ARCHITECTURE.md, and its non-test imports from the module are all in
// strictly lower layers. A new package or a new arrow upward fails here
// until the document says where it belongs.
func TestImportsFollowTheLayers(t *testing.T) {
	lay := layers(t)
	seen := map[string]bool{}
	for _, p := range listPackages(t) {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		seen[name] = true
		level, ok := lay[name]
		if !ok {
			t.Errorf("package %s is in no layer of docs/ARCHITECTURE.md", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := rel(imp)
			if !ok {
				continue
			}
			dl, ok := lay[dep]
			if !ok {
				continue // reported as its own package
			}
			if dl >= level {
				t.Errorf("%s (layer %d) imports %s (layer %d): arrows must point down", name, level, dep, dl)
			}
		}
	}
	for name := range lay {
		if !seen[name] {
			t.Errorf("docs/ARCHITECTURE.md places %s, which is not a package", name)
		}
	}
}

// forbidden lists imports a package's files, tests included, must not have.
var forbidden = map[string][]string{
	"kernel":  {"encoding/json", "github.com/dgraph-io/badger/v4"},
	"journal": {"github.com/dgraph-io/badger/v4"},
	"cas":     {"github.com/dgraph-io/badger/v4"},
}

// TestKernelNamesNoEngine: no file under kernel/ (tests included) imports
// Badger or encoding/json; the journal and CAS ports' packages do not know
// Badger either.
func TestKernelNamesNoEngine(t *testing.T) {
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		bad := forbidden[name]
		if bad == nil {
			continue
		}
		all := slices.Concat(p.Imports, p.TestImports, p.XTestImports)
		for _, b := range bad {
			if slices.Contains(all, b) {
				t.Errorf("%s imports %s", name, b)
			}
		}
	}
	for name := range forbidden {
		if _, err := os.Stat(filepath.Join("..", "..", name)); err != nil {
			t.Errorf("forbidden-import rule for %s, which does not exist: %v", name, err)
		}
	}
}
