package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/schemas"
)

// aosModule is the Go module path of aos, which a new project requires.
const aosModule = "github.com/aos-kernel/aos"

//go:embed template/*.tmpl
var templates embed.FS

// project is what the templates of `aosd new` are filled with.
type project struct {
	Module     string // namespace/name: the manifest's name and the SDK module's
	Namespace  string
	Name       string
	ModuleDef  string // the defmodule: namespace/name@1
	Workflow   string // namespace/name.step@1
	Key        string // schema names
	Event      string
	State      string
	Pkg        string // Go package name of the workflow library
	ImportPath string // its import path
}

// newFiles maps each template to the file it becomes ({{pkg}} is the package name).
var newFiles = []struct{ tmpl, path string }{
	{"README.md.tmpl", "README.md"},
	{"gitignore.tmpl", ".gitignore"},
	{"workflow.go.tmpl", "{{pkg}}.go"},
	{"wasm.go.tmpl", filepath.Join("wasm", "main.go")},
	{"schemas.json.tmpl", filepath.Join("manifest", "schemas.json")},
	{"workflow.json.tmpl", filepath.Join("manifest", "workflow.json")},
	{"manifest.json.tmpl", filepath.Join("manifest", "manifest.json")},
}

func cmdNew(fs *flag.FlagSet, a *app) func([]string) error {
	module := fs.String("module", "", "the module's name, namespace/name (default com.example/<DIR's base name>)")
	aosDir := fs.String("aos", "", "the aos source tree a new go.mod replaces "+aosModule+" with (default: found above the working directory)")
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "DIR"); err != nil {
			return err
		}
		dir, err := filepath.Abs(pos[0])
		if err != nil {
			return err
		}
		p, err := newProject(dir, *module)
		if err != nil {
			return err
		}
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return fmt.Errorf("%s exists and is not empty; aosd new writes into a new or empty directory", dir)
		}
		// Decide where the code lives before writing anything, so a
		// failure leaves nothing behind.
		var gomod []byte
		root, modPath, err := build.EnclosingModule(filepath.Dir(dir))
		inModule := err == nil
		switch {
		case inModule:
			rel, _ := filepath.Rel(root, dir)
			p.ImportPath = modPath + "/" + filepath.ToSlash(rel)
		case errors.Is(err, os.ErrNotExist):
			src, err := findAOS(*aosDir)
			if err != nil {
				return err
			}
			modPath = goModulePath(p)
			p.ImportPath = modPath
			gomod, err = newGoMod(modPath, src)
			if err != nil {
				return err
			}
			if _, err := exec.LookPath("go"); err != nil {
				return fmt.Errorf("%w in PATH: aosd new runs go mod tidy, and aosd build compiles with Go %s or later (https://go.dev/dl/)", build.ErrNoGo, build.MinGo)
			}
		default:
			return err
		}
		var written []string
		for _, f := range newFiles {
			path := strings.ReplaceAll(f.path, "{{pkg}}", p.Pkg)
			b, err := render(f.tmpl, p)
			if err != nil {
				return err
			}
			if strings.HasSuffix(path, ".go") {
				if b, err = format.Source(b); err != nil {
					return fmt.Errorf("template %s: %w", f.tmpl, err)
				}
			}
			if err := writeFile(filepath.Join(dir, path), b); err != nil {
				return err
			}
			written = append(written, path)
		}
		if gomod != nil {
			if err := writeFile(filepath.Join(dir, "go.mod"), gomod); err != nil {
				return err
			}
			written = append(written, "go.mod")
			cmd := exec.CommandContext(a.ctx, "go", "mod", "tidy")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go mod tidy in %s: %v\n%s", dir, err, strings.TrimSpace(string(out)))
			}
			written = append(written, "go.sum")
		}
		if inModule && modPath != aosModule && !requiresAOS(root) {
			fmt.Fprintf(a.stderr, "note: %s is inside module %s (%s), which does not require %s yet: run `go get %s` there\n",
				dir, modPath, root, aosModule, aosModule)
		}
		if a.json {
			return a.printJSON(map[string]any{"dir": dir, "module": p.Module, "workflow": p.Workflow,
				"event": p.Event, "import_path": p.ImportPath, "files": written})
		}
		fmt.Fprintf(a.stdout, "created %s (%s, workflow %s)\n", dir, p.Module, p.Workflow)
		for _, f := range written {
			fmt.Fprintf(a.stdout, "  %s\n", f)
		}
		fmt.Fprintf(a.stdout, "\nnext (see %s):\n  cd %s\n", filepath.Join(dir, "README.md"), dir)
		for _, line := range readmeCommands(p) {
			fmt.Fprintf(a.stdout, "  %s\n", line)
		}
		return nil
	}
}

// newProject derives every name from DIR and --module.
func newProject(dir, module string) (*project, error) {
	if module == "" {
		base := strings.Map(func(r rune) rune {
			if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '-') {
				return r
			}
			return -1
		}, filepath.Base(dir))
		module = "com.example/" + strings.TrimLeft(base, "._-")
	}
	if err := schemas.CheckName(module + "@1"); err != nil || strings.Contains(module, "@") {
		return nil, usagef("--module %q is not of the form namespace/name (letters, digits, '.', '_', '-'; e.g. com.acme/tally)", module)
	}
	ns, name, _ := strings.Cut(module, "/")
	camel := camelCase(name)
	p := &project{
		Module: module, Namespace: ns, Name: name,
		ModuleDef: module + "@1", Workflow: module + ".step@1",
		Key: ns + "/" + camel + "Key@1", Event: ns + "/" + camel + "Event@1", State: ns + "/" + camel + "State@1",
		Pkg: goPackageName(name),
	}
	return p, nil
}

// camelCase turns "order-flow.v2" into "OrderFlowV2".
func camelCase(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '-' || r == '_' || r == '.' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// goPackageName turns a module name into a Go package name: lower-case
// letters and digits, starting with a letter.
func goPackageName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' && b.Len() > 0 {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "workflow"
	}
	return b.String()
}

// goModulePath is a new go.mod's module path: the namespace reversed into a
// domain (com.acme -> acme.com) and the name.
func goModulePath(p *project) string {
	parts := strings.Split(p.Namespace, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.ToLower(strings.Join(parts, ".")) + "/" + strings.ToLower(p.Name)
}

// findAOS locates the aos source tree: the --aos flag, else the module
// github.com/aos-kernel/aos at or above the working directory.
func findAOS(flagDir string) (string, error) {
	if flagDir != "" {
		abs, err := filepath.Abs(flagDir)
		if err != nil {
			return "", err
		}
		b, err := os.ReadFile(filepath.Join(abs, "go.mod"))
		if err != nil || !bytes.Contains(b, []byte("module "+aosModule)) {
			return "", fmt.Errorf("--aos %s: not the aos source tree (no go.mod of module %s there)", flagDir, aosModule)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := build.FindModule(wd, aosModule)
	if err != nil {
		return "", fmt.Errorf("the new directory is outside any Go module, so aosd new writes a go.mod that uses a local aos source tree, "+
			"and none was found: run aosd new from inside an aos checkout, or pass --aos PATH (%v)", err)
	}
	return root, nil
}

// newGoMod is a go.mod requiring aos from the source tree at src.
func newGoMod(modPath, src string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return nil, err
	}
	goVersion := "1.24"
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "go" {
			goVersion = f[1]
		}
	}
	return fmt.Appendf(nil, "module %s\n\ngo %s\n\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n",
		modPath, goVersion, aosModule, aosModule, src), nil
}

// requiresAOS reports whether the go.mod in root mentions aos.
func requiresAOS(root string) bool {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	return err == nil && bytes.Contains(b, []byte(aosModule))
}

func render(name string, p *project) ([]byte, error) {
	t, err := template.ParseFS(templates, "template/"+name)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// readmeCommands are the commands the project's README lists, in order.
func readmeCommands(p *project) []string {
	b, err := render("README.md.tmpl", p)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "    aosd ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
