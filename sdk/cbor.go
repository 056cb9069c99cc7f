package sdk

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// The encoding is the kernel's canonical form (schemas.Marshal): RFC 8949
// core deterministic encoding, times as Unix seconds. It must stay identical,
// byte for byte; TestMarshalMatchesSchemas pins it.
var (
	encMode = mustEncMode()
	decMode = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	eo := cbor.CoreDetEncOptions()
	eo.Time = cbor.TimeUnix
	m, err := eo.EncMode()
	if err != nil {
		panic(err)
	}
	return m
}

// The decoder is lenient about what the kernel already validated (unknown
// fields are ignored, as a schema may grow optional fields) but refuses
// bytes that are not one well-formed CBOR item of the right shape, and
// duplicate map keys. Limits
// follow the kernel's decoder so every value it accepts decodes here too.
func mustDecMode() cbor.DecMode {
	m, err := cbor.DecOptions{
		MaxNestedLevels:   64,
		MaxArrayElements:  1 << 20,
		MaxMapPairs:       1 << 20,
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		UTF8:              cbor.UTF8RejectInvalid,
		IntDec:            cbor.IntDecConvertNone,
		DefaultMapType:    reflect.TypeOf(map[string]any(nil)),
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}

// Marshal encodes v as canonical CBOR, byte for byte what the kernel writes
// for the same value. Use integer types for integers: a float64 2.0 encodes
// as a float.
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// Unmarshal decodes one CBOR item into v (a pointer). Trailing bytes,
// indefinite lengths, tags and invalid UTF-8 are errors; map keys that match
// no struct field are ignored. Maps decoded into an interface are
// map[string]any; integers are uint64 (or int64 when negative).
func Unmarshal(data []byte, v any) error {
	if f, ok := v.(fastDecoder); ok {
		return f.decodeCBOR(data)
	}
	return decMode.Unmarshal(data, v)
}

// fastDecoder is an sdk type that decodes itself without reflection, as
// strictly as the library would (see decodeFields): the records every
// effectful step decodes. Its UnmarshalCBOR is the same code, for when the
// library meets it inside an author's type.
type fastDecoder interface {
	decodeCBOR(data []byte) error
}

// RawValue is the canonical CBOR of one value, kept undecoded: as a struct
// field it captures a sub-value as bytes on decode and writes them back
// verbatim on encode. It must hold canonical CBOR.
type RawValue []byte

// MarshalCBOR writes r verbatim; an empty RawValue is null.
func (r RawValue) MarshalCBOR() ([]byte, error) {
	if len(r) == 0 {
		return []byte{0xf6}, nil
	}
	return r, nil
}

// UnmarshalCBOR keeps a copy of data.
func (r *RawValue) UnmarshalCBOR(data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
}

// CBOR major types, shifted into the initial byte.
const (
	majUint   = 0 << 5
	majNeg    = 1 << 5
	majBytes  = 2 << 5
	majText   = 3 << 5
	majArray  = 4 << 5
	majMap    = 5 << 5
	majTag    = 6 << 5
	majSimple = 7 << 5
)

const (
	cborFalse = 0xf4
	cborTrue  = 0xf5
	cborNull  = 0xf6
)

// appendHead appends a CBOR head in its shortest form.
func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= math.MaxUint8:
		return append(b, major|24, byte(n))
	case n <= math.MaxUint16:
		return append(b, major|25, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, major|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, major|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendText(b []byte, s string) []byte {
	return append(appendHead(b, majText, uint64(len(s))), s...)
}

// appendBytes writes p as a byte string, or null when p is nil (as the
// library writes a nil []byte field).
func appendBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, cborNull)
	}
	return append(appendHead(b, majBytes, uint64(len(p))), p...)
}

var (
	errTruncated  = errors.New("truncated")
	errIndefinite = errors.New("indefinite length")
	errReserved   = errors.New("reserved additional information")
	errTooDeep    = errors.New("nested too deeply")
	errBadSimple  = errors.New("malformed simple value")
	errTag        = errors.New("tags are not allowed")
	errUTF8       = errors.New("invalid UTF-8 text")
)

// reader walks CBOR heads over b. It never panics on any input.
type reader struct {
	b   []byte
	off int
}

// head reads one head: the major type (shifted), and its argument (a length,
// a count, an integer, or for major 7 the simple value or float bits).
// Indefinite lengths are refused.
func (r *reader) head() (major byte, arg uint64, err error) {
	if r.off >= len(r.b) {
		return 0, 0, errTruncated
	}
	ib := r.b[r.off]
	r.off++
	major, ai := ib&0xe0, ib&0x1f
	var n int
	switch {
	case ai < 24:
		return major, uint64(ai), nil
	case ai == 24:
		n = 1
	case ai == 25:
		n = 2
	case ai == 26:
		n = 4
	case ai == 27:
		n = 8
	case ai == 31:
		return 0, 0, errIndefinite
	default:
		return 0, 0, errReserved
	}
	if len(r.b)-r.off < n {
		return 0, 0, errTruncated
	}
	for _, c := range r.b[r.off : r.off+n] {
		arg = arg<<8 | uint64(c)
	}
	r.off += n
	if major == majSimple && ai == 24 && arg < 32 {
		return 0, 0, errBadSimple
	}
	return major, arg, nil
}

// span returns the next n bytes.
func (r *reader) span(n uint64) ([]byte, error) {
	if n > uint64(len(r.b)-r.off) {
		return nil, errTruncated
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s, nil
}

// text reads a text string, which must be valid UTF-8, and returns its
// bytes (not copied).
func (r *reader) text() ([]byte, error) {
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != majText {
		return nil, fmt.Errorf("want a text string, found %s", majorName(major))
	}
	s, err := r.span(n)
	if err == nil && !utf8.Valid(s) {
		return nil, errUTF8
	}
	return s, err
}

// bytesOrNull reads a byte string (returned as a sub-slice, not copied) or
// null (nil).
func (r *reader) bytesOrNull() ([]byte, error) {
	if r.off < len(r.b) && r.b[r.off] == cborNull {
		r.off++
		return nil, nil
	}
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != majBytes {
		return nil, fmt.Errorf("want a byte string, found %s", majorName(major))
	}
	return r.span(n)
}

func (r *reader) uint() (uint64, error) {
	major, n, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != majUint {
		return 0, fmt.Errorf("want an unsigned integer, found %s", majorName(major))
	}
	return n, nil
}

func (r *reader) bool() (bool, error) {
	if r.off >= len(r.b) {
		return false, errTruncated
	}
	switch r.b[r.off] {
	case cborFalse:
		r.off++
		return false, nil
	case cborTrue:
		r.off++
		return true, nil
	}
	return false, errors.New("want a boolean")
}

// mapHead reads the head of a map and returns its pair count.
func (r *reader) mapHead() (uint64, error) {
	major, n, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != majMap {
		return 0, fmt.Errorf("want a map, found %s", majorName(major))
	}
	return n, nil
}

// skip moves past one well-formed item and returns its bytes. Tags are
// refused, as the sdk's decoder and the kernel's refuse them.
func (r *reader) skip() ([]byte, error) {
	start := r.off
	if err := r.skipItem(0); err != nil {
		return nil, err
	}
	return r.b[start:r.off], nil
}

func (r *reader) skipItem(depth int) error {
	if depth > 64 {
		return errTooDeep
	}
	major, n, err := r.head()
	if err != nil {
		return err
	}
	switch major {
	case majBytes:
		_, err = r.span(n)
		return err
	case majText:
		s, err := r.span(n)
		if err == nil && !utf8.Valid(s) {
			return errUTF8
		}
		return err
	case majArray:
		for i := uint64(0); i < n; i++ {
			if err := r.skipItem(depth + 1); err != nil {
				return err
			}
		}
	case majMap:
		for i := uint64(0); i < n; i++ {
			if err := r.skipItem(depth + 1); err != nil {
				return err
			}
			if err := r.skipItem(depth + 1); err != nil {
				return err
			}
		}
	case majTag:
		return errTag
	}
	return nil
}

func majorName(major byte) string {
	switch major {
	case majUint:
		return "an unsigned integer"
	case majNeg:
		return "a negative integer"
	case majBytes:
		return "a byte string"
	case majText:
		return "a text string"
	case majArray:
		return "an array"
	case majMap:
		return "a map"
	case majTag:
		return "a tag"
	default:
		return "a simple value or float"
	}
}
