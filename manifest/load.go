package manifest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/aos-kernel/aos/internal/walk"
	"github.com/aos-kernel/aos/schemas"
)

// sourceVersion is the version of the Source encoding.
const sourceVersion = 1

// sourceFile labels problems found while rebuilding a manifest from Source.
const sourceFile = "<source>"

// Load reads a manifest from path: one JSON file, or a directory whose *.json
// files (not subdirectories) are read in name order and merged. Each file
// holds one def object or an array of them. Load either returns a fully
// validated Manifest or a non-empty Problems listing everything wrong.
func Load(path string) (*Manifest, error) { return LoadWith(path, nil) }

// ErrNoArtifact is what an artifact source answers for a hash it does not hold.
var ErrNoArtifact = errors.New("manifest: no such artifact")

// LoadWith is Load with a second source of wasm artifacts, by hash: a module
// whose artifact it holds (for example one uploaded with the request, or one
// the world already stores) needs no file; otherwise the file is read as Load
// reads it. artifacts answers ErrNoArtifact for a hash it does not hold.
func LoadWith(path string, artifacts func(h schemas.Hash) ([]byte, error)) (*Manifest, error) {
	l := newLoader()
	l.root = path
	l.readArtifact = l.readArtifactFile
	if artifacts != nil {
		l.readArtifact = func(d *rawDef, rt *Runtime, want schemas.Hash) ([]byte, string) {
			b, err := artifacts(want)
			switch {
			case err == nil:
				return b, ""
			case errors.Is(err, ErrNoArtifact):
				return l.readArtifactFile(d, rt, want)
			default:
				return nil, fmt.Sprintf("cannot fetch wasm artifact %s (%s): %v", rt.Artifact, want, err)
			}
		}
	}
	return l.load(path)
}

// ArtifactFunc supplies a wasm module's artifact for LoadArtifacts: path is
// the def's "artifact" as written, source its "source" ("" when it names
// none), want the hash it declares. It returns the bytes, or a message
// saying why not (the problem the load reports at /runtime/artifact). Bytes
// of another hash are reported as a hash mismatch.
type ArtifactFunc func(path, source string, want schemas.Hash) ([]byte, string)

// LoadArtifacts is Load with every wasm artifact taken from artifact and
// none read from disk: for manifests whose files were sent from elsewhere
// (POST /v1/apply), where an artifact path means nothing on this machine
// and must not be read on it. root is the manifest's path as its sender
// knows it, for the commands problems suggest (path is where its files
// were put here).
func LoadArtifacts(path, root string, artifact ArtifactFunc) (*Manifest, error) {
	l := newLoader()
	l.root = root
	l.readArtifact = func(d *rawDef, rt *Runtime, want schemas.Hash) ([]byte, string) {
		return artifact(rt.Artifact, rt.Source, want)
	}
	return l.load(path)
}

// load reads the manifest file or directory at path with l's artifact
// source.
func (l *loader) load(path string) (*Manifest, error) {
	info, err := os.Stat(path)
	if err != nil {
		l.c.addf(path, "", "", "cannot read manifest: %v", unwrapPathError(err))
		return nil, l.c.ps
	}
	files := []string{path}
	if info.IsDir() {
		files = files[:0]
		ents, err := os.ReadDir(path)
		if err != nil {
			l.c.addf(path, "", "", "cannot read manifest directory: %v", unwrapPathError(err))
			return nil, l.c.ps
		}
		for _, e := range ents { // ReadDir sorts by name
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) == 0 {
			l.c.addf(path, "", "", "no *.json files in manifest directory")
			return nil, l.c.ps
		}
	}
	for _, f := range files {
		data, err := readFileBounded(f)
		if err != nil {
			l.unreadable = true
			l.c.addf(f, "", "", "cannot read: %v", unwrapPathError(err))
			continue
		}
		l.addFile(f, filepath.Dir(f), data)
	}
	return l.finish(path)
}

// LoadBytes loads a manifest held in memory as one file called name. Wasm
// artifact paths are still resolved on disk, relative to filepath.Dir(name).
func LoadBytes(name string, data []byte) (*Manifest, error) {
	l := newLoader()
	l.root = name
	l.readArtifact = l.readArtifactFile
	l.addFile(name, filepath.Dir(name), data)
	return l.finish(name)
}

// FromSource rebuilds a manifest from its Source bytes, running every check
// Load runs. artifacts fetches the bytes of a wasm module by the hash its def
// declares (typically from the CAS); it may be nil when no module is wasm.
// The result equals what Load returned, Hash included.
func FromSource(src []byte, artifacts func(h schemas.Hash) ([]byte, error)) (*Manifest, error) {
	l := newLoader()
	l.readArtifact = func(d *rawDef, rt *Runtime, want schemas.Hash) ([]byte, string) {
		if artifacts == nil {
			return nil, fmt.Sprintf("wasm artifact %s (%s) is needed but no artifact source was given", rt.Artifact, want)
		}
		b, err := artifacts(want)
		if err != nil {
			return nil, fmt.Sprintf("cannot fetch wasm artifact %s (%s): %v", rt.Artifact, want, err)
		}
		return b, ""
	}
	v, err := schemas.Decode(src)
	if err != nil {
		l.c.addf(sourceFile, "", "", "manifest source is not canonical CBOR: %v", err)
		return nil, l.c.ps
	}
	top, ok := v.(map[string]any)
	ver, _ := top["version"].(uint64)
	defs, okDefs := top["defs"].([]any)
	if !ok || len(top) != 2 || ver != sourceVersion || !okDefs {
		l.c.addf(sourceFile, "", "", "manifest source is not {version: %d, defs: [...]}", sourceVersion)
		return nil, l.c.ps
	}
	for i, dv := range defs {
		jv, err := fromCBORValue(dv)
		ptr := "/defs/" + strconv.Itoa(i)
		if err != nil {
			l.c.addf(sourceFile, "", ptr, "%v", err)
			continue
		}
		l.addDef(sourceFile, "", ptr, jv)
	}
	return l.finish(sourceFile)
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// MaxFileBytes bounds each file Load reads from disk (a manifest JSON file or
// a wasm artifact): the largest POST /v1/apply body, so a manifest named by
// path can hold no more than one sent inline.
const MaxFileBytes = 64 << 20

// readFileBounded reads a regular file of at most MaxFileBytes. Anything
// else is refused before it is read: a device (/dev/zero would be read
// forever), a FIFO (a read could block forever) or a directory. The daemon
// loads manifests from paths its callers give (apply and shadow's "path").
func readFileBounded(name string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer before the
	// check below refuses it (it changes nothing for a regular file).
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than the %d-byte limit for a manifest or artifact file", MaxFileBytes)
	}
	return data, nil
}

// readArtifactFile reads a wasm artifact relative to the directory of the file
// that declared it. The message for a missing artifact says where it was
// looked for and the command that builds it, because the usual cause is that
// nobody built it yet.
func (l *loader) readArtifactFile(d *rawDef, rt *Runtime, want schemas.Hash) ([]byte, string) {
	if filepath.IsAbs(rt.Artifact) || strings.HasPrefix(rt.Artifact, "/") {
		return nil, fmt.Sprintf("artifact path %q must be relative to the manifest file that declares it", rt.Artifact)
	}
	full := filepath.Join(d.dir, filepath.FromSlash(rt.Artifact))
	b, err := readFileBounded(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Sprintf("wasm artifact %s not found (looked for %s); %s", rt.Artifact, full, BuildHint(l.root, rt.Source, full))
	case err != nil:
		return nil, fmt.Sprintf("cannot read wasm artifact %s: %v", full, unwrapPathError(err))
	}
	return b, ""
}

// BuildHint is the command that builds a wasm module's artifact: with a
// "source", `aosd build` on the manifest at root (it compiles the source
// with the flags a module needs and pins the hash); without one, the go
// build line (a module is a wasip1 reactor: -buildmode=c-shared) writing
// out, and the advice to name the package in "source".
func BuildHint(root, source, out string) string {
	if source != "" {
		return fmt.Sprintf("build it from its source %s with: aosd build %s", source, root)
	}
	return fmt.Sprintf("build it with: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o %s PACKAGE (or name PACKAGE in \"source\" and run: aosd build %s)", out, root)
}

type loader struct {
	root  string // the path Load was given, for the commands problems suggest
	c     collector
	files map[string]int // file -> order, for sorting problems
	// unreadable is set when some file could not be parsed: its defs are
	// unknown, so "no manifest def" would only be noise.
	unreadable bool
	defs       []*rawDef
	// readArtifact returns the bytes of a wasm module, or a message saying why not.
	readArtifact func(d *rawDef, rt *Runtime, want schemas.Hash) ([]byte, string)

	// Filled by check.
	sysSchemas map[string]bool   // names of the built-in sys/ schemas
	registry   *schemas.Registry // sys/ and user schemas, once they compile
	byName     map[string]*rawDef
	manifest   *rawDef
	artifacts  map[*rawDef][]byte
}

func newLoader() *loader {
	return &loader{files: map[string]int{}, byName: map[string]*rawDef{}, artifacts: map[*rawDef][]byte{}}
}

// bad records a problem in def d at ptr (relative to the def) and marks d.
func (l *loader) bad(d *rawDef, ptr, format string, args ...any) {
	d.bad = true
	l.c.addf(d.file, d.name, d.ptr+ptr, format, args...)
}

// addFile parses one file and splits it into defs.
func (l *loader) addFile(file, dir string, data []byte) {
	if _, ok := l.files[file]; !ok {
		l.files[file] = len(l.files)
	}
	v, dups, err := parseJSON(data)
	if err != nil {
		l.unreadable = true
		l.c.addf(file, "", "", "%v", err)
		return
	}
	var elems []any
	var ptrs []string
	switch t := v.(type) {
	case map[string]any:
		elems, ptrs = []any{t}, []string{""}
	case []any:
		for i, e := range t {
			elems = append(elems, e)
			ptrs = append(ptrs, "/"+strconv.Itoa(i))
		}
	default:
		l.unreadable = true
		l.c.addf(file, "", "", "a manifest file must hold a def object or an array of defs, found %s", jsonType(v))
		return
	}
	for _, dk := range dups {
		name := ""
		for i, p := range ptrs {
			if dk.ptr == p || strings.HasPrefix(dk.ptr, p+"/") {
				name, _ = elems[i].(map[string]any)["name"].(string)
			}
		}
		l.c.addf(file, name, ptrJoin(dk.ptr, dk.key), "duplicate key %q", dk.key)
	}
	for i, e := range elems {
		l.addDef(file, dir, ptrs[i], e)
	}
}

// addDef records one def value found at ptr in file.
func (l *loader) addDef(file, dir, ptr string, v any) {
	if _, ok := l.files[file]; !ok {
		l.files[file] = len(l.files)
	}
	m, ok := v.(map[string]any)
	if !ok {
		l.c.addf(file, "", ptr, "a def must be an object, found %s", jsonType(v))
		return
	}
	d := &rawDef{file: file, dir: dir, ptr: ptr, value: m}
	d.name, _ = m["name"].(string)
	kv, ok := m["$kind"]
	if !ok {
		l.bad(d, "", "missing \"$kind\" (one of %s)", kindList())
		return
	}
	kind, _ := kv.(string)
	switch kind {
	case KindSchema, KindModule, KindWorkflow, KindEffect, KindManifest:
		d.kind = kind
		l.defs = append(l.defs, d)
	default:
		l.bad(d, "/$kind", "unknown \"$kind\" %s (want one of %s)", quoteJSON(kv), kindList())
	}
}

func quoteJSON(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return string(canonicalJSON(v))
}

// finish decodes, checks and, when nothing is wrong, builds the manifest.
func (l *loader) finish(where string) (*Manifest, error) {
	for _, d := range l.defs {
		l.decode(d)
	}
	l.check(where)
	var m *Manifest
	if len(l.c.ps) == 0 {
		m = l.build()
	}
	if len(l.c.ps) > 0 {
		sortProblems(l.c.ps, l.files)
		return nil, l.c.ps
	}
	return m, nil
}

// build assembles the Manifest from defs that passed every check: def
// hashes, the manifest hash and Source.
func (l *loader) build() *Manifest {
	md := l.manifest
	m := &Manifest{
		Name:      md.name,
		Schemas:   map[string]*SchemaDef{},
		Modules:   map[string]*ModuleDef{},
		Workflows: map[string]*WorkflowDef{},
		Effects:   map[string]*EffectDef{},
		Routing:   *md.routing,
	}
	for _, e := range SysEffects() {
		m.Effects[e.Name] = e
	}
	var srcDefs []*rawDef
	usedSys := map[string]bool{}
	for _, d := range l.defs {
		srcDefs = append(srcDefs, d)
		if d.kind == KindManifest {
			continue
		}
		h, err := defHash(d.value)
		if err != nil {
			l.bad(d, "", "cannot hash def: %v", err)
			continue
		}
		m.Defs = append(m.Defs, DefRef{Name: d.name, Kind: d.kind, Hash: h})
		switch d.kind {
		case KindSchema:
			d.schema.Hash = h
			m.Schemas[d.name] = d.schema
		case KindModule:
			d.module.Hash = h
			d.module.Runtime.Bytes = l.artifacts[d]
			m.Modules[d.name] = d.module
		case KindWorkflow:
			d.workflow.Hash = h
			m.Workflows[d.name] = d.workflow
			for _, e := range d.workflow.EffectsEmitted {
				if IsSysEffect(e) {
					usedSys[e] = true
				}
			}
		case KindEffect:
			d.effect.Hash = h
			m.Effects[d.name] = d.effect
		}
	}
	for name := range usedSys {
		m.Defs = append(m.Defs, DefRef{Name: name, Kind: KindEffect, Hash: m.Effects[name].Hash})
	}
	sysSchemas, err := l.sysSchemaRefs(usedSys, m.Effects)
	if err != nil {
		l.bad(md, "", "%v", err)
		return nil
	}
	m.Defs = append(m.Defs, sysSchemas...)
	sort.Slice(m.Defs, func(i, j int) bool { return m.Defs[i].Name < m.Defs[j].Name })

	defList := make([]any, len(m.Defs))
	for i, r := range m.Defs {
		defList[i] = []any{r.Name, r.Hash[:]}
	}
	h, _, err := schemas.HashValue(map[string]any{
		"name":    m.Name,
		"defs":    defList,
		"routing": routingValue(m.Routing),
	})
	if err != nil {
		l.bad(md, "", "cannot hash manifest: %v", err)
		return nil
	}
	m.Hash = h

	sort.Slice(srcDefs, func(i, j int) bool {
		if srcDefs[i].name != srcDefs[j].name {
			return srcDefs[i].name < srcDefs[j].name
		}
		return srcDefs[i].kind < srcDefs[j].kind
	})
	vals := make([]any, len(srcDefs))
	for i, d := range srcDefs {
		vals[i] = toCBORValue(d.value)
	}
	src, err := schemas.Marshal(map[string]any{"version": uint64(sourceVersion), "defs": vals})
	if err != nil {
		l.bad(md, "", "cannot encode manifest source: %v", err)
		return nil
	}
	m.Source = src
	m.Registry = l.registry
	return m
}

// sysSchemaRefs returns the built-in sys/ schemas the manifest uses, directly
// or through other sys/ schemas, as defs for the manifest hash: a kernel whose
// sys/ schemas differ gives the same manifest a different hash.
func (l *loader) sysSchemaRefs(usedSysEffects map[string]bool, effects map[string]*EffectDef) ([]DefRef, error) {
	used := map[string]bool{}
	var queue []string
	add := func(name string) {
		name, _, _ = strings.Cut(name, "#")
		if schemas.IsSysName(name) && !used[name] {
			used[name] = true
			queue = append(queue, name)
		}
	}
	for _, d := range l.defs {
		switch d.kind {
		case KindSchema:
			for _, a := range d.schema.Variant {
				add(a.Schema)
			}
			WalkRefs(d.doc, add)
		case KindWorkflow:
			w := d.workflow
			for _, n := range []string{w.State, w.Event, w.Context, w.Annotations, w.KeySchema} {
				add(n)
			}
		case KindEffect:
			add(d.effect.Params)
			add(d.effect.Receipt)
		}
	}
	for name := range usedSysEffects {
		add(effects[name].Params)
		add(effects[name].Receipt)
	}
	srcs := schemas.SysSchemaJSON()
	var out []DefRef
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		src, ok := srcs[name]
		if !ok {
			return nil, fmt.Errorf("built-in schema %s has no source", name)
		}
		doc, _, err := parseJSON(src)
		if err != nil {
			return nil, fmt.Errorf("built-in schema %s: %v", name, err)
		}
		WalkRefs(doc, add)
		h, err := defHash(map[string]any{"$kind": KindSchema, "name": name, "schema": doc})
		if err != nil {
			return nil, fmt.Errorf("built-in schema %s: %v", name, err)
		}
		out = append(out, DefRef{Name: name, Kind: KindSchema, Hash: h})
	}
	return out, nil
}

// WalkRefs calls f with every "$ref" string in a schema document (a JSON
// value as encoding/json decodes it), in no particular order.
func WalkRefs(v any, f func(string)) {
	_, _, _ = walk.Map(v, nil, false, func(v any, path []string) (any, bool, error) {
		if s, ok := v.(string); ok && len(path) > 0 && path[len(path)-1] == "$ref" {
			f(s) // array indexes are never "$ref": this is an object member
		}
		return nil, false, nil
	})
}
