package build_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/manifest"
)

const placeholder = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// The module file is laid out the way a person might write it, two modules
// in one file, one with a stale hash and one with none, so the test can pin
// that only hash strings change.
const modulesJSON = `[
  {"$kind": "defmodule", "name": "com.t/a@1",
   "runtime": {"kind": "wasm",   "artifact": "a.wasm",
               "hash": "` + placeholder + `",
               "source": "../reactor"}},

  {"$kind": "defmodule",
   "runtime": {"source": "../reactor", "kind": "wasm", "artifact": "b.wasm"},
   "name": "com.t/b@1"}
]
`

const restJSON = `[
  {"$kind": "defschema", "name": "com.t/E@1", "schema": {"type": "object"}},
  {"$kind": "defschema", "name": "com.t/S@1", "schema": {"type": "object"}},
  {"$kind": "defworkflow", "name": "com.t/a.step@1", "state": "com.t/S@1", "event": "com.t/E@1",
   "effects_emitted": [], "impl": {"module": "com.t/a@1", "entrypoint": "step"}},
  {"$kind": "defworkflow", "name": "com.t/b.step@1", "state": "com.t/S@1", "event": "com.t/E@1",
   "effects_emitted": [], "impl": {"module": "com.t/b@1", "entrypoint": "step"}},
  {"$kind": "manifest", "name": "com.t/world", "routing": {"subscriptions": [
    {"event": "com.t/E@1", "workflow": "com.t/a.step@1"},
    {"event": "com.t/E@1", "workflow": "com.t/b.step@1"}]}}
]
`

// project lays out root/reactor (a copy of testdata/reactor, its own Go
// module) and root/m (the manifest), and returns root.
func project(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyDir(t, filepath.Join("testdata", "reactor"), filepath.Join(root, "reactor"))
	write(t, filepath.Join(root, "m", "modules.json"), modulesJSON)
	write(t, filepath.Join(root, "m", "rest.json"), restJSON)
	return root
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(to, e.Name()), string(b))
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileHash(t *testing.T, path string) string {
	sum := sha256.Sum256([]byte(read(t, path)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestBuildRewritesOnlyTheHashes(t *testing.T) {
	root := project(t)
	m := filepath.Join(root, "m")
	var log bytes.Buffer
	rep, err := build.Build(context.Background(), m, build.Options{Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "building "); n != 1 {
		t.Errorf("two modules sharing a source built %d times; want once:\n%s", n, log.String())
	}
	h := fileHash(t, filepath.Join(m, "a.wasm"))
	if got := fileHash(t, filepath.Join(m, "b.wasm")); got != h {
		t.Errorf("b.wasm %s differs from a.wasm %s", got, h)
	}
	want := strings.Replace(modulesJSON, placeholder, h, 1)
	want = strings.Replace(want, `"artifact": "b.wasm"}`, `"artifact": "b.wasm", "hash": "`+h+`"}`, 1)
	if got := read(t, filepath.Join(m, "modules.json")); got != want {
		t.Errorf("modules.json rewritten beyond its hashes:\n%s\nwant:\n%s", got, want)
	}
	if got := read(t, filepath.Join(m, "rest.json")); got != restJSON {
		t.Errorf("rest.json changed:\n%s", got)
	}
	if len(rep.Modules) != 2 || rep.Modules[0].Name != "com.t/a@1" || rep.Modules[1].Name != "com.t/b@1" {
		t.Fatalf("modules: %+v", rep.Modules)
	}
	for _, mod := range rep.Modules {
		if mod.Hash != h || !mod.Changed || mod.Bytes == 0 || mod.Source != filepath.Join(evalSymlinks(t, root), "reactor") {
			t.Errorf("module %+v", mod)
		}
	}
	if rep.Modules[0].Previous != placeholder || rep.Modules[1].Previous != "" {
		t.Errorf("previous hashes: %q %q", rep.Modules[0].Previous, rep.Modules[1].Previous)
	}
	loaded, err := manifest.Load(m)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ManifestName != "com.t/world" || rep.ManifestHash != loaded.Hash.String() {
		t.Errorf("report names manifest %s %s; Load says %s", rep.ManifestName, rep.ManifestHash, loaded.Hash)
	}

	// Again: nothing changes, and the files are left alone.
	before := read(t, filepath.Join(m, "modules.json"))
	rep, err = build.Build(context.Background(), m, build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range rep.Modules {
		if mod.Changed || mod.Hash != h {
			t.Errorf("rebuild: %+v", mod)
		}
	}
	if read(t, filepath.Join(m, "modules.json")) != before {
		t.Error("a rebuild with nothing changed rewrote modules.json")
	}
}

func evalSymlinks(t *testing.T, p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBuildIsReproducible: the same source built in another directory, and
// after a commit, gives the same bytes (-trimpath, -buildvcs=false).
func TestBuildIsReproducible(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	t.Setenv("GOFLAGS", "-buildvcs=auto") // a -buildvcs=false from the environment would hide a Build without it
	root1, root2 := project(t), project(t)
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(root2, "init", "-q")
	run(root2, "add", ".")
	run(root2, "commit", "-q", "-m", "one")
	hashes := map[string]bool{}
	for _, root := range []string{root1, root2} {
		rep, err := build.Build(context.Background(), filepath.Join(root, "m"), build.Options{})
		if err != nil {
			t.Fatal(err)
		}
		hashes[rep.Modules[0].Hash] = true
	}
	write(t, filepath.Join(root2, "NOTES"), "another commit\n")
	run(root2, "add", ".")
	run(root2, "commit", "-q", "-m", "two")
	rep, err := build.Build(context.Background(), filepath.Join(root2, "m"), build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hashes[rep.Modules[0].Hash] = true
	if len(hashes) != 1 {
		t.Fatalf("one source gave %d different hashes: %v", len(hashes), hashes)
	}
}

// TestSourcesFrom builds a manifest copied away from its sources.
func TestSourcesFrom(t *testing.T) {
	root := project(t)
	away := filepath.Join(t.TempDir(), "copy")
	copyDir(t, filepath.Join(root, "m"), away)
	if _, err := build.Build(context.Background(), away, build.Options{}); err == nil || !strings.Contains(err.Error(), "source directory") {
		t.Fatalf("the copy built without its sources: %v", err)
	}
	rep, err := build.Build(context.Background(), away, build.Options{SourcesFrom: filepath.Join(root, "m")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(away, "a.wasm")); err != nil {
		t.Fatalf("artifact not written next to the copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "m", "a.wasm")); !os.IsNotExist(err) {
		t.Fatalf("artifact written next to the original: %v", err)
	}
	if len(rep.Modules) != 2 {
		t.Fatalf("%+v", rep)
	}
}

func TestBuildErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("missing source", func(t *testing.T) {
		root := project(t)
		os.RemoveAll(filepath.Join(root, "reactor"))
		_, err := build.Build(ctx, filepath.Join(root, "m"), build.Options{})
		if err == nil || !strings.Contains(err.Error(), "modules.json: module com.t/a@1: source directory") || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("err = %v", err)
		}
		if read(t, filepath.Join(root, "m", "modules.json")) != modulesJSON {
			t.Error("a failed build rewrote modules.json")
		}
	})
	t.Run("compile error", func(t *testing.T) {
		root := project(t)
		os.RemoveAll(filepath.Join(root, "reactor"))
		copyDir(t, filepath.Join("testdata", "broken"), filepath.Join(root, "reactor"))
		_, err := build.Build(ctx, filepath.Join(root, "m"), build.Options{})
		var ce *build.CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), `cannot use "not an int"`) || !strings.Contains(err.Error(), "com.t/a@1, com.t/b@1") {
			t.Fatalf("err = %v", err)
		}
		if read(t, filepath.Join(root, "m", "modules.json")) != modulesJSON {
			t.Error("a failed build rewrote modules.json")
		}
	})
	t.Run("no go toolchain", func(t *testing.T) {
		root := project(t)
		t.Setenv("PATH", t.TempDir())
		_, err := build.Build(ctx, filepath.Join(root, "m"), build.Options{})
		if !errors.Is(err, build.ErrNoGo) || !strings.Contains(err.Error(), "Go 1.24 or later") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("hash not a string", func(t *testing.T) {
		root := project(t)
		write(t, filepath.Join(root, "m", "modules.json"), `{"$kind":"defmodule","name":"com.t/a@1","runtime":{"kind":"wasm","artifact":"a.wasm","hash":7,"source":"../reactor"}}`)
		_, err := build.Build(ctx, filepath.Join(root, "m"), build.Options{})
		if err == nil || !strings.Contains(err.Error(), `def com.t/a@1: runtime "hash" must be a string`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("manifest still invalid", func(t *testing.T) {
		root := project(t)
		write(t, filepath.Join(root, "m", "rest.json"), strings.Replace(restJSON, `"com.t/S@1", "event"`, `"com.t/Nope@1", "event"`, 1))
		rep, err := build.Build(ctx, filepath.Join(root, "m"), build.Options{})
		if err == nil || !strings.Contains(err.Error(), "built, but the manifest does not load") || !strings.Contains(err.Error(), "com.t/Nope@1") {
			t.Fatalf("err = %v", err)
		}
		if rep == nil || len(rep.Modules) != 2 {
			t.Fatalf("report: %+v", rep)
		}
	})
}

// TestSingleDefFile: a file holding one def object, not an array.
func TestSingleDefFile(t *testing.T) {
	root := project(t)
	m := filepath.Join(root, "m")
	write(t, filepath.Join(m, "modules.json"), `{"$kind":"defmodule","name":"com.t/a@1","runtime":{"kind":"wasm","artifact":"a.wasm","hash":"`+placeholder+`","source":"../reactor"}}`)
	write(t, filepath.Join(m, "b.json"), `{"$kind":"defmodule","name":"com.t/b@1","runtime":{"kind":"wasm","artifact":"a.wasm","hash":"`+placeholder+`","source":"../reactor"}}`)
	rep, err := build.Build(context.Background(), m, build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Modules) != 2 || !strings.Contains(read(t, filepath.Join(m, "b.json")), rep.Modules[0].Hash) {
		t.Fatalf("%+v\n%s", rep, read(t, filepath.Join(m, "b.json")))
	}
}

// TestPrebuilt: a wasm module that names no source is used as it is.
func TestPrebuilt(t *testing.T) {
	root := project(t)
	m := filepath.Join(root, "m")
	code := "\x00asm\x01\x00\x00\x00"
	write(t, filepath.Join(m, "c.wasm"), code)
	h := fileHash(t, filepath.Join(m, "c.wasm"))
	c := `[{"$kind": "defmodule", "name": "com.t/c@1", "runtime": {"kind": "wasm", "artifact": "c.wasm", "hash": "` + h + `"}},
  {"$kind": "defworkflow", "name": "com.t/c.step@1", "state": "com.t/S@1", "event": "com.t/E@1",
   "effects_emitted": [], "impl": {"module": "com.t/c@1", "entrypoint": "step"}}]`
	write(t, filepath.Join(m, "c.json"), c)
	rep, err := build.Build(context.Background(), m, build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Prebuilt) != 1 || rep.Prebuilt[0] != "com.t/c@1" || len(rep.Modules) != 2 {
		t.Fatalf("%+v", rep)
	}
	if read(t, filepath.Join(m, "c.json")) != c || read(t, filepath.Join(m, "c.wasm")) != code {
		t.Error("a module without source was touched")
	}
}
