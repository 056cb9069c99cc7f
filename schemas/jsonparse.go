package schemas

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodeJSON parses one JSON value strictly: UTF-8 only, no duplicate object
// keys, nothing after the value, nesting and sizes bounded, numbers kept as
// json.Number and within float64 range. encoding/json alone accepts duplicate
// keys (last one wins) and would let two spellings of one object hash apart.
//
// The result is what encoding/json would build with UseNumber — objects as
// map[string]any, arrays as []any (non-nil when empty), json.Number, string,
// bool and nil, strings unescaped exactly as encoding/json does (a lone or
// mismatched UTF-16 surrogate escape becomes U+FFFD) — but in one pass over
// the bytes. Strings without escapes and number literals share one copy of
// the input, so a value keeps at most that copy alive. Errors are
// *JSONError, with the JSON pointer of the member being parsed.
func DecodeJSON(js []byte) (any, error) {
	if !utf8.Valid(js) {
		return nil, &JSONError{Pointer: "/", Msg: "input is not valid UTF-8"}
	}
	d := jsonDecoder{data: js, src: string(js)}
	v, err := d.value(0)
	if err != nil {
		return nil, err.jsonError()
	}
	if _, ok := d.peek(); ok {
		return nil, &JSONError{Pointer: "/", Msg: "invalid character " + d.quoteAt(d.pos) + " after the value"}
	}
	return v, nil
}

// jsonDecoder is the state of one DecodeJSON call. It is not shared.
type jsonDecoder struct {
	data    []byte
	src     string // string(data): strings without escapes and numbers are slices of it
	pos     int    // next byte of data to read
	elems   []any  // elements of the arrays being parsed, innermost last
	scratch []byte // unescaping buffer
}

// parseError is a refusal on its way out of the parser. path collects the
// pointer tokens innermost first as the error unwinds through the
// containers, so parsing builds no path unless it fails.
type parseError struct {
	msg  string
	path []string
}

func (e *parseError) at(token string) *parseError {
	e.path = append(e.path, token)
	return e
}

func (e *parseError) atIndex(i int) *parseError { return e.at(strconv.Itoa(i)) }

func (e *parseError) jsonError() *JSONError {
	slices.Reverse(e.path)
	return &JSONError{Pointer: pointer(e.path), Msg: e.msg}
}

func errorf(format string, a ...any) *parseError {
	return &parseError{msg: fmt.Sprintf(format, a...)}
}

func errEOF() *parseError { return &parseError{msg: "unexpected end of input"} }

// invalid refuses the character at d.pos, or reports the end of input.
func (d *jsonDecoder) invalid(context string) *parseError {
	if d.pos >= len(d.data) {
		return errEOF()
	}
	return &parseError{msg: "invalid character " + d.quoteAt(d.pos) + " " + context}
}

// quoteAt quotes the character starting at data[i] for an error message.
func (d *jsonDecoder) quoteAt(i int) string {
	r, _ := utf8.DecodeRune(d.data[i:])
	return strconv.QuoteRune(r)
}

// peek skips JSON whitespace and returns the next byte, if any.
func (d *jsonDecoder) peek() (byte, bool) {
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c, true
		}
	}
	return 0, false
}

// value parses the value at d.pos, depth containers deep.
func (d *jsonDecoder) value(depth int) (any, *parseError) {
	c, ok := d.peek()
	if !ok {
		return nil, errEOF()
	}
	switch c {
	case '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case '{', '[':
		if depth >= maxDepth {
			return nil, errorf("nesting deeper than %d", maxDepth)
		}
		d.pos++
		if c == '{' {
			return d.object(depth + 1)
		}
		return d.array(depth + 1)
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	}
	if c == '-' || c >= '0' && c <= '9' {
		n, err := d.number()
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, d.invalid("looking for beginning of value")
}

func (d *jsonDecoder) literal(lit string) *parseError {
	for i := 0; i < len(lit); i++ {
		if d.pos >= len(d.data) || d.data[d.pos] != lit[i] {
			return d.invalid(fmt.Sprintf("in literal %s (expecting %q)", lit, lit[i]))
		}
		d.pos++
	}
	return nil
}

// object parses the members after '{'. A failure in a key, or in the comma
// before it, is at the object; one in the colon or value is at the member.
func (d *jsonDecoder) object(depth int) (any, *parseError) {
	m := make(map[string]any)
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return nil, errEOF()
		}
		if c == '}' {
			d.pos++
			return m, nil
		}
		if n > 0 {
			if c != ',' {
				return nil, d.invalid("after object key:value pair")
			}
			d.pos++
			c, ok = d.peek()
		}
		if !ok || c != '"' {
			return nil, d.invalid("looking for beginning of object key string")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, errorf("duplicate object key %q", k)
		}
		if n >= maxElems {
			return nil, errorf("object has more than %d members", maxElems)
		}
		if c, ok := d.peek(); !ok || c != ':' {
			return nil, d.invalid("after object key").at(k)
		}
		d.pos++
		v, err := d.value(depth)
		if err != nil {
			return nil, err.at(k)
		}
		m[k] = v
	}
}

// array parses the elements after '['. A failure in an element, or in the
// comma before it, is at that element's index.
func (d *jsonDecoder) array(depth int) (any, *parseError) {
	if d.elems == nil {
		d.elems = make([]any, 0, 16)
	}
	base := len(d.elems)
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return nil, errEOF()
		}
		if c == ']' {
			d.pos++
			break
		}
		if c == '}' {
			if n == 0 {
				return nil, d.invalid("looking for beginning of value")
			}
			return nil, d.invalid("after array element")
		}
		if n >= maxElems {
			return nil, errorf("array has more than %d elements", maxElems)
		}
		if n > 0 {
			if c != ',' {
				return nil, d.invalid("after array element").atIndex(n)
			}
			d.pos++
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err.atIndex(n)
		}
		d.elems = append(d.elems, v)
	}
	a := make([]any, len(d.elems)-base)
	copy(a, d.elems[base:])
	clear(d.elems[base:])
	d.elems = d.elems[:base]
	return a, nil
}

// str parses the string literal at d.pos (a '"').
func (d *jsonDecoder) str() (string, *parseError) {
	s := d.data
	start := d.pos + 1
	for i := start; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			d.pos = i + 1
			return d.src[start:i], nil
		case c == '\\':
			return d.unescape(start, i)
		case c < 0x20:
			d.pos = i
			return "", d.invalid("in string literal")
		}
	}
	d.pos = len(s)
	return "", errEOF()
}

// unescape finishes a string literal whose content starts at start and
// has its first backslash at i. It decodes exactly as encoding/json's
// unquote: a \u escape of a UTF-16 surrogate combines with an immediately
// following \u escape into one rune when they form a pair; otherwise it
// becomes U+FFFD and the following escape, if any, is decoded on its own.
func (d *jsonDecoder) unescape(start, i int) (string, *parseError) {
	s := d.data
	buf := append(d.scratch[:0], s[start:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.scratch = buf
			return string(buf), nil
		case c < 0x20:
			d.pos = i
			return "", d.invalid("in string literal")
		case c != '\\':
			j := i + 1
			for j < len(s) && s[j] != '"' && s[j] != '\\' && s[j] >= 0x20 {
				j++
			}
			buf = append(buf, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return "", errEOF()
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, bad := hex4(s, i+2)
			if bad >= 0 {
				d.pos = bad
				return "", d.invalid(`in \u hexadecimal character escape`)
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if x, bad := hex4(s, i+2); bad < 0 {
						r2 = x
					}
				}
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					r = pair
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			d.pos = i + 1
			return "", d.invalid("in string escape code")
		}
		i += 2
	}
	d.pos = len(s)
	return "", errEOF()
}

// hex4 decodes the four hex digits at s[i:]. bad is the index of the
// first byte that is not a hex digit (len(s) if s ends first), or -1.
func hex4(s []byte, i int) (r rune, bad int) {
	for j := i; j < i+4; j++ {
		if j >= len(s) {
			return 0, len(s)
		}
		c := s[j]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, j
		}
		r = r<<4 | rune(c)
	}
	return r, -1
}

// number parses the number literal at d.pos (a '-' or a digit) by the JSON
// grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and applies
// checkNumber's limits.
func (d *jsonDecoder) number() (json.Number, *parseError) {
	s := d.data
	start := d.pos
	i := start
	if s[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		d.pos = i
		return "", d.invalid("in numeric literal")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			d.pos = i
			return "", d.invalid("after decimal point in numeric literal")
		}
		fracStart = i
		i = skipDigits(s, i)
		fracEnd = i
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			d.pos = i
			return "", d.invalid("in exponent of numeric literal")
		}
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if exp < 1e6 { // as parseDecimal: far out of range already
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	d.pos = i
	n := json.Number(d.src[start:i])
	if !numberSurelyFits(s[intStart:intEnd], s[fracStart:fracEnd], exp, i-start) {
		if err := checkNumber(n); err != nil {
			return "", errorf("%v", err)
		}
	}
	return n, nil
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// numberSurelyFits reports, without allocating, that checkNumber accepts a
// well-formed literal of length n with these integer and fraction digits
// and decimal exponent: it is zero, or no longer than maxNumberLen with its
// leading digit at a power of ten in [minExp10, maxExp10-1], where
// float64 neither overflows nor rounds to zero. False means "ask
// checkNumber", which decides the rest (including 10^308 <= |x| < 10^309).
func numberSurelyFits(intPart, frac []byte, exp, n int) bool {
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
