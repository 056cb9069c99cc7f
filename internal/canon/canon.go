package canon

import (
	"encoding/binary"
	"unicode/utf8"
)

// Major types (RFC 8949 §3.1), unshifted: the initial byte is major<<5 | ai.
const (
	MajorUint   byte = 0
	MajorNeg    byte = 1
	MajorBytes  byte = 2
	MajorText   byte = 3
	MajorArray  byte = 4
	MajorMap    byte = 5
	MajorTag    byte = 6
	MajorSimple byte = 7
)

// Whole items of major type 7 that have one spelling.
const (
	False byte = 0xf4
	True  byte = 0xf5
	Null  byte = 0xf6
)

// MaxDepth is how deeply Skip lets items nest: the strict decoders here
// (schemas, sdk) allow 64 levels below the top.
const MaxDepth = 64

// AppendHead appends the shortest head of major type major (0–7) with
// argument n, as core deterministic encoding requires.
func AppendHead(b []byte, major byte, n uint64) []byte {
	// One switch, not a short path plus a helper: this shape keeps
	// AppendHead and AppendText within the inliner's budget (cost 68 and
	// 78 of 80; go build -gcflags=-m=2), and the record encoders call them
	// dozens of times a record.
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

// HeadLen is the length of the shortest head with argument n.
func HeadLen(n uint64) int {
	switch {
	case n < 24:
		return 1
	case n <= 0xff:
		return 2
	case n <= 0xffff:
		return 3
	case n <= 0xffffffff:
		return 5
	}
	return 9
}

// AppendUint appends n as an unsigned integer.
func AppendUint(b []byte, n uint64) []byte { return AppendHead(b, MajorUint, n) }

// AppendArray appends the head of an array of n items.
func AppendArray(b []byte, n uint64) []byte { return AppendHead(b, MajorArray, n) }

// AppendMap appends the head of a map of n pairs.
func AppendMap(b []byte, n uint64) []byte { return AppendHead(b, MajorMap, n) }

// AppendText appends s as a text string.
func AppendText(b []byte, s string) []byte {
	return append(AppendHead(b, MajorText, uint64(len(s))), s...)
}

// AppendBytes appends p as a byte string; nil is the empty byte string.
func AppendBytes(b, p []byte) []byte {
	return append(AppendHead(b, MajorBytes, uint64(len(p))), p...)
}

// AppendBytesOrNull appends p as a byte string, or null when p is nil: what
// the library writes for a nil []byte that is not omitempty.
func AppendBytesOrNull(b, p []byte) []byte {
	if p == nil {
		return append(b, Null)
	}
	return AppendBytes(b, p)
}

// AppendBool appends true or false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, True)
	}
	return append(b, False)
}

// AppendNull appends null.
func AppendNull(b []byte) []byte { return append(b, Null) }

// Head reads the head at b[i]: its major type, its argument (a length, a
// count, an integer; for major type 7 the simple value or the float's
// bits) and the offset after it. ok is false when b ends first or the head
// is indefinite-length or reserved; Why says which. Head does not insist
// on the shortest form: compare next-i with HeadLen(arg) where that
// matters.
func Head(b []byte, i int) (major byte, arg uint64, next int, ok bool) {
	if uint(i) >= uint(len(b)) {
		return 0, 0, 0, false
	}
	major, ai := b[i]>>5, b[i]&0x1f
	i++
	switch {
	case ai < 24:
		return major, uint64(ai), i, true
	case ai == 24 && i+1 <= len(b):
		return major, uint64(b[i]), i + 1, true
	case ai == 25 && i+2 <= len(b):
		return major, uint64(binary.BigEndian.Uint16(b[i:])), i + 2, true
	case ai == 26 && i+4 <= len(b):
		return major, uint64(binary.BigEndian.Uint32(b[i:])), i + 4, true
	case ai == 27 && i+8 <= len(b):
		return major, binary.BigEndian.Uint64(b[i:]), i + 8, true
	}
	return 0, 0, 0, false
}

// TypeName names a major type for an error message: "an unsigned
// integer", "a map", ...; major type 7 (false, true, null, floats and other
// simple values) is "a simple value or float", which a reader that knows
// the argument may say more precisely.
func TypeName(major byte) string {
	switch major {
	case MajorUint:
		return "an unsigned integer"
	case MajorNeg:
		return "a negative integer"
	case MajorBytes:
		return "a byte string"
	case MajorText:
		return "a text string"
	case MajorArray:
		return "an array"
	case MajorMap:
		return "a map"
	case MajorTag:
		return "a tag"
	}
	return "a simple value or float"
}

// Problem says why an item could not be read. Readers turn it into their
// own error: their texts reach faults and the journal, so each keeps its
// wording.
type Problem uint8

const (
	OK         Problem = iota
	Truncated          // the input ends inside the item
	Indefinite         // an indefinite-length head (additional information 31)
	Reserved           // additional information 28-30
	TooDeep            // nested more than MaxDepth levels
	Tag                // a tag (major type 6): no value here has one
	BadSimple          // a simple value below 32 in two bytes
	BadUTF8            // a text string that is not UTF-8
)

// Why says why Head(b, i) failed: Truncated, Indefinite or Reserved.
func Why(b []byte, i int) Problem {
	if uint(i) >= uint(len(b)) {
		return Truncated
	}
	switch ai := b[i] & 0x1f; {
	case ai == 31:
		return Indefinite
	case ai > 27:
		return Reserved
	}
	return Truncated
}

// Skip returns the offset after the item at b[i], which must be
// well-formed: definite lengths, no tags, at most MaxDepth levels of
// nesting. With valid it also checks what a strict decoder refuses inside
// an item (text that is not UTF-8, a two-byte simple value below 32); a
// reader of values already validated leaves it off. Heads need not be
// shortest.
func Skip(b []byte, i int, valid bool) (next int, p Problem) {
	return skip(b, i, 0, valid)
}

// SkipAt is Skip for an item that is already depth levels below the top:
// it refuses what would nest deeper than MaxDepth counting from the top. A
// reader that walks the enclosing containers itself uses it to keep the
// same limit over the whole item.
func SkipAt(b []byte, i, depth int, valid bool) (next int, p Problem) {
	return skip(b, i, depth, valid)
}

func skip(b []byte, i, depth int, valid bool) (int, Problem) {
	if depth > MaxDepth {
		return 0, TooDeep
	}
	major, n, next, ok := Head(b, i)
	if !ok {
		return 0, Why(b, i)
	}
	switch major {
	case MajorBytes, MajorText:
		if n > uint64(len(b)-next) {
			return 0, Truncated
		}
		end := next + int(n)
		if valid && major == MajorText && !utf8.Valid(b[next:end]) {
			return 0, BadUTF8
		}
		return end, OK
	case MajorArray, MajorMap:
		var p Problem
		for k := uint64(0); k < n; k++ {
			if next, p = skip(b, next, depth+1, valid); p != OK {
				return 0, p
			}
			if major == MajorMap {
				if next, p = skip(b, next, depth+1, valid); p != OK {
					return 0, p
				}
			}
		}
		return next, OK
	case MajorTag:
		return 0, Tag
	case MajorSimple:
		if valid && b[i]&0x1f == 24 && n < 32 {
			return 0, BadSimple
		}
	}
	return next, OK // integers, simple values and floats: the head is the item
}
