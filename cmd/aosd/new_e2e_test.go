package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// aosdIn runs aosd with working directory dir (no --world added).
func aosdIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(aosdBin, args...)
	cmd.Dir = dir
	return runCmd(t, cmd)
}

// TestNewProject scaffolds a project outside any Go module, then runs the
// commands its README lists, as written, with the real binary: build, init,
// apply, send, cells show. The last one must show the state the send made.
func TestNewProject(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	aosRoot, err := filepath.Abs(filepath.Join(wd, "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tally")
	// From inside the aos checkout, as a user of a checkout runs it.
	r := aosdIn(t, wd, "new", dir, "--module", "com.acme/tally")
	if r.code != 0 {
		t.Fatalf("aosd new: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, f := range []string{"README.md", "tally.go", "wasm/main.go", "manifest/schemas.json", "manifest/workflow.json", "manifest/manifest.json", "go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("aosd new did not write %s: %v", f, err)
		}
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if !strings.Contains(string(gomod), "module acme.com/tally") || !strings.Contains(string(gomod), "replace github.com/aos-kernel/aos => "+aosRoot) {
		t.Errorf("go.mod:\n%s", gomod)
	}

	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// aosd build with no argument in the project root names the directory.
	if r := aosdIn(t, dir, "build"); r.code != 1 || !strings.Contains(r.stderr, "its directory manifest/ has one: run aosd build manifest") {
		t.Errorf("aosd build in the project root: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var cmds []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "    aosd ") {
			cmds = append(cmds, strings.TrimSpace(line))
		}
	}
	want := []string{"aosd build", "aosd init", "aosd apply", "aosd send", "aosd cells show"}
	if len(cmds) != len(want) {
		t.Fatalf("README lists %d commands, want %d:\n%s", len(cmds), len(want), readme)
	}
	var out []byte
	for i, c := range cmds {
		if !strings.HasPrefix(c, want[i]) {
			t.Fatalf("README command %d is %q, want %s ...", i, c, want[i])
		}
		sh := exec.Command("sh", "-c", c)
		sh.Dir = dir
		sh.Env = append(os.Environ(), "PATH="+filepath.Dir(aosdBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err = sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	if !regexp.MustCompile(`status\s+completed`).Match(out) || !strings.Contains(string(out), `"count": 2`) {
		t.Errorf("cells show:\n%s", out)
	}

	t.Run("refusals", func(t *testing.T) {
		if r := aosdIn(t, wd, "new", dir); r.code != 1 || !strings.Contains(r.stderr, "not empty") {
			t.Errorf("new into a project: exit %d %s", r.code, r.stderr)
		}
		if r := aosdIn(t, wd, "new", filepath.Join(t.TempDir(), "x"), "--module", "no slash"); r.code != 2 || !strings.Contains(r.stderr, "namespace/name") {
			t.Errorf("bad --module: exit %d %s", r.code, r.stderr)
		}
		outside := t.TempDir()
		if r := aosdIn(t, outside, "new", filepath.Join(outside, "x")); r.code != 1 || !strings.Contains(r.stderr, "--aos PATH") {
			t.Errorf("outside a checkout without --aos: exit %d %s", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
			t.Errorf("a refused new left files behind: %v", err)
		}
		if r := aosdIn(t, outside, "new", filepath.Join(outside, "x"), "--aos", outside); r.code != 1 || !strings.Contains(r.stderr, "not the aos source tree") {
			t.Errorf("--aos that is not aos: exit %d %s", r.code, r.stderr)
		}
	})

	t.Run("inside a module", func(t *testing.T) {
		mod := t.TempDir()
		if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/shop\n\ngo 1.24\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := aosdIn(t, mod, "new", "flows/orders", "--json")
		if r.code != 0 || !strings.Contains(r.stdout, `"import_path": "example.com/shop/flows/orders"`) || !strings.Contains(r.stdout, `"module": "com.example/orders"`) {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "go get github.com/aos-kernel/aos") {
			t.Errorf("no note that the module must require aos: %s", r.stderr)
		}
		if _, err := os.Stat(filepath.Join(mod, "flows", "orders", "go.mod")); !os.IsNotExist(err) {
			t.Errorf("a go.mod was written inside an existing module: %v", err)
		}
		main, _ := os.ReadFile(filepath.Join(mod, "flows", "orders", "wasm", "main.go"))
		if !strings.Contains(string(main), `orders "example.com/shop/flows/orders"`) {
			t.Errorf("wasm main:\n%s", main)
		}
	})
}
