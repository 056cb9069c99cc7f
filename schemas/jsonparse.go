package schemas

import (
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/internal/jsonx"
)

// DecodeJSON parses one JSON value strictly: UTF-8 only, no duplicate object
// keys, nothing after the value, nesting and sizes bounded, numbers kept as
// json.Number and within float64 range. encoding/json alone accepts duplicate
// keys (last one wins) and would let two spellings of one object hash apart.
//
// The result is what encoding/json would build with UseNumber — objects as
// map[string]any, arrays as []any (non-nil when empty), json.Number, string,
// bool and nil, strings unescaped exactly as encoding/json does — but in one
// pass over the bytes (internal/jsonx). Errors are *JSONError, with the JSON
// pointer of the member being parsed.
func DecodeJSON(js []byte) (any, error) {
	v, _, err := jsonx.Parse(js, jsonx.Options{MaxDepth: maxDepth, MaxElems: maxElems, Number: jsonNumber})
	if err != nil {
		e := err.(*jsonx.Error)
		msg := e.Msg
		if e.Kind == jsonx.Trailing {
			// The HTTP API's words for it, on every route (docs/API.md).
			msg = fmt.Sprintf("trailing data after the JSON value (at byte %d)", e.Offset)
		}
		return nil, &JSONError{Pointer: pointer(e.Path), Msg: msg}
	}
	return v, nil
}

// jsonNumber applies checkNumber's limits to a literal DecodeJSON reads,
// asking checkNumber only when numberSurelyFits cannot tell.
func jsonNumber(n jsonx.Number) (json.Number, error) {
	lit := json.Number(n.Lit)
	if !numberSurelyFits(n.Int, n.Frac, n.Exp, len(n.Lit)) {
		if err := checkNumber(lit); err != nil {
			return "", err
		}
	}
	return lit, nil
}

// numberSurelyFits reports, without allocating, that checkNumber accepts a
// well-formed literal of length n with these integer and fraction digits
// and decimal exponent: it is zero, or no longer than maxNumberLen with its
// leading digit at a power of ten in [minExp10, maxExp10-1], where
// float64 neither overflows nor rounds to zero. False means "ask
// checkNumber", which decides the rest (including 10^308 <= |x| < 10^309).
func numberSurelyFits(intPart, frac string, exp, n int) bool {
	if n > maxNumberLen || exp > maxExpLiteral || exp < -maxExpLiteral {
		return false
	}
	var top int // power of ten of the leading non-zero digit
	switch {
	case intPart[0] != '0':
		top = exp + len(intPart) - 1
	default:
		j := 0
		for j < len(frac) && frac[j] == '0' {
			j++
		}
		if j == len(frac) {
			return true // zero
		}
		top = exp - j - 1
	}
	return top >= minExp10 && top < maxExp10
}
