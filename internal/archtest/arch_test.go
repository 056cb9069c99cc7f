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
	Deps         []string // every package it builds on, transitively (not its tests')
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

const archDoc = "docs/ARCHITECTURE.md"

// line is one "head: word word ..." line of a fenced block.
type line struct {
	n     int // line number in the file
	head  string
	words []string
}

// block reads the fenced ```name block of docs/ARCHITECTURE.md.
func block(t *testing.T, name string) []line {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", archDoc))
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "```"+name:
			in, found = true, true
			continue
		case in && text == "```":
			in = false
			continue
		case !in || text == "":
			continue
		}
		head, rest, ok := strings.Cut(text, ":")
		if !ok {
			t.Fatalf("%s:%d: want \"head: word word ...\", got %q", archDoc, n, text)
		}
		out = append(out, line{n: n, head: strings.TrimSpace(head), words: strings.Fields(rest)})
	}
	if !found {
		t.Fatalf("%s has no ```%s block", archDoc, name)
	}
	return out
}

// layers reads the ```layers block: lines "N: pkg pkg ...", package paths
// relative to the module ("." is the root).
func layers(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, l := range block(t, "layers") {
		level, err := strconv.Atoi(l.head)
		if err != nil {
			t.Fatalf("%s:%d: layer %q is not a number", archDoc, l.n, l.head)
		}
		for _, p := range l.words {
			if _, dup := out[p]; dup {
				t.Fatalf("%s:%d: %s is in two layers", archDoc, l.n, p)
			}
			out[p] = level
		}
	}
	return out
}

// TestImportsAreDocumented: the ```imports block lists every package of the
// module with exactly its imports from the module, as go list has them.
func TestImportsAreDocumented(t *testing.T) {
	doc := map[string][]string{}
	for _, l := range block(t, "imports") {
		if _, dup := doc[l.head]; dup {
			t.Fatalf("%s:%d: %s listed twice", archDoc, l.n, l.head)
		}
		doc[l.head] = l.words
	}
	for _, p := range listPackages(t) {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		var got []string
		for _, imp := range p.Imports {
			if dep, ok := rel(imp); ok {
				got = append(got, dep)
			}
		}
		slices.Sort(got)
		want, listed := doc[name]
		delete(doc, name)
		switch {
		case !listed:
			t.Errorf("%s: package %s is not in the imports block; it imports %v", archDoc, name, got)
		case !slices.Equal(got, want):
			t.Errorf("%s: %s imports %v, the imports block says %v", archDoc, name, got, want)
		}
	}
	for name := range doc {
		t.Errorf("%s: the imports block lists %s, which is not a package", archDoc, name)
	}
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
	"kernel":  {"encoding/json", "github.com/dgraph-io/badger/v4", "github.com/jackc/pgx/v5"},
	"journal": {"github.com/dgraph-io/badger/v4", "github.com/jackc/pgx/v5"},
	"cas":     {"github.com/dgraph-io/badger/v4", "github.com/jackc/pgx/v5"},
}

// TestKernelNamesNoEngine: no file under kernel/ (tests included) imports
// Badger, PostgreSQL's driver or encoding/json; the journal and CAS ports'
// packages know neither engine either.
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

// TestInternalStaysDown: internal/ is the ground floor. Its packages, tests
// included, import nothing of this module outside internal/: a test rig
// that wraps a port declares the small interface it wraps, or lives beside
// what it tests or serves (STYLE.md).
func TestInternalStaysDown(t *testing.T) {
	n := 0
	for _, p := range listPackages(t) {
		name, _ := rel(p.ImportPath)
		if !strings.HasPrefix(name, "internal/") {
			continue
		}
		n++
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if dep, ok := rel(imp); ok && !strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s imports %s: nothing in internal/ may import a package of this module outside internal/", name, dep)
			}
		}
	}
	if n < 5 {
		t.Fatalf("found only %d packages under internal/", n)
	}
}

// TestKernelIsHandedItsEngine: the kernel runs wasm modules through the
// modules.Compiler its caller hands it (Config.Wasm) and names no engine:
// neither modules/wasm nor wazero is among what it builds on.
func TestKernelIsHandedItsEngine(t *testing.T) {
	for _, p := range listPackages(t) {
		if p.ImportPath != module+"/kernel" {
			continue
		}
		if !slices.Contains(p.Deps, module+"/modules") {
			t.Fatalf("kernel's dependencies %v lack modules: is Deps read?", p.Deps)
		}
		for _, d := range p.Deps {
			if d == module+"/modules/wasm" || d == "github.com/tetratelabs/wazero" {
				t.Errorf("kernel builds on %s: it must be handed its wasm engine (Config.Wasm), not name one", d)
			}
		}
		return
	}
	t.Fatal("go list found no kernel package")
}
