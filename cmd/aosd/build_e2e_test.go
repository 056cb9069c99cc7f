package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/build"
)

const zeroHash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TestBuildCommand: aosd build on a copy of the counter example with a
// placeholder hash pins the real one, says so in --json and in the table,
// and works from the manifest directory with PATH defaulting to ".".
func TestBuildCommand(t *testing.T) {
	t.Parallel()
	src, err := filepath.Abs(filepath.Join(repoManifests, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(t.TempDir(), "counter")
	if err := build.Copy(src, m); err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(m, "workflow.json")
	b, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(string(b))
	if err := os.WriteFile(wf, []byte(strings.Replace(string(b), pinned, zeroHash, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	r := aosdIn(t, ".", "build", m, "--sources-from", src, "--json")
	if r.code != 0 {
		t.Fatalf("aosd build: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Modules []struct {
			Module, File, Source, Artifact, Hash string
			Bytes                                int64
			Previous                             string `json:"previous_hash"`
			Changed                              bool
		}
		Prebuilt     []string `json:"prebuilt"`
		ManifestName string   `json:"manifest_name"`
		ManifestHash string   `json:"manifest_hash"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if len(rep.Modules) != 1 || rep.Prebuilt == nil || rep.ManifestName != "com.example/counter" || !strings.HasPrefix(rep.ManifestHash, "sha256:") {
		t.Fatalf("--json: %s", r.stdout)
	}
	mod := rep.Modules[0]
	if mod.Module != "com.example/counter@1" || mod.File != wf || mod.Artifact != filepath.Join(m, "counter.wasm") ||
		mod.Previous != zeroHash || !mod.Changed || mod.Bytes == 0 || !strings.HasSuffix(mod.Source, filepath.Join("examples", "workflows", "counter", "wasm")) {
		t.Errorf("module: %+v", mod)
	}
	after, _ := os.ReadFile(wf)
	if string(after) != strings.Replace(string(b), pinned, mod.Hash, 1) {
		t.Errorf("workflow.json changed beyond its hash:\n%s", after)
	}
	if !strings.Contains(r.stderr, "building com.example/counter@1") {
		t.Errorf("stderr: %s", r.stderr)
	}

	// Again, from the manifest directory with the default PATH: unchanged.
	r = aosdIn(t, m, "build", "--sources-from", src)
	if r.code != 0 || !regexp.MustCompile(`com.example/counter@1\s+counter.wasm\s+\d+\s+`+mod.Hash+`\s+no`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "manifest com.example/counter "+rep.ManifestHash) {
		t.Errorf("rebuild: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The copy's relative source does not resolve without --sources-from.
	r = aosdIn(t, ".", "build", m)
	if r.code != 1 || !strings.Contains(r.stderr, "module com.example/counter@1: source directory") {
		t.Errorf("missing source: exit %d %s", r.code, r.stderr)
	}
	if r := aosdIn(t, ".", "build", m, "extra"); r.code != 2 {
		t.Errorf("two paths: exit %d, want 2", r.code)
	}
}
