package schemas

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/internal/walk"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// ValueError is a value refused by a schema. Pointer is a JSON pointer into
// the value ("/" for the root); Msg says every problem found, with its place.
type ValueError struct {
	Schema  string
	Pointer string
	Msg     string
}

func (e *ValueError) Error() string {
	return "schema " + e.Schema + " at " + e.Pointer + ": " + e.Msg
}

// ErrInvalid is matched by errors.Is for every *ValueError.
var ErrInvalid = errors.New("schemas: value does not match its schema")

func (e *ValueError) Is(target error) bool { return target == ErrInvalid }

// FromJSON parses js strictly (see DecodeJSON), validates it against schema
// name and returns its canonical CBOR encoding.
func (r *Registry) FromJSON(name string, js []byte) ([]byte, error) {
	st, c, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	v, err := DecodeJSON(js)
	if err != nil {
		var je *JSONError
		if errors.As(err, &je) {
			return nil, &ValueError{Schema: name, Pointer: je.Pointer, Msg: "invalid JSON: " + je.Msg}
		}
		return nil, &ValueError{Schema: name, Pointer: "/", Msg: err.Error()}
	}
	return st.fromValue(c, v)
}

// FromValue is FromJSON for an already-decoded JSON value: maps with string
// keys, slices, string, bool, nil, and numbers as json.Number, float64 or Go
// integers. The value is not modified.
func (r *Registry) FromValue(name string, v any) ([]byte, error) {
	st, c, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	if err := checkJSONValue(v); err != nil {
		return nil, valueErr(name, err)
	}
	return st.fromValue(c, v)
}

func (st *regState) fromValue(c *compiled, v any) ([]byte, error) {
	// Fast path: where no byte string can occur below the schema, the
	// conversion is schema-free (plain), and the converted value's JSON model
	// is v itself (numbers by value), so the CBOR fast plan's "valid" is the
	// validator's verdict on v. Anything else takes the general path below,
	// which gives every error message.
	if b, ok := st.fastFromValue(c, v); ok {
		return b, nil
	}
	return st.fromValueSlow(c, v)
}

func (st *regState) fastFromValue(c *compiled, v any) ([]byte, bool) {
	if c.fast == nil || st.bytesBelow[c.schema] || !integerLiterals(v) {
		return nil, false
	}
	out, err := plain(v, nil)
	if err != nil {
		return nil, false
	}
	b, err := encMode.Marshal(out)
	if err != nil || !c.fast.accepts(b) {
		return nil, false
	}
	return b, true
}

// integerLiterals reports whether every number in v is written as an
// integer (digits, optional minus). Only then is the converted CBOR exactly
// the value the validator judges: "1.0000000000000001" is not an integer to
// JSON Schema but converts to the float64 1, which would encode as the
// integer 1. Other spellings take the general path.
func integerLiterals(v any) bool {
	_, _, err := walk.Map(v, nil, false, integerLiteral)
	return err == nil
}

// errNotInteger stops integerLiterals' walk; it never leaves the package.
var errNotInteger = errors.New("schemas: number not written as an integer")

func integerLiteral(v any, _ []string) (any, bool, error) {
	switch t := v.(type) {
	case json.Number:
		s := strings.TrimPrefix(string(t), "-")
		if s == "" {
			return nil, false, errNotInteger
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return nil, false, errNotInteger
			}
		}
	case float64, float32:
		return nil, false, errNotInteger
	}
	return nil, false, nil
}

// fromValueSlow validates v with the JSON Schema validator, then converts it
// guided by the schema.
func (st *regState) fromValueSlow(c *compiled, v any) ([]byte, error) {
	if err := c.schema.Validate(v); err != nil {
		return nil, validationErr(c.name, err)
	}
	w := walker{st: st}
	out, err := w.convert(v, []*jsonschema.Schema{c.schema})
	if err != nil {
		return nil, valueErr(c.name, err)
	}
	b, err := encMode.Marshal(out)
	if err != nil {
		return nil, &ValueError{Schema: c.name, Pointer: "/", Msg: err.Error()}
	}
	return b, nil
}

// Validate checks that data is canonical CBOR (see Decode and the number rules
// of FromJSON) holding a value valid against schema name, with byte strings
// exactly where the schema says contentEncoding base64.
func (r *Registry) Validate(name string, data []byte) error {
	st, c, err := r.lookup(name)
	if err != nil {
		return err
	}
	if c.fast != nil && c.fast.accepts(data) {
		return nil
	}
	h := HashBytes(data)
	if _, ok := c.valid.Get(h); ok {
		return nil
	}
	if err := st.validate(c, data); err != nil {
		return err // failures are not cached: their message is always recomputed
	}
	c.valid.Add(h, struct{}{})
	return nil
}

// validate is Validate's general path: it gives every verdict the fast path
// is unsure of, and every error message.
func (st *regState) validate(c *compiled, data []byte) error {
	name := c.name
	v, err := decodeJSONModel(data)
	if err != nil {
		return fmt.Errorf("schema %s: %w", name, err)
	}
	// jm is v with byte strings as base64 text; when there are none, v itself.
	path := make([]string, 0, 16)
	jm, hasBytes, err := toJSONModel(v, path)
	if err != nil {
		return valueErr(name, err)
	}
	if err := c.schema.Validate(jm); err != nil {
		return validationErr(name, err)
	}
	if !hasBytes && !st.bytesBelow[c.schema] {
		return nil
	}
	w := walker{st: st, path: path[:0]}
	if err := w.check(jm, v, []*jsonschema.Schema{c.schema}); err != nil {
		return valueErr(name, err)
	}
	return nil
}

// posErr is an error at a place in the value.
type posErr struct {
	path []string
	msg  string
}

func (e *posErr) Error() string { return pointer(e.path) + ": " + e.msg }

func newPosErr(path []string, format string, a ...any) *posErr {
	return &posErr{path: append([]string(nil), path...), msg: fmt.Sprintf(format, a...)}
}

func valueErr(name string, err error) error {
	var pe *posErr
	if errors.As(err, &pe) {
		return &ValueError{Schema: name, Pointer: pointer(pe.path), Msg: pe.msg}
	}
	return &ValueError{Schema: name, Pointer: "/", Msg: err.Error()}
}

// validationErr flattens the validator's error tree into one message that
// names each failing instance location.
func validationErr(name string, err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValueError{Schema: name, Pointer: "/", Msg: cleanMsg(err.Error())}
	}
	ls := leaves(ve)
	// The validator visits object members in Go map order; sort so the
	// message (which faults and rejected receipts journal) is deterministic.
	slices.SortStableFunc(ls, func(a, b *jsonschema.ValidationError) int {
		if c := strings.Compare(a.InstanceLocation, b.InstanceLocation); c != 0 {
			return c
		}
		if c := strings.Compare(a.KeywordLocation, b.KeywordLocation); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	var parts []string
	seen := map[string]bool{}
	for _, l := range ls {
		p := l.InstanceLocation
		if p == "" {
			p = "/"
		}
		part := "at " + p + ": " + cleanMsg(l.Message)
		if !seen[part] {
			seen[part] = true
			parts = append(parts, part)
		}
	}
	ptr := ls[0].InstanceLocation
	if ptr == "" {
		ptr = "/"
	}
	if len(parts) == 1 {
		return &ValueError{Schema: name, Pointer: ptr, Msg: cleanMsg(ls[0].Message)}
	}
	return &ValueError{Schema: name, Pointer: ptr, Msg: strings.Join(parts, "; ")}
}

// checkJSONValue refuses Go values outside the JSON data model, and numbers
// out of range, before they reach the validator.
func checkJSONValue(v any) error {
	_, _, err := walk.Map(v, nil, true, checkJSONLeaf)
	return err
}

func checkJSONLeaf(v any, path []string) (any, bool, error) {
	if len(path) > maxDepth {
		return nil, false, newPosErr(path, "nesting deeper than %d", maxDepth)
	}
	switch t := v.(type) {
	case nil, bool, string, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		map[string]any, []any:
		return nil, false, nil
	case float64:
		if !floatOK(t) {
			return nil, false, newPosErr(path, "number %v is not finite", t)
		}
		return nil, false, nil
	case json.Number:
		if err := checkNumber(t); err != nil {
			return nil, false, newPosErr(path, "%v", err)
		}
		return nil, false, nil
	}
	return nil, false, newPosErr(path, "%T is not a JSON value", v)
}

func floatOK(f float64) bool { return f-f == 0 }

// walker carries a value through its schema to find which strings are byte
// strings. It follows properties, patternProperties, additionalProperties,
// items/prefixItems, $ref, allOf, if/then/else, dependentSchemas, and the
// branches of anyOf/oneOf the value validates against. Only schemas with a
// base64 location somewhere below them are followed; other subtrees convert
// (or check) without the schema.
type walker struct {
	st       *regState
	checking bool
	path     []string
}

// applicable closes ss over in-place applicators, keeping only schemas with
// bytes below them. jv is the JSON-model value at this location.
func (w *walker) applicable(ss []*jsonschema.Schema, jv any) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || !w.st.bytesBelow[s] {
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
		add(s.Ref)
		add(s.RecursiveRef)
		add(s.DynamicRef)
		for _, c := range s.AllOf {
			add(c)
		}
		for _, c := range s.AnyOf {
			if w.st.bytesBelow[c] && c.Validate(jv) == nil {
				add(c)
			}
		}
		for _, c := range s.OneOf {
			if w.st.bytesBelow[c] && c.Validate(jv) == nil {
				add(c)
			}
		}
		if s.If != nil && (w.st.bytesBelow[s.If] || w.st.bytesBelow[s.Then] || w.st.bytesBelow[s.Else]) {
			if s.If.Validate(jv) == nil {
				add(s.If)
				add(s.Then)
			} else {
				add(s.Else)
			}
		}
		if m, ok := jv.(map[string]any); ok {
			for k, c := range s.DependentSchemas {
				if _, ok := m[k]; ok {
					add(c)
				}
			}
			for k, c := range s.Dependencies {
				if cs, ok := c.(*jsonschema.Schema); ok {
					if _, ok := m[k]; ok {
						add(cs)
					}
				}
			}
		}
	}
	for _, s := range ss {
		add(s)
	}
	return out
}

func propSchemas(ss []*jsonschema.Schema, k string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range ss {
		matched := false
		if c, ok := s.Properties[k]; ok {
			out = append(out, c)
			matched = true
		}
		for re, c := range s.PatternProperties {
			if re.MatchString(k) {
				out = append(out, c)
				matched = true
			}
		}
		if !matched {
			if c, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
				out = append(out, c)
			} else if s.UnevaluatedProperties != nil {
				out = append(out, s.UnevaluatedProperties)
			}
		}
	}
	return out
}

func itemSchemas(ss []*jsonschema.Schema, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range ss {
		var c *jsonschema.Schema
		switch {
		case i < len(s.PrefixItems):
			c = s.PrefixItems[i]
		case s.Items2020 != nil:
			c = s.Items2020
		default:
			switch it := s.Items.(type) {
			case *jsonschema.Schema:
				c = it
			case []*jsonschema.Schema:
				if i < len(it) {
					c = it[i]
				} else if a, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
					c = a
				}
			}
		}
		if c == nil {
			c = s.UnevaluatedItems
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

func isBase64(ss []*jsonschema.Schema) bool {
	for _, s := range ss {
		if s.ContentEncoding == "base64" {
			return true
		}
	}
	return false
}

// strictBase64 accepts exactly the strings StdEncoding produces, so that
// bytes -> text -> bytes is a bijection (no newlines, no stray bits).
var strictBase64 = base64.StdEncoding.Strict()

// convert produces the Go value whose canonical CBOR encoding represents jv.
func (w *walker) convert(jv any, ss []*jsonschema.Schema) (any, error) {
	ss = w.applicable(ss, jv)
	if len(ss) == 0 {
		return plain(jv, w.path)
	}
	switch t := jv.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for _, k := range walk.SortedKeys(t) {
			w.path = append(w.path, k)
			c, err := w.convert(t[k], propSchemas(ss, k))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			w.path = append(w.path, strconv.Itoa(i))
			c, err := w.convert(e, itemSchemas(ss, i))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case string:
		if !isBase64(ss) {
			return t, nil
		}
		if strings.ContainsAny(t, "\r\n") {
			return nil, newPosErr(w.path, "not valid base64: contains a line break")
		}
		b, err := strictBase64.DecodeString(t)
		if err != nil {
			return nil, newPosErr(w.path, "not valid base64 (standard alphabet, padded): %v", err)
		}
		return b, nil
	}
	return plain(jv, w.path)
}

// plain converts a JSON-model value that holds no byte strings.
func plain(jv any, path []string) (any, error) {
	out, _, err := walk.Map(jv, path, true, plainLeaf)
	return out, err
}

func plainLeaf(jv any, path []string) (any, bool, error) {
	switch t := jv.(type) {
	case json.Number:
		v, err := canonicalNumber(t)
		if err != nil {
			return nil, false, newPosErr(path, "%v", err)
		}
		return v, true, nil
	case float32:
		return plainFloat(float64(t), path)
	case float64:
		return plainFloat(t, path)
	}
	return nil, false, nil // maps, slices, nil, bool, string, Go integers
}

func plainFloat(f float64, path []string) (any, bool, error) {
	if !floatOK(f) {
		return nil, false, newPosErr(path, "number %v is not finite", f)
	}
	return canonicalFloat(f), true, nil
}

// check verifies that orig (decoded CBOR) has byte strings exactly where the
// schema puts base64 strings; jm is the same value in the JSON model.
func (w *walker) check(jm, orig any, ss []*jsonschema.Schema) error {
	ss = w.applicable(ss, jm)
	if len(ss) == 0 {
		return noBytes(orig, w.path)
	}
	switch t := jm.(type) {
	case map[string]any:
		om := orig.(map[string]any)
		for _, k := range walk.SortedKeys(t) {
			w.path = append(w.path, k)
			err := w.check(t[k], om[k], propSchemas(ss, k))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case []any:
		oa := orig.([]any)
		for i, e := range t {
			w.path = append(w.path, strconv.Itoa(i))
			err := w.check(e, oa[i], itemSchemas(ss, i))
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	case string:
		_, isBytes := orig.([]byte)
		switch b64 := isBase64(ss); {
		case b64 && !isBytes:
			return newPosErr(w.path, "want a byte string (contentEncoding base64), got a text string")
		case !b64 && isBytes:
			return newPosErr(w.path, "want a text string, got a byte string")
		}
	}
	return nil
}

func noBytes(orig any, path []string) error {
	_, _, err := walk.Map(orig, path, true, noBytesLeaf)
	return err
}

func noBytesLeaf(v any, path []string) (any, bool, error) {
	if _, ok := v.([]byte); ok {
		return nil, false, newPosErr(path, "want a text string, got a byte string (the schema has no contentEncoding base64 here)")
	}
	return nil, false, nil
}

// toJSONModel maps a decoded CBOR value into the JSON data model the
// validator takes: byte strings become base64 text, big integers
// json.Number. Containers are copied only when something inside changes, so
// a value without byte strings is returned as is. Floats must be finite and
// non-integral (or outside integer range): FromJSON never writes other floats.
func toJSONModel(v any, path []string) (any, bool, error) {
	return walk.Map(v, path, true, jsonModelLeaf)
}

func jsonModelLeaf(v any, path []string) (any, bool, error) {
	switch t := v.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(t), true, nil
	case big.Int:
		return json.Number(t.String()), true, nil
	case float64:
		if !floatIsCanonical(t) {
			return nil, false, newPosErr(path, "float %v is not canonical here: integral numbers are integers, and NaN/Infinity are not JSON", t)
		}
		return nil, false, nil
	case map[any]any:
		return nil, false, newPosErr(path, "map with non-text keys is not a JSON object")
	case nil, bool, string, uint64, int64, map[string]any, []any:
		return nil, false, nil
	}
	return nil, false, newPosErr(path, "%T is not a JSON value", v)
}
