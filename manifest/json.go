package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/internal/jsonx"
	"github.com/aos-kernel/aos/internal/walk"
)

// maxDepth bounds how deeply a manifest file may nest. Source wraps every def
// two levels deep and the strict CBOR decoder refuses more than 64 levels, so
// anything Load accepts must stay well under that for FromSource to read it back.
const maxDepth = 60

// dupKey is a JSON object key that appeared more than once.
type dupKey struct {
	ptr string // pointer to the object holding the key
	key string
}

const byteOrderMark = "\xef\xbb\xbf"

// parseJSON decodes one JSON document strictly into a generic value:
// map[string]any, []any, string, bool, nil and json.Number (normalized, see
// normNumber). Duplicate keys do not stop the parse; they are all reported so
// one load shows every mistake. Syntax errors, invalid UTF-8, numbers out of
// range, excessive nesting and trailing data are errors; those in the text
// name its line and column (in bytes, 1-based) where the problem is.
func parseJSON(data []byte) (any, []dupKey, error) {
	v, dups, err := jsonx.Parse(data, jsonx.Options{MaxDepth: maxDepth, Number: manifestNumber, CollectDuplicates: true})
	if err != nil {
		return nil, nil, jsonError(data, err.(*jsonx.Error))
	}
	var dks []dupKey
	for _, dk := range dups {
		dks = append(dks, dupKey{ptr: ptrTokens(dk.Path), key: dk.Key})
	}
	return v, dks, nil
}

// jsonError words a refusal of data for the user: the file as a whole, or
// the line and column where the problem is.
func jsonError(data []byte, e *jsonx.Error) error {
	if e.Kind == jsonx.NotUTF8 {
		return errors.New("file is not valid UTF-8")
	}
	if bytes.HasPrefix(data, []byte(byteOrderMark)) { // a syntax error to jsonx; say why
		return errors.New("file starts with a byte order mark; save it as plain UTF-8")
	}
	msg := e.Msg
	switch e.Kind {
	case jsonx.EOF:
		msg = "unexpected end of file"
	case jsonx.Trailing:
		msg = "unexpected data after the top-level value"
	case jsonx.BadNumber:
		msg = displayPtr(ptrTokens(e.Path)) + ": " + msg
	}
	line, col := jsonx.LineColumn(data, e.Offset)
	return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, msg)
}

// manifestNumber keeps every number in normNumber's spelling.
func manifestNumber(n jsonx.Number) (json.Number, error) { return normNumber(json.Number(n.Lit)) }

// normNumber gives every number one spelling, so that a value read from JSON
// and the same value read back from CBOR are identical: integral numbers as
// plain integers ("1.0", "1e2" become "1", "100"), others in Go's shortest
// round-trip float form.
func normNumber(n json.Number) (json.Number, error) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.Number(strconv.FormatInt(i, 10)), nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return json.Number(strconv.FormatUint(u, 10)), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("number %s is out of range", s)
	}
	return floatNumber(f), nil
}

func floatNumber(f float64) json.Number {
	if f == math.Trunc(f) {
		if f >= -(1<<63) && f < 1<<63 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		if f >= 0 && f < 1<<64 {
			return json.Number(strconv.FormatUint(uint64(f), 10))
		}
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
}

// toCBORValue turns a parsed JSON value into the generic value whose canonical
// CBOR is the def's identity: json.Number becomes int64, uint64 or float64.
func toCBORValue(v any) any {
	out, _, _ := walk.Map(v, nil, false, cborLeaf)
	return out
}

func cborLeaf(v any, _ []string) (any, bool, error) {
	t, ok := v.(json.Number)
	if !ok {
		return nil, false, nil
	}
	s := string(t)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, true, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u, true, nil
	}
	f, _ := strconv.ParseFloat(s, 64)
	return f, true, nil
}

// fromCBORValue is the inverse of toCBORValue for values schemas.Decode
// returns. It refuses what JSON cannot express (byte strings, non-text keys).
func fromCBORValue(v any) (any, error) {
	out, _, err := walk.Map(v, nil, false, jsonLeaf)
	return out, err
}

func jsonLeaf(v any, path []string) (any, bool, error) {
	if len(path)+1 > maxDepth { // the root is level 1
		return nil, false, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	switch t := v.(type) {
	case map[string]any, []any, string, bool, nil:
		return nil, false, nil
	case uint64:
		return json.Number(strconv.FormatUint(t, 10)), true, nil
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), true, nil
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return nil, false, fmt.Errorf("number %v cannot be expressed in JSON", t)
		}
		return floatNumber(t), true, nil
	default:
		return nil, false, fmt.Errorf("value of type %T cannot be expressed in JSON", v)
	}
}

// canonicalJSON renders a parsed value as compact JSON with sorted keys.
func canonicalJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("manifest: re-encode parsed JSON: %v", err)) // parsed values always encode
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// ptrJoin appends one reference token to a JSON pointer (RFC 6901 escaping).
func ptrJoin(ptr, tok string) string {
	tok = strings.ReplaceAll(tok, "~", "~0")
	tok = strings.ReplaceAll(tok, "/", "~1")
	return ptr + "/" + tok
}

// ptrTokens joins pointer tokens into a JSON pointer ("" for the root).
func ptrTokens(path []string) string {
	ptr := ""
	for _, tok := range path {
		ptr = ptrJoin(ptr, tok)
	}
	return ptr
}

func displayPtr(ptr string) string {
	if ptr == "" {
		return "/"
	}
	return ptr
}

// comparePtr orders JSON pointers token by token, numeric tokens numerically,
// so problems print in file order ("/2" before "/10").
func comparePtr(a, b string) int {
	at, bt := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(at) && i < len(bt); i++ {
		if at[i] == bt[i] {
			continue
		}
		ai, aerr := strconv.Atoi(at[i])
		bi, berr := strconv.Atoi(bt[i])
		if aerr == nil && berr == nil {
			if ai < bi {
				return -1
			}
			return 1
		}
		return strings.Compare(at[i], bt[i])
	}
	return len(at) - len(bt)
}
