package wasm

import (
	"errors"
	"fmt"
)

// interruptExport names the global the host adds to every module to stop
// it: when the host has set it, the guest traps at its next visit (below).
// The host sets it when a step's context is done.
//
// A guest running native code can be stopped only by itself, and it holds
// up the Go runtime meanwhile: the garbage collector's stop-the-world waits
// for every goroutine to reach Go code, which a guest in a loop never does.
// So the host makes every module visit Go now and then: it adds a fuel
// counter, decremented at the start of every function and of every loop
// iteration, and when it runs out the guest reads the interrupt global,
// traps if it is set, and otherwise calls memory.grow(0), which wazero
// serves in Go (a point where the goroutine can stop for the collector),
// and refills the counter. A check is a few instructions; a visit comes
// every fuelVisit checks.
//
// wazero's own way (RuntimeConfig.WithCloseOnContextDone) leaves native
// code at every loop iteration, deadline or not: it made a counter step
// several times slower (BenchmarkStepCounter/stop=wazero).
const interruptExport = "aos.host.interrupt"

// fuelVisit is how many checks a guest makes between visits to Go.
const fuelVisit = 1 << 15

const (
	opUnreachable = 0x00
	opBlock       = 0x02
	opLoop        = 0x03
	opIf          = 0x04
	opEnd         = 0x0b
	opDrop        = 0x1a
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opMemoryGrow  = 0x40
	opI32Const    = 0x41
	opI32Eqz      = 0x45
	opI32Sub      = 0x6b
	blockEmpty    = 0x40
	valI32        = 0x7f
)

// checkCode is the check inserted at every function start and loop head:
//
//	fuel -= 1
//	if fuel == 0 {
//		if interrupt { unreachable }
//		memory.grow(0)
//		fuel = fuelVisit
//	}
func checkCode(fuel, interrupt uint32) []byte {
	get := func(b []byte, g uint32) []byte { return appendU32(append(b, opGlobalGet), g) }
	set := func(b []byte, g uint32) []byte { return appendU32(append(b, opGlobalSet), g) }
	b := get(nil, fuel)
	b = append(b, opI32Const, 1, opI32Sub)
	b = set(b, fuel)
	b = get(b, fuel)
	b = append(b, opI32Eqz, opIf, blockEmpty)
	b = get(b, interrupt)
	b = append(b, opIf, blockEmpty, opUnreachable, opEnd)
	b = append(b, opI32Const, 0, opMemoryGrow, 0, opDrop)
	b = appendI32(append(b, opI32Const), fuelVisit)
	b = set(b, fuel)
	return append(b, opEnd)
}

// Section ids, and their required order (custom sections aside).
const (
	secCustom = 0
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

var errUnsupported = errors.New("unsupported")

// prepare returns the bytes the host compiles for code: its sections once
// their shape is checked (checkShape), without custom sections (names and
// debug information, which the host does not use), and, if interrupt, with
// two globals added, the fuel counter and the interrupt (exported as
// interruptExport), and checkCode at the start of every function body and
// every loop.
//
// The instrumentation changes nothing else: no function, type or existing
// global moves, and no branch depth changes, since each check is a
// self-contained block. It needs a module that imports no globals or
// memories (the import check refuses them), so the new globals' indexes
// follow the globals the module defines, and the memory the check grows is
// the one it defines.
func prepare(code []byte, interrupt bool) ([]byte, error) {
	if len(code) < 8 || string(code[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: no wasm header", errMalformed)
	}
	if string(code[4:8]) != "\x01\x00\x00\x00" {
		return nil, fmt.Errorf("%w: binary format version %x, want 1", errUnsupported, code[4:8])
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := wasmReader{b: code, off: 8}
	for r.off < len(r.b) {
		at := r.off
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.off) {
			return nil, fmt.Errorf("%w: section at byte %d is truncated", errMalformed, at)
		}
		s := section{id, r.b[r.off : r.off+int(size)]}
		r.off += int(size)
		if id == secCustom {
			continue
		}
		if err := checkShape(s.id, s.body); err != nil {
			return nil, err
		}
		secs = append(secs, s)
	}
	if !interrupt {
		out := append([]byte(nil), code[:8]...)
		for _, s := range secs {
			out = appendU32(append(out, s.id), uint32(len(s.body)))
			out = append(out, s.body...)
		}
		return out, nil
	}

	// The new globals: their indexes, and the global and export sections
	// with them.
	var globals uint32
	var globalSec, exportSec []byte
	memory := false
	for _, s := range secs {
		switch s.id {
		case secMemory:
			memory = len(s.body) > 0 && s.body[0] > 0
		case secGlobal:
			sr := wasmReader{b: s.body}
			globals = sr.u32()
			if sr.err != nil {
				return nil, errMalformed
			}
			globalSec = appendU32(nil, globals+2)
			globalSec = append(globalSec, s.body[sr.off:]...)
		case secExport:
			sr := wasmReader{b: s.body}
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				if sr.name() == interruptExport {
					return nil, fmt.Errorf("exports %q, a name the host reserves", interruptExport)
				}
				sr.byte()
				sr.u32()
			}
			if sr.err != nil {
				return nil, errMalformed
			}
			exportSec = appendU32(nil, n+1)
			exportSec = append(exportSec, s.body[lebLen(s.body):]...)
		}
	}
	if !memory {
		return nil, errNoMemory
	}
	fuel, intr := globals, globals+1
	if globalSec == nil {
		globalSec = appendU32(nil, 2)
	}
	globalSec = appendI32(append(globalSec, valI32, 1, opI32Const), fuelVisit) // mut i32 fuel = fuelVisit
	globalSec = append(globalSec, opEnd)
	globalSec = append(globalSec, valI32, 1, opI32Const, 0, opEnd) // mut i32 interrupt = 0
	if exportSec == nil {
		exportSec = appendU32(nil, 1)
	}
	exportSec = appendU32(exportSec, uint32(len(interruptExport)))
	exportSec = append(exportSec, interruptExport...)
	exportSec = appendU32(append(exportSec, 3), intr) // kind global
	check := checkCode(fuel, intr)

	out := append(make([]byte, 0, len(code)+len(code)/8), code[:8]...)
	emit := func(id byte, body []byte) {
		out = appendU32(append(out, id), uint32(len(body)))
		out = append(out, body...)
	}
	placed := map[byte]bool{}
	place := func(id byte, body []byte, before int) {
		if !placed[id] && sectionRank[id] < before {
			emit(id, body)
			placed[id] = true
		}
	}
	for _, s := range secs {
		// Sections the module lacks go before the first that follows them.
		place(secGlobal, globalSec, sectionRank[s.id]+1)
		place(secExport, exportSec, sectionRank[s.id]+1)
		switch s.id {
		case secGlobal, secExport:
			// emitted by place, in this position
		case secCode:
			body, err := instrumentCode(s.body, check)
			if err != nil {
				return nil, err
			}
			emit(s.id, body)
		default:
			emit(s.id, s.body)
		}
	}
	place(secGlobal, globalSec, len(sectionRank)+1)
	place(secExport, exportSec, len(sectionRank)+1)
	return out, nil
}

// lebLen is the length of the LEB128 at the start of b.
func lebLen(b []byte) int {
	for i, c := range b {
		if c&0x80 == 0 {
			return i + 1
		}
	}
	return len(b)
}

// appendI32 appends v as a signed LEB128, as i32.const wants it.
func appendI32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// instrumentCode rewrites the code section: check at the start of every
// body and after every loop instruction.
func instrumentCode(sec, check []byte) ([]byte, error) {
	r := wasmReader{b: sec}
	n := r.u32()
	out := appendU32(make([]byte, 0, len(sec)+len(sec)/8), n)
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(r.b)-r.off) {
			return nil, errMalformed
		}
		start := r.off
		fr := wasmReader{b: r.b[:start+int(size)], off: start}
		r.off += int(size)
		// Locals: a vector of (count, type).
		for range fr.u32() {
			fr.u32()
			fr.byte()
		}
		if fr.err != nil {
			return nil, errMalformed
		}
		body = append(body[:0], fr.b[start:fr.off]...)
		body = append(body, check...)
		for fr.off < len(fr.b) {
			at := fr.off
			op := fr.byte()
			if err := skipImmediates(&fr, op); err != nil {
				return nil, fmt.Errorf("code of function %d, at byte %d: %w", i, at, err)
			}
			body = append(body, fr.b[at:fr.off]...)
			if op == opLoop {
				body = append(body, check...)
			}
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.err != nil || r.off != len(r.b) {
		return nil, errMalformed
	}
	return out, nil
}

// skipImmediates reads past the immediates of the instruction whose opcode
// was just read: every instruction of the features wazero enables by
// default (WebAssembly 2.0: sign extension, saturating conversions, bulk
// memory, reference types, multi-value, SIMD). Anything else is refused;
// wazero would refuse it too.
func skipImmediates(r *wasmReader, op byte) error {
	switch {
	case op == opBlock || op == opLoop || op == opIf:
		blockType(r)
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table
		for range r.u32() {
			r.u32()
		}
		r.u32()
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		for range r.u32() {
			r.byte()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		memarg(r)
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41: // i32.const
		r.leb(5)
	case op == 0x42: // i64.const
		r.leb(10)
	case op == 0x43:
		r.skip(4)
	case op == 0x44:
		r.skip(8)
	case op == 0xd0: // ref.null
		r.byte()
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		return skipMisc(r)
	case op == 0xfd:
		return skipSIMD(r)
	case op <= 0x01, op == 0x05, op == opEnd, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
		// no immediates
	default:
		return fmt.Errorf("opcode 0x%02x: %w", op, errUnsupported)
	}
	return r.err
}

func blockType(r *wasmReader) {
	if r.off < len(r.b) {
		switch r.b[r.off] {
		case blockEmpty, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
			r.off++
			return
		}
	}
	r.leb(5) // a type index, as a signed 33-bit LEB
}

func memarg(r *wasmReader) {
	if align := r.u32(); align&0x40 != 0 { // a memory index: multi-memory
		r.err = errUnsupported
	}
	r.leb(10)
}

func skipMisc(r *wasmReader) error {
	switch sub := r.u32(); {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		return fmt.Errorf("opcode 0xfc %d: %w", sub, errUnsupported)
	}
	return r.err
}

func skipSIMD(r *wasmReader) error {
	switch sub := r.u32(); {
	case sub <= 11, sub == 92, sub == 93: // loads, store, load_zero
		memarg(r)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		r.byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		memarg(r)
		r.byte()
	case sub <= 255:
		// Every other SIMD instruction has no immediates; an opcode that
		// is none (there are gaps) fails wazero's validation after this.
	default:
		return fmt.Errorf("opcode 0xfd %d: %w", sub, errUnsupported)
	}
	return r.err
}

// leb reads past a LEB128 of at most max bytes.
func (r *wasmReader) leb(max int) {
	for i := 0; i < max; i++ {
		if r.byte()&0x80 == 0 || r.err != nil {
			return
		}
	}
	r.err = errMalformed
}

func (r *wasmReader) skip(n int) {
	if r.err == nil && len(r.b)-r.off < n {
		r.err = errMalformed
		return
	}
	r.off += n
}
