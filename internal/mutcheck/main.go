// Command mutcheck shows that the kernel's guards are guarded: for each entry
// of its table it disables one check (a one-line source change, applied with
// `go test -overlay`, so the tree is never touched), runs the tests that are
// meant to catch it, and fails unless they fail. A mutation whose source text
// is no longer found is an error too, so the table cannot rot silently.
//
//	go run ./internal/mutcheck            # every mutation
//	go run ./internal/mutcheck budget     # those whose name contains "budget"
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// mutation replaces from (which must occur exactly once in file) with to,
// then expects `go test -run run pkg` to report a failing test.
type mutation struct {
	name     string
	file     string
	from, to string
	pkg, run string
}

func main() {
	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	var only string
	if len(os.Args) > 1 {
		only = os.Args[1]
	}
	failed := 0
	ran := 0
	for _, m := range mutations {
		if only != "" && !strings.Contains(m.name, only) {
			continue
		}
		ran++
		t0 := time.Now()
		verdict, detail := check(root, m)
		fmt.Printf("%-8s %-48s %5.1fs  %s\n", verdict, m.name, time.Since(t0).Seconds(), detail)
		if verdict != "caught" {
			failed++
		}
	}
	if ran == 0 {
		fatal(fmt.Errorf("no mutation matches %q", only))
	}
	if failed > 0 {
		fmt.Printf("%d of %d mutations were not caught by a failing test\n", failed, ran)
		os.Exit(1)
	}
	fmt.Printf("all %d mutations caught\n", ran)
}

func check(root string, m mutation) (verdict, detail string) {
	path := filepath.Join(root, m.file)
	src, err := os.ReadFile(path)
	if err != nil {
		return "ERROR", err.Error()
	}
	if n := bytes.Count(src, []byte(m.from)); n != 1 {
		return "ERROR", fmt.Sprintf("%s: the text to mutate occurs %d times (want 1): %q", m.file, n, m.from)
	}
	dir, err := os.MkdirTemp("", "mutcheck-")
	if err != nil {
		return "ERROR", err.Error()
	}
	defer os.RemoveAll(dir)
	mutated := filepath.Join(dir, filepath.Base(m.file))
	if err := os.WriteFile(mutated, bytes.Replace(src, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
		return "ERROR", err.Error()
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{path: mutated}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return "ERROR", err.Error()
	}
	cmd := exec.Command("go", "test", "-count=1", "-overlay="+ov, "-run", m.run, m.pkg)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		return "SURVIVED", "tests " + m.run + " passed with the check disabled"
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return "ERROR", "the mutated code does not build:\n" + string(out)
	case (bytes.HasPrefix(out, []byte("panic: ")) || bytes.Contains(out, []byte("\npanic: "))) && !bytes.Contains(out, []byte("--- FAIL")):
		// A test binary that panics fails its test: the check was needed
		// even to keep the kernel from crashing.
		return "caught", "a test panicked"
	case !bytes.Contains(out, []byte("--- FAIL")):
		return "ERROR", "go test failed without a failing test:\n" + string(out)
	}
	return "caught", firstFail(out)
}

func firstFail(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutcheck:", err)
	os.Exit(2)
}
