package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/fxamacker/cbor/v2"
)

// ErrNotCanonical reports CBOR that decodes but is not in canonical form.
var ErrNotCanonical = errors.New("schemas: cbor is not canonical")

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
	bigMode cbor.DecMode // decMode without the element-count bounds
)

func init() {
	eo := cbor.CoreDetEncOptions() // RFC 8949 §4.2.1: sorted keys, shortest ints and floats
	eo.Time = cbor.TimeUnix
	var err error
	if encMode, err = eo.EncMode(); err != nil {
		panic(err)
	}
	// Only false, true and null are values here; every other simple value
	// (including undefined) is refused rather than passed through.
	var rejectSimple []func(*cbor.SimpleValueRegistry) error
	for sv := 0; sv < 256; sv++ {
		if sv < 20 || sv == 23 || sv >= 32 {
			rejectSimple = append(rejectSimple, cbor.WithRejectedSimpleValue(cbor.SimpleValue(sv)))
		}
	}
	simple, err := cbor.NewSimpleValueRegistryFromDefaults(rejectSimple...)
	if err != nil {
		panic(err)
	}
	do := cbor.DecOptions{
		SimpleValues:     simple,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		DefaultMapType:   nil,
		MaxNestedLevels:  64,
		MaxArrayElements: 1 << 20,
		MaxMapPairs:      1 << 20,
		UTF8:             cbor.UTF8RejectInvalid,
		IntDec:           cbor.IntDecConvertNone,
	}
	if decMode, err = do.DecMode(); err != nil {
		panic(err)
	}
	do.MaxArrayElements, do.MaxMapPairs = math.MaxInt32, math.MaxInt32
	if bigMode, err = do.DecMode(); err != nil {
		panic(err)
	}
}

// Marshal encodes v as canonical CBOR (core deterministic encoding).
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// MustMarshal is Marshal for values whose encoding cannot fail (kernel-owned structs).
func MustMarshal(v any) []byte {
	b, err := encMode.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("schemas: marshal %T: %v", v, err))
	}
	return b
}

// Unmarshal decodes data into v strictly: duplicate keys, indefinite lengths,
// tags and trailing bytes are errors, and so are bytes that are not already
// canonical. The library's decoder accepts non-canonical input, so we re-encode
// the generic value and compare.
func Unmarshal(data []byte, v any) error {
	if err := CheckCanonical(data); err != nil {
		return err
	}
	return decMode.Unmarshal(data, v)
}

// UnmarshalTrusted decodes bytes this process wrote itself (journal, CAS objects
// it hashed) without the canonical re-encode check. Still strict about structure.
func UnmarshalTrusted(data []byte, v any) error { return decMode.Unmarshal(data, v) }

// UnmarshalTrustedBig is UnmarshalTrusted for objects this process wrote
// whose arrays or maps may hold more than a million elements (a snapshot's
// tables). The bytes bound the elements anyway.
func UnmarshalTrustedBig(data []byte, v any) error { return bigMode.Unmarshal(data, v) }

// Decode decodes canonical CBOR into a generic value (map[string]any for maps
// with text keys, []any, uint64/int64, float64, string, []byte, bool, nil).
func Decode(data []byte) (any, error) {
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decode cbor: %w", err)
	}
	re, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("decode cbor: %w", err)
	}
	if !bytes.Equal(re, data) {
		return nil, ErrNotCanonical
	}
	return normalize(v), nil
}

// CheckCanonical reports whether data is one well-formed canonical CBOR item.
func CheckCanonical(data []byte) error {
	_, err := Decode(data)
	return err
}

// Canonicalize decodes any strict CBOR item and re-encodes it canonically.
func Canonicalize(data []byte) ([]byte, error) {
	var v any
	if err := decMode.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("decode cbor: %w", err)
	}
	return encMode.Marshal(v)
}

// HashValue encodes v canonically and hashes the bytes.
func HashValue(v any) (Hash, []byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return Hash{}, nil, err
	}
	return HashBytes(b), b, nil
}

// normalize turns map[any]any with text keys into map[string]any so callers
// see one map shape. Non-text keys stay as map[any]any.
func normalize(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				for k2, e2 := range t {
					t[k2] = normalize(e2)
				}
				return t
			}
			m[ks] = normalize(e)
		}
		return m
	case []any:
		for i := range t {
			t[i] = normalize(t[i])
		}
		return t
	default:
		return v
	}
}
