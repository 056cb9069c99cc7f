package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// MinGo is the oldest Go release that builds wasm workflow modules: the
// SDK exports its ABI with go:wasmexport, and a c-shared wasip1 build (a
// WASI reactor) needs Go 1.24.
const MinGo = "1.24"

// Flags are the `go build` flags Build passes before -o.
var Flags = []string{"-buildmode=c-shared", "-trimpath", "-buildvcs=false"}

// Env is what Build adds to the environment of `go build`.
var Env = []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}

// ErrNoGo means no Go toolchain was found.
var ErrNoGo = errors.New("build: go toolchain not found")

// CompileError is a `go build` that failed; Output is what the compiler said.
type CompileError struct {
	Modules []string // the defs that build from Source
	Source  string
	Output  string
	Err     error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("go build %s (module %s): %v\n%s", e.Source, strings.Join(e.Modules, ", "), e.Err, strings.TrimRight(e.Output, "\n"))
}

func (e *CompileError) Unwrap() error { return e.Err }

// Options tunes Build. The zero value builds with the go command in PATH.
type Options struct {
	// Go is the go command to run (default: "go" in PATH, else
	// GOROOT/bin/go).
	Go string
	// GOROOT, when set, is where to look for bin/go when Go is empty and no
	// go is in PATH (aosd passes $GOROOT; the package reads no environment).
	GOROOT string
	// SourcesFrom, when set, is the directory relative "source" paths resolve
	// against instead of the directory of the JSON file that declares the
	// def: for a manifest copied away from the tree its sources live in.
	// Artifacts are still written next to the JSON files.
	SourcesFrom string
	// Log, when set, gets a line per package as it is built.
	Log io.Writer
}

// Module is one wasm module Build built.
type Module struct {
	Name     string `json:"module"`   // the defmodule's name
	File     string `json:"file"`     // the JSON file that declares it
	Source   string `json:"source"`   // the Go package directory built
	Artifact string `json:"artifact"` // the wasm file written
	Bytes    int64  `json:"bytes"`
	Hash     string `json:"hash"`          // sha256:<hex> of the artifact, now in the def
	Previous string `json:"previous_hash"` // the def's hash before ("" when it had none)
	Changed  bool   `json:"changed"`       // Hash differs from Previous
}

// Report is what Build did.
type Report struct {
	Modules []Module `json:"modules"`
	// Prebuilt lists wasm modules that name no "source": their artifacts
	// are used as they are.
	Prebuilt     []string `json:"prebuilt"`
	ManifestName string   `json:"manifest_name"`
	ManifestHash string   `json:"manifest_hash"`
}

// Build builds every wasm defmodule of the manifest at path (a JSON file or
// a directory of them) that names a "source", rewrites each one's "hash" to
// its artifact's, and then loads the manifest, which must now load. When a
// build fails no JSON file changes (artifacts built before it stay).
func Build(ctx context.Context, path string, opts Options) (*Report, error) {
	files, err := manifestFiles(path)
	if err != nil {
		return nil, err
	}
	var defs []wasmDef
	contents := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		contents[f] = data
		ds, err := scanFile(f, data)
		if err != nil {
			return nil, err
		}
		defs = append(defs, ds...)
	}
	rep := &Report{Modules: []Module{}, Prebuilt: []string{}}
	jobs, err := plan(defs, opts)
	if err != nil {
		return nil, err
	}
	for _, d := range defs {
		if d.source == "" {
			rep.Prebuilt = append(rep.Prebuilt, d.name)
		}
	}
	if len(jobs) > 0 {
		goCmd, err := findGo(ctx, opts.Go, opts.GOROOT, jobs[0].source)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			if err := j.run(ctx, goCmd, opts.Log); err != nil {
				return nil, err
			}
		}
	}
	edits := map[string][]edit{}
	for _, j := range jobs {
		for i, d := range j.defs {
			rep.Modules = append(rep.Modules, Module{Name: d.name, File: d.file, Source: j.source, Artifact: j.artifacts[i],
				Bytes: int64(len(j.out)), Hash: j.hash, Previous: d.hash, Changed: d.hash != j.hash})
			if d.hash != j.hash {
				edits[d.file] = append(edits[d.file], d.setHash(j.hash))
			}
		}
	}
	for _, f := range files {
		if len(edits[f]) > 0 {
			if err := writeAtomic(f, applyEdits(contents[f], edits[f])); err != nil {
				return nil, err
			}
		}
	}
	sortModules(rep.Modules, defs)
	m, err := manifest.Load(path)
	if err != nil {
		return rep, fmt.Errorf("built, but the manifest does not load:\n%w", err)
	}
	rep.ManifestName, rep.ManifestHash = m.Name, m.Hash.String()
	return rep, nil
}

// job builds one source into the artifacts of the defs that name it.
type job struct {
	source    string // absolute package directory
	defs      []wasmDef
	artifacts []string // per def, absolute
	out       []byte
	hash      string
}

// plan groups the defs that name a source by the package they build.
func plan(defs []wasmDef, opts Options) ([]*job, error) {
	var jobs []*job
	bySource := map[string]*job{}
	artifactFrom := map[string]string{} // artifact -> source, to catch two sources writing one file
	for _, d := range defs {
		if d.source == "" {
			continue
		}
		if filepath.IsAbs(d.artifact) || strings.HasPrefix(d.artifact, "/") {
			return nil, fmt.Errorf("%s: module %s: artifact %q must be relative to the file that declares it", d.file, d.name, d.artifact)
		}
		artifact, err := filepath.Abs(filepath.Join(filepath.Dir(d.file), filepath.FromSlash(d.artifact)))
		if err != nil {
			return nil, err
		}
		src, err := sourceDir(d, opts.SourcesFrom)
		if err != nil {
			return nil, err
		}
		if prev, ok := artifactFrom[artifact]; ok && prev != src {
			return nil, fmt.Errorf("%s: module %s: artifact %s is also built from %s; give each source its own artifact", d.file, d.name, artifact, prev)
		}
		artifactFrom[artifact] = src
		j := bySource[src]
		if j == nil {
			j = &job{source: src}
			bySource[src] = j
			jobs = append(jobs, j)
		}
		j.defs = append(j.defs, d)
		j.artifacts = append(j.artifacts, artifact)
	}
	return jobs, nil
}

// sourceDir resolves d's source to an existing directory, symlinks
// resolved (the go command finds the module from the real path).
func sourceDir(d wasmDef, base string) (string, error) {
	p := filepath.FromSlash(d.source)
	if !filepath.IsAbs(p) {
		if base == "" {
			base = filepath.Dir(d.file)
		}
		p = filepath.Join(base, p)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%s: module %s: source directory %s not found (%q is relative to %s)", d.file, d.name, abs, d.source, filepath.Dir(p))
	case err != nil:
		return "", fmt.Errorf("%s: module %s: source %s: %w", d.file, d.name, abs, err)
	case !info.IsDir():
		return "", fmt.Errorf("%s: module %s: source %s is not a directory (name the Go package's directory)", d.file, d.name, abs)
	}
	return filepath.EvalSymlinks(abs)
}

func (j *job) run(ctx context.Context, goCmd string, log io.Writer) error {
	names := make([]string, len(j.defs))
	for i, d := range j.defs {
		names[i] = d.name
	}
	if log != nil {
		fmt.Fprintf(log, "building %s from %s\n", strings.Join(names, ", "), j.source)
	}
	first := j.artifacts[0]
	if err := os.MkdirAll(filepath.Dir(first), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(first), "."+filepath.Base(first)+".*.tmp")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := Package(ctx, goCmd, j.source, tmp.Name()); err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			ce.Modules = names
		}
		return err
	}
	j.out, err = os.ReadFile(tmp.Name())
	if err != nil {
		return err
	}
	j.hash = schemas.HashBytes(j.out).String()
	for _, a := range j.artifacts {
		if err := writeAtomic(a, j.out); err != nil {
			return err
		}
	}
	return nil
}

// Package compiles the Go main package in dir into the wasm module out,
// with the flags and environment Build uses (goCmd "" is "go"). A failed
// compile is a *CompileError with the compiler's output. Tests that build
// their own guests use it, so every module is built the same way.
func Package(ctx context.Context, goCmd, dir, out string) error {
	if goCmd == "" {
		goCmd = "go"
	}
	args := append(append([]string{"build"}, Flags...), "-o", out, ".")
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), Env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return &CompileError{Source: dir, Output: string(msg), Err: err}
	}
	return nil
}

// writeAtomic replaces path with data through a temporary file and a
// rename, keeping the mode of an existing file.
func writeAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// sortModules puts modules in declaration order (file order, then order in
// the file).
func sortModules(ms []Module, defs []wasmDef) {
	order := map[[2]string]int{}
	for i, d := range defs {
		order[[2]string{d.file, d.name}] = i
	}
	sort.SliceStable(ms, func(i, j int) bool {
		return order[[2]string{ms[i].File, ms[i].Name}] < order[[2]string{ms[j].File, ms[j].Name}]
	})
}

// findGo finds the go command and checks it is recent enough. It asks the
// toolchain in dir, since a go.mod there may select another one.
func findGo(ctx context.Context, goCmd, goroot, dir string) (string, error) {
	if goCmd == "" {
		p, err := exec.LookPath("go")
		if err != nil {
			if goroot != "" {
				if p2 := filepath.Join(goroot, "bin", "go"); isExecutable(p2) {
					p, err = p2, nil
				}
			}
		}
		if err != nil {
			return "", fmt.Errorf("%w in PATH: building wasm workflow modules needs Go %s or later (https://go.dev/dl/)", ErrNoGo, MinGo)
		}
		goCmd = p
	} else if _, err := exec.LookPath(goCmd); err != nil {
		return "", fmt.Errorf("%w: %s: %v (building wasm workflow modules needs Go %s or later)", ErrNoGo, goCmd, err, MinGo)
	}
	cmd := exec.CommandContext(ctx, goCmd, "env", "GOVERSION")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s env GOVERSION (in %s): %v\n%s", goCmd, dir, err, strings.TrimSpace(stderr.String()))
	}
	v := strings.TrimSpace(string(out))
	if !atLeast(v, MinGo) {
		return "", fmt.Errorf("%s is %s: building wasm workflow modules needs Go %s or later (https://go.dev/dl/)", goCmd, v, MinGo)
	}
	return goCmd, nil
}

func isExecutable(p string) bool {
	info, err := os.Stat(p)
	return err == nil && !info.IsDir() && info.Mode()&0o111 != 0
}

// atLeast reports whether a GOVERSION such as "go1.26.8", "go1.24rc1" or
// "devel go1.27-abc" is at least min ("1.24"). Unknown forms pass: the build
// itself will say what is wrong.
func atLeast(goversion, min string) bool {
	v := goversion
	if i := strings.Index(v, "go1."); i >= 0 {
		v = v[i+2:]
	} else {
		return true
	}
	major, minor, ok := majorMinor(v)
	wantMajor, wantMinor, _ := majorMinor(min)
	if !ok {
		return true
	}
	return major > wantMajor || major == wantMajor && minor >= wantMinor
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, false
	}
	digits := parts[1]
	for i, c := range digits {
		if c < '0' || c > '9' {
			digits = digits[:i]
			break
		}
	}
	minor, err := strconv.Atoi(digits)
	if err != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// Copy copies the manifest at from (a JSON file, or a directory's *.json
// files) into directory to, creating it; no artifacts are copied. Build the
// copy with Options.SourcesFrom set to from's directory, so that its sources
// resolve as they did: the demo and the tests build and apply copies of the
// example manifests that way, leaving the originals untouched.
func Copy(from, to string) error {
	files, err := manifestFiles(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// EnclosingModule finds the Go module that holds dir: the nearest go.mod at
// or above it. It returns that directory and the module's path, or an error
// wrapping os.ErrNotExist when there is none.
func EnclosingModule(dir string) (root, path string, err error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			p := modulePath(b)
			if p == "" {
				return "", "", fmt.Errorf("%s: no module line", filepath.Join(d, "go.mod"))
			}
			return d, p, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		up := filepath.Dir(d)
		if up == d {
			return "", "", os.ErrNotExist
		}
		d = up
	}
}

// FindModule walks up from dir to the directory of the go.mod that declares
// module path (e.g. the aos source tree, from anywhere inside it).
func FindModule(dir, path string) (string, error) {
	d := dir
	for {
		root, p, err := EnclosingModule(d)
		if err != nil {
			return "", fmt.Errorf("no go.mod of module %s at or above %s", path, dir)
		}
		if p == path {
			return root, nil
		}
		up := filepath.Dir(root)
		if up == root {
			return "", fmt.Errorf("no go.mod of module %s at or above %s", path, dir)
		}
		d = up
	}
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" {
			p := f[1]
			if uq, err := strconv.Unquote(p); err == nil {
				p = uq
			}
			return p
		}
	}
	return ""
}
