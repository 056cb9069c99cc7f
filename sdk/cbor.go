package sdk

import (
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/aos-kernel/aos/internal/canon"
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
		return []byte{canon.Null}, nil
	}
	return r, nil
}

// UnmarshalCBOR keeps a copy of data.
func (r *RawValue) UnmarshalCBOR(data []byte) error {
	*r = append((*r)[:0], data...)
	return nil
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

// problemErr is the sdk's error for what canon found wrong; the texts are
// the ones guests have always seen.
func problemErr(p canon.Problem) error {
	switch p {
	case canon.Indefinite:
		return errIndefinite
	case canon.Reserved:
		return errReserved
	case canon.TooDeep:
		return errTooDeep
	case canon.Tag:
		return errTag
	case canon.BadSimple:
		return errBadSimple
	case canon.BadUTF8:
		return errUTF8
	}
	return errTruncated
}

// reader walks CBOR heads over b. It never panics on any input.
type reader struct {
	b   []byte
	off int
}

// head reads one head: the major type, and its argument (a length, a
// count, an integer, or for major 7 the simple value or float bits).
// Indefinite lengths are refused.
func (r *reader) head() (major byte, arg uint64, err error) {
	major, arg, next, ok := canon.Head(r.b, r.off)
	if !ok {
		return 0, 0, problemErr(canon.Why(r.b, r.off))
	}
	if major == canon.MajorSimple && r.b[r.off]&0x1f == 24 && arg < 32 {
		return 0, 0, errBadSimple
	}
	r.off = next
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
	if major != canon.MajorText {
		return nil, fmt.Errorf("want a text string, found %s", canon.TypeName(major))
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
	if r.off < len(r.b) && r.b[r.off] == canon.Null {
		r.off++
		return nil, nil
	}
	major, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != canon.MajorBytes {
		return nil, fmt.Errorf("want a byte string, found %s", canon.TypeName(major))
	}
	return r.span(n)
}

func (r *reader) uint() (uint64, error) {
	major, n, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != canon.MajorUint {
		return 0, fmt.Errorf("want an unsigned integer, found %s", canon.TypeName(major))
	}
	return n, nil
}

func (r *reader) bool() (bool, error) {
	if r.off >= len(r.b) {
		return false, errTruncated
	}
	switch r.b[r.off] {
	case canon.False:
		r.off++
		return false, nil
	case canon.True:
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
	if major != canon.MajorMap {
		return 0, fmt.Errorf("want a map, found %s", canon.TypeName(major))
	}
	return n, nil
}

// skip moves past one well-formed item and returns its bytes. Tags are
// refused, as the sdk's decoder and the kernel's refuse them.
func (r *reader) skip() ([]byte, error) {
	start := r.off
	next, p := canon.Skip(r.b, r.off, true)
	if p != canon.OK {
		return nil, problemErr(p)
	}
	r.off = next
	return r.b[start:r.off], nil
}
