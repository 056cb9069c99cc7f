package views

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aos-kernel/aos/internal/jsonx"
)

// The one strict reader of JSON into a Go shape: the export's lines here
// (ParseRecord), and every request body of the HTTP API (package api),
// which reads its bodies with it so that a line and a body refused for the
// same reason are refused in the same words. Every text is read by
// internal/jsonx, the one strict parser: the JSON grammar, UTF-8, no
// duplicate keys, no lone surrogate escapes, nothing after the value. A
// text of a fixed shape (a Go struct) is then held to its keys exactly: a
// key the struct does not have, or one spelled in another case (which
// encoding/json would match case-insensitively), is refused; only then does
// encoding/json fill the struct. The events route walks its envelope with
// jsonx's Scanner instead (package api), receipts and frames are read by
// package receipts on jsonx; all word their refusals with Problem.

// MaxDepth is encoding/json's nesting limit, which request bodies kept when
// encoding/json read them: a deeper value is refused.
const MaxDepth = 10000

// trailingData is the refusal of anything but whitespace after a body's
// JSON value, on every route (docs/API.md quotes it; answers_test.go holds
// every route that takes a body to it). schemas.DecodeJSON, which reads
// receipts and frames, words it the same.
const trailingData = "trailing data after the JSON value (at byte %d)"

// TrailingError is the refusal of what follows a text's value: the text's
// shape is not at fault, so the API answers it without the shape.
type TrailingError struct{ Offset int }

func (e *TrailingError) Error() string { return fmt.Sprintf(trailingData, e.Offset) }

// Decode decodes the one JSON value b holds into v (a pointer) strictly, as
// the top of this file says: jsonx's refusals, then keys held exactly to v's
// fields, then encoding/json.
func Decode(b []byte, v any) error {
	parsed, _, err := jsonx.Parse(b, jsonx.Options{MaxDepth: MaxDepth})
	if err != nil {
		return Problem(err)
	}
	if err := exactKeys(reflect.TypeOf(v), parsed, nil); err != nil {
		return err
	}
	// Unknown keys are refused above, case included; encoding/json's own
	// DisallowUnknownFields would match them case-insensitively.
	return json.Unmarshal(b, v)
}

// Problem words a refusal by jsonx for an API answer: trailing data as a
// *TrailingError, anything else as jsonx words it, with the JSON pointer of
// the member it is in when there is one. Any other error (one a caller of
// the Scanner wrapped with its own context) is left as it is.
func Problem(err error) error {
	e, ok := err.(*jsonx.Error)
	if !ok {
		return err
	}
	if e.Kind == jsonx.Trailing {
		return &TrailingError{e.Offset}
	}
	if len(e.Path) > 0 {
		return fmt.Errorf("json: at byte %d (%s): %s", e.Offset, pointer(e.Path), e.Msg)
	}
	return e
}

// pointer is the JSON pointer of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// exactKeys holds the keys of every object in v (a value jsonx parsed) that
// t, the Go type it will be decoded into, gives a fixed shape (a struct) to
// the struct's JSON field names, exactly. Values decoded by their own
// UnmarshalJSON (json.RawMessage: a manifest, an event's value) and values
// of interface type are left to whoever reads them. What does not have the
// type's kind at all (a string where an object belongs) is left to
// encoding/json, which refuses it naming the field.
func exactKeys(t reflect.Type, v any, at []string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(mapKeys(m)) {
			ft, ok := fields[k]
			if !ok {
				return unknownField(k, at, fields)
			}
			if err := exactKeys(ft, m[k], append(at, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		a, ok := v.([]any)
		if !ok {
			return nil
		}
		for i, x := range a {
			if err := exactKeys(t.Elem(), x, append(at, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range slices.Sorted(mapKeys(m)) {
			if err := exactKeys(t.Elem(), m[k], append(at, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// unknownField refuses key k of the object at at, naming the keys it may
// have.
func unknownField(k string, at []string, fields map[string]reflect.Type) error {
	known := slices.Sorted(mapKeys(fields))
	for _, f := range known {
		if strings.EqualFold(f, k) {
			return fmt.Errorf("json: unknown field %q in the object at %s: did you mean %q? (keys are exact, case included)", k, pointer(at), f)
		}
	}
	return fmt.Errorf("json: unknown field %q in the object at %s (its keys: %s)", k, pointer(at), strings.Join(known, ", "))
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// fieldsCache holds jsonFields' answer per struct type.
var fieldsCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields are the JSON names of t's fields as encoding/json decodes
// them (the tag's name, else the Go name; embedded structs' fields
// promoted; "-" and unexported fields left out), with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldsCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	addFields(t, out)
	fieldsCache.Store(t, out)
	return out
}

func addFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup { // the outer field wins, as in encoding/json
			out[name] = f.Type
		}
	}
}
