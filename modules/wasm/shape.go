package wasm

import (
	"errors"
	"fmt"
)

// The host bounds what a module may declare before wazero reads it:
// wazero's decoder allocates what a count says before it reads what the
// count counts, so a module of a few bytes declaring four billion of
// something would take the host down at apply. Every count must fit in
// the bytes that follow it, and stay within the limits the WebAssembly JS
// API sets for browsers (no real module comes near them).
const (
	maxTypes        = 1_000_000
	maxFunctions    = 1_000_000
	maxImports      = 100_000
	maxExports      = 100_000
	maxGlobals      = 1_000_000
	maxTables       = 100_000
	maxDataSegments = 100_000
	maxElemSegments = 10_000_000
	maxTableEntries = 10_000_000
	maxParams       = 1_000
	maxResults      = 1_000
	maxLocals       = 50_000
	maxBodySize     = 7_654_321
)

var sectionNames = map[byte]string{
	0: "custom", 1: "type", 2: "import", 3: "function", 4: "table", 5: "memory", 6: "global",
	7: "export", 8: "start", 9: "element", 10: "code", 11: "data", 12: "data count", 13: "tag",
}

// shapeReader reads one section, for checkShape.
type shapeReader struct {
	wasmReader
	section string
	bad     error // the first problem, with its place
}

func (r *shapeReader) fail(format string, args ...any) {
	if r.bad == nil {
		r.bad = fmt.Errorf("%w: %s section: %s", errMalformed, r.section, fmt.Sprintf(format, args...))
	}
}

// count reads a vector's length: each element takes a byte at least, and
// there may be limit at most.
func (r *shapeReader) count(what string, limit int) uint32 {
	at := r.off
	n := r.u32()
	switch {
	case r.err != nil:
	case uint64(n) > uint64(len(r.b)-r.off):
		r.fail("%d %s declared at byte %d, in %d bytes", n, what, at, len(r.b)-r.off)
		return 0
	case uint64(n) > uint64(limit):
		r.fail("%d %s, over the limit of %d", n, what, limit)
		return 0
	}
	return n
}

func (r *shapeReader) skip(n uint32) {
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("truncated at byte %d", r.off)
		return
	}
	r.off += int(n)
}

// limits reads a table's or memory's limits.
func (r *shapeReader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}

// constExpr reads past a constant expression.
func (r *shapeReader) constExpr() {
	for r.ok() {
		op := r.byte()
		if op == opEnd {
			return
		}
		if err := skipImmediates(&r.wasmReader, op); err != nil {
			r.fail("constant expression at byte %d: %v", r.off, err)
		}
	}
}

func (r *shapeReader) ok() bool {
	return r.bad == nil && r.err == nil && r.off < len(r.b)
}

// checkShape checks one non-custom section's counts and sizes.
func checkShape(id byte, body []byte) error {
	name, known := sectionNames[id]
	if !known {
		return fmt.Errorf("%w: unknown section id %d", errMalformed, id)
	}
	if id == 13 {
		return fmt.Errorf("has a tag section: exception handling is %w", errUnsupported)
	}
	r := &shapeReader{wasmReader: wasmReader{b: body}, section: name}
	switch id {
	case 1: // type
		for range r.count("types", maxTypes) {
			if r.byte() != 0x60 {
				r.fail("a type that is not a function type")
			}
			r.skip(r.count("parameters", maxParams))
			r.skip(r.count("results", maxResults))
		}
	case 2: // import
		for range r.count("imports", maxImports) {
			r.name()
			r.name()
			switch r.byte() {
			case kindFunc:
				r.u32()
			case kindTable:
				r.byte()
				r.limits()
			case kindMemory:
				r.limits()
			case kindGlobal:
				r.byte()
				r.byte()
			default:
				r.fail("an import of unknown kind")
			}
		}
	case 3: // function
		for range r.count("functions", maxFunctions) {
			r.u32()
		}
	case 4: // table
		for range r.count("tables", maxTables) {
			r.byte()
			r.limits()
		}
	case 5: // memory
		for range r.count("memories", 1) {
			r.limits()
		}
	case 6: // global
		for range r.count("globals", maxGlobals) {
			r.byte()
			r.byte()
			r.constExpr()
		}
	case 7: // export
		for range r.count("exports", maxExports) {
			r.name()
			r.byte()
			r.u32()
		}
	case 8, 12: // start, data count
		r.u32()
	case 9: // element
		for range r.count("element segments", maxElemSegments) {
			elemSegment(r)
		}
	case 10: // code
		for i := range r.count("function bodies", maxFunctions) {
			size := r.u32()
			if size > maxBodySize {
				r.fail("function %d's body is %d bytes, over the limit of %d", i, size, maxBodySize)
			}
			end := r.off + int(size)
			if uint64(size) > uint64(len(r.b)-r.off) {
				r.fail("function %d's body is truncated", i)
				break
			}
			var locals uint64
			for range r.count("local declarations", maxLocals) {
				locals += uint64(r.u32())
				r.byte()
			}
			if locals > maxLocals {
				r.fail("function %d declares %d locals, over the limit of %d", i, locals, maxLocals)
			}
			r.off = end
		}
	case 11: // data
		for range r.count("data segments", maxDataSegments) {
			switch flags := r.u32(); flags {
			case 0:
				r.constExpr()
			case 1:
			case 2:
				r.u32()
				r.constExpr()
			default:
				r.fail("a data segment with flags %d", flags)
			}
			r.skip(r.u32())
		}
	}
	if r.err != nil {
		r.fail("truncated")
	}
	if r.bad == nil && r.off != len(r.b) {
		r.fail("%d bytes after its last entry", len(r.b)-r.off)
	}
	return r.bad
}

// elemSegment reads past one element segment: eight flavours, told apart
// by flags (bit 0: passive or declarative, bit 1: explicit table or
// declarative, bit 2: expressions rather than function indexes).
func elemSegment(r *shapeReader) {
	flags := r.u32()
	if flags > 7 {
		r.fail("an element segment with flags %d", flags)
		return
	}
	if flags&1 == 0 { // active
		if flags&2 != 0 {
			r.u32() // table index
		}
		r.constExpr()
	}
	if flags&3 != 0 {
		r.byte() // element kind, or reference type
	}
	n := r.count("elements", maxTableEntries)
	for range n {
		if flags&4 != 0 {
			r.constExpr()
		} else {
			r.u32()
		}
	}
}

var errNoMemory = errors.New(`defines no memory; the ABI wants one, exported as "memory"`)
