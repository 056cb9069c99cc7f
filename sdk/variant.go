package sdk

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/internal/canon"
)

// Variant is a value of a variant schema, {"$tag": Tag, "$value": Value},
// as a workflow receives it: the arm's tag and the arm's value still
// encoded, for As to decode into the arm's type. Use it as the event type of
// a workflow whose event schema is a variant (receipts arrive as arms of
// one).
//
// A Variant also encodes back to the same {"$tag", "$value"} map, so a
// received one can be emitted or stored as it is.
type Variant struct {
	Tag   string
	Value RawValue // canonical CBOR of the arm's value
}

// As decodes the arm's value into v (a pointer).
func (x Variant) As(v any) error {
	if err := Unmarshal(x.Value, v); err != nil {
		return fmt.Errorf("variant arm %s: %w", x.Tag, err)
	}
	return nil
}

// MarshalCBOR writes {"$tag": Tag, "$value": Value}.
func (x Variant) MarshalCBOR() ([]byte, error) {
	if len(x.Value) == 0 {
		return nil, fmt.Errorf("variant arm %s has no value", x.Tag)
	}
	b := make([]byte, 0, 16+len(x.Tag)+len(x.Value))
	b = canon.AppendMap(b, 2)
	b = canon.AppendText(canon.AppendText(b, "$tag"), x.Tag)
	return append(canon.AppendText(b, "$value"), x.Value...), nil
}

// UnmarshalCBOR reads a {"$tag", "$value"} map (keys in any order, nothing
// else in it) and keeps a copy of the value's bytes.
func (x *Variant) UnmarshalCBOR(data []byte) error { return x.decodeCBOR(data) }

func (x *Variant) decodeCBOR(data []byte) error {
	tag, val, err := splitVariant(data)
	if err != nil {
		return err
	}
	x.Tag, x.Value = tag, append(RawValue(nil), val...)
	return nil
}

var errNotVariant = errors.New(`not a variant value (want a map of "$tag" and "$value")`)

// splitVariant returns the tag and the value's bytes (aliasing data).
func splitVariant(data []byte) (tag string, value []byte, err error) {
	r := reader{b: data}
	n, err := r.mapHead()
	if err != nil || n != 2 {
		return "", nil, errNotVariant
	}
	var haveTag bool
	for i := 0; i < 2; i++ {
		k, err := r.text()
		if err != nil {
			return "", nil, errNotVariant
		}
		switch string(k) {
		case "$tag":
			t, err := r.text()
			if err != nil {
				return "", nil, fmt.Errorf("variant $tag: %w", err)
			}
			tag, haveTag = string(t), true
		case "$value":
			if value, err = r.skip(); err != nil {
				return "", nil, fmt.Errorf("variant $value: %w", err)
			}
		default:
			return "", nil, errNotVariant
		}
	}
	if !haveTag || value == nil {
		return "", nil, errNotVariant
	}
	if r.off != len(data) {
		return "", nil, fmt.Errorf("variant: %d trailing bytes", len(data)-r.off)
	}
	return tag, value, nil
}

// Tagged builds a variant value to emit or store: it encodes as
// {"$tag": Tag, "$value": <Value encoded>}.
type Tagged struct {
	Tag   string `cbor:"$tag"`
	Value any    `cbor:"$value"`
}
