package sdk_test

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayLight pins what a wasm guest links in through the sdk:
// the standard library, the CBOR library, modules, modules/sys (the sys/
// shapes, which import nothing) and internal/canon (the shared low-level
// CBOR, itself standard library only); never schemas, the kernel, or
// anything else.
func TestImportsStayLight(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain on PATH")
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(cmd.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/aos-kernel/aos/sdk":            true,
		"github.com/aos-kernel/aos/modules":        true,
		"github.com/aos-kernel/aos/modules/sys":    true,
		"github.com/aos-kernel/aos/internal/canon": true,
		"github.com/fxamacker/cbor/v2":             true,
		"github.com/x448/float16":                  true,
	}
	for _, p := range strings.Fields(string(out)) {
		if !allowed[p] {
			t.Errorf("the sdk (GOOS=wasip1) depends on %s", p)
		}
	}
}

// TestNoAmbientAccess pins that no sdk code path can read the clock or
// randomness, touch files or the network, or start a goroutine: a guest
// doing any of it during a step fails. It checks the sdk's own sources
// (the CBOR library is checked by TestImportsStayLight's allowlist).
func TestNoAmbientAccess(t *testing.T) {
	forbidden := map[string]string{
		"time": "the clock", "crypto/rand": "randomness", "math/rand": "randomness", "math/rand/v2": "randomness",
		"os": "files and the environment", "net": "the network", "net/http": "the network", "io/fs": "files",
		"syscall": "the host", "runtime": "the scheduler",
	}
	for _, tags := range [][]string{nil, {"wasip1"}} {
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH = "linux", "amd64"
		if tags != nil {
			ctx.GOOS, ctx.GOARCH = "wasip1", "wasm"
		}
		pkg, err := ctx.ImportDir(".", 0)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range pkg.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if why, ok := forbidden[p]; ok {
					t.Errorf("%s (%s) imports %s: %s is out of a step's reach", name, ctx.GOOS, p, why)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					t.Errorf("%s: a go statement at %s: a step must not start goroutines", name, fset.Position(g.Pos()))
				}
				return true
			})
		}
	}
}
