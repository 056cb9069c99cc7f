package wasm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The module ABI's exports (docs/wasm-abi.md).
var abiExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{"aos_abi_v1", nil, nil},
	{"aos_alloc", params(i32), params(i32)},
	{"aos_step", params(i32, i32, i32, i32), params(i64)},
}

// compileChecked checks code's imports and shape, instruments it (unless
// told not to), compiles it and checks its exports. It reports whether the module
// exports _initialize.
func compileChecked(ctx context.Context, r wazero.Runtime, name string, code []byte, interrupt bool) (wazero.CompiledModule, bool, error) {
	imports, ierr := readImports(code)
	if ierr == nil {
		if err := checkImports(imports); err != nil {
			return nil, false, fmt.Errorf("wasm module %s: %w", name, err)
		}
	}
	// wazero never reads a module this package could not: its decoder
	// trusts the counts it reads (see checkShape).
	src, err := prepare(code, interrupt)
	if err == nil {
		err = ierr // prepare says what is malformed in more detail; it should see it too
	}
	if err != nil {
		return nil, false, fmt.Errorf("wasm module %s: %w", name, err)
	}
	cm, err := r.CompileModule(ctx, src)
	if err != nil {
		return nil, false, fmt.Errorf("wasm module %s: %w", name, err)
	}
	if err = checkCompiled(cm); err != nil {
		_ = cm.Close(ctx)
		return nil, false, fmt.Errorf("wasm module %s: %w", name, err)
	}
	_, init := cm.ExportedFunctions()["_initialize"]
	return cm, init, nil
}

func checkImports(imports []wasmImport) error {
	for _, im := range imports {
		what := fmt.Sprintf("imports %q.%q (%s)", im.module, im.name, kindName(im.kind))
		if im.module != wasiModule || im.kind != kindFunc {
			return errors.New(what + "; a workflow module may import only " + wasiModule + " functions")
		}
		if wasiByName[im.name] == nil {
			return errors.New(what + ", which WASI preview 1 does not define")
		}
	}
	return nil
}

// checkCompiled checks the imported functions' signatures and the ABI's
// exports.
func checkCompiled(cm wazero.CompiledModule) error {
	for _, f := range cm.ImportedFunctions() {
		m, n, _ := f.Import()
		want := wasiByName[n]
		if m != wasiModule || want == nil { // checkImports let it through: a bug here
			return fmt.Errorf("imports %q.%q (a function), which the import check missed", m, n)
		}
		var results []api.ValueType
		if !want.exit {
			results = params(i32)
		}
		if !slices.Equal(f.ParamTypes(), want.params) || !slices.Equal(f.ResultTypes(), results) {
			return fmt.Errorf("imports %q.%q as %s; WASI preview 1 defines it as %s",
				wasiModule, n, signature(f.ParamTypes(), f.ResultTypes()), signature(want.params, results))
		}
	}
	fns := cm.ExportedFunctions()
	if _, ok := fns["_start"]; ok {
		return errors.New("is a WASI command (it exports _start), not a reactor; build it with -buildmode=c-shared")
	}
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		return errors.New(`exports no memory named "memory"`)
	}
	for _, x := range abiExports {
		f, ok := fns[x.name]
		if !ok {
			return fmt.Errorf("does not export %s %s, so it is not built for the aos module ABI v1 (docs/wasm-abi.md)",
				x.name, signature(x.params, x.results))
		}
		if !slices.Equal(f.ParamTypes(), x.params) || !slices.Equal(f.ResultTypes(), x.results) {
			return fmt.Errorf("exports %s as %s; the aos module ABI v1 wants %s",
				x.name, signature(f.ParamTypes(), f.ResultTypes()), signature(x.params, x.results))
		}
	}
	if f, ok := fns["_initialize"]; ok && (len(f.ParamTypes()) != 0 || len(f.ResultTypes()) != 0) {
		return fmt.Errorf("exports _initialize as %s; want () -> ()", signature(f.ParamTypes(), f.ResultTypes()))
	}
	return nil
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return names(params) + " -> " + names(results)
}

// Import kinds in the binary format.
const (
	kindFunc   = 0
	kindTable  = 1
	kindMemory = 2
	kindGlobal = 3
	kindTag    = 4
)

func kindName(k byte) string {
	switch k {
	case kindFunc:
		return "a function"
	case kindTable:
		return "a table"
	case kindMemory:
		return "a memory"
	case kindGlobal:
		return "a global"
	case kindTag:
		return "a tag"
	}
	return fmt.Sprintf("import kind %d", k)
}

// wasmImport is one entry of a module's import section.
type wasmImport struct {
	module, name string
	kind         byte
}

var errMalformed = errors.New("malformed wasm binary")

// readImports reads the import section of a wasm binary: wazero tells
// imported functions and memories, but not tables, globals or tags, and
// the ABI allows none of those. It reads up to the first import that is
// not a function, which is all the check needs.
func readImports(code []byte) ([]wasmImport, error) {
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, errMalformed
	}
	r := wasmReader{b: code, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.off) {
			return nil, errMalformed
		}
		if id != 2 {
			r.off += int(size)
			continue
		}
		sec := wasmReader{b: r.b[:r.off+int(size)], off: r.off}
		n := sec.u32()
		var out []wasmImport
		for i := uint32(0); i < n && sec.err == nil; i++ {
			im := wasmImport{module: sec.name(), name: sec.name(), kind: sec.byte()}
			if sec.err != nil {
				break
			}
			out = append(out, im)
			if im.kind != kindFunc {
				return out, nil
			}
			sec.u32() // type index
		}
		if sec.err != nil {
			return nil, sec.err
		}
		return out, nil
	}
	return nil, nil
}

type wasmReader struct {
	b   []byte
	off int
	err error
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errMalformed
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// u32 reads an unsigned LEB128 of at most 5 bytes.
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errMalformed
	return 0
}

func (r *wasmReader) name() string {
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(r.b)-r.off) {
		r.err = errMalformed
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}
