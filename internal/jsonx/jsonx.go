package jsonx

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Options bound and adjust one Parse. The zero value has no limits and keeps
// number literals as written.
type Options struct {
	// MaxDepth refuses arrays and objects nested deeper than this (the
	// root container is level 1). 0 means no limit.
	MaxDepth int
	// MaxElems refuses arrays with more elements and objects with more
	// members than this. 0 means no limit.
	MaxElems int
	// Number, if set, is called with every number literal (already checked
	// against the JSON grammar) and returns the json.Number to keep, or an
	// error that refuses the input at the literal (Error.Kind Number,
	// Error.Err the error).
	Number func(Number) (json.Number, error)
	// CollectDuplicates: a duplicate object key does not stop the parse.
	// The first member's value is kept and Parse returns every duplicate.
	CollectDuplicates bool
}

// Number is a number literal as the grammar took it apart:
// Lit = -?Int(.Frac)?([eE][+-]?digits)? with Exp the decimal exponent as
// written (clamped far beyond any float64: ±1e6).
type Number struct {
	Lit, Int, Frac string
	Exp            int
}

// Dup is an object key that appeared more than once: Key in the object at
// Path (its pointer tokens, root first).
type Dup struct {
	Path []string
	Key  string
}

// Kind says what class of problem an Error is.
type Kind uint8

const (
	Syntax        Kind = iota // not JSON; Msg in encoding/json's words
	EOF                       // the input ends inside the value
	NotUTF8                   // the input is not valid UTF-8 (Offset: first bad byte)
	Trailing                  // something follows the value
	Duplicate                 // a duplicate object key (without CollectDuplicates)
	Limit                     // beyond MaxDepth or MaxElems
	BadNumber                 // Options.Number refused a literal; Err is its error
	LoneSurrogate             // a \u escape of a UTF-16 surrogate that is not half of a pair
)

// Error is a refusal: what (Msg, Kind), where (Offset into the input, Path
// the pointer tokens of the member being parsed, root first).
type Error struct {
	Kind   Kind
	Offset int
	Path   []string
	Msg    string
	Err    error // Options.Number's error, for BadNumber
}

func (e *Error) Error() string { return fmt.Sprintf("json: at byte %d: %s", e.Offset, e.Msg) }
func (e *Error) Unwrap() error { return e.Err }

// LineColumn gives the 1-based line and column (in bytes) of offset in data.
func LineColumn(data []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(data))
	line, col = 1, 1
	for _, c := range data[:offset] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// Parse reads data as one JSON value under o. Errors are *Error. dups is
// nil unless o.CollectDuplicates.
func Parse(data []byte, o Options) (v any, dups []Dup, err error) {
	if !utf8.Valid(data) {
		return nil, nil, &Error{Kind: NotUTF8, Offset: firstInvalidUTF8(data), Msg: "input is not valid UTF-8"}
	}
	d := decoder{data: data, src: string(data), maxDepth: o.MaxDepth, maxElems: o.MaxElems,
		number: o.Number, collect: o.CollectDuplicates}
	if d.maxDepth <= 0 {
		d.maxDepth = math.MaxInt
	}
	if d.maxElems <= 0 {
		d.maxElems = math.MaxInt
	}
	v, perr := d.value(0)
	if perr != nil {
		return nil, nil, perr.finish()
	}
	if _, ok := d.peek(); ok {
		return nil, nil, &Error{Kind: Trailing, Offset: d.pos, Msg: "invalid character " + d.quoteAt(d.pos) + " after the value"}
	}
	for _, dp := range d.dups {
		slices.Reverse(dp.Path)
		dups = append(dups, dp)
	}
	return v, dups, nil
}

func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// decoder is the state of one Parse. It is not shared.
type decoder struct {
	data     []byte
	src      string // string(data): strings without escapes and numbers are slices of it
	pos      int    // next byte of data to read
	elems    []any  // elements of the arrays being parsed, innermost last
	scratch  []byte // unescaping buffer
	maxDepth int
	maxElems int
	number   func(Number) (json.Number, error)
	collect  bool
	dups     []Dup // Path innermost first until Parse returns
}

// parseError is a refusal on its way out of the parser. Its path collects
// the pointer tokens innermost first as the error unwinds through the
// containers, so parsing builds no path unless it fails.
type parseError struct {
	Error
}

func (e *parseError) at(token string) *parseError {
	e.Path = append(e.Path, token)
	return e
}

func (e *parseError) atIndex(i int) *parseError { return e.at(strconv.Itoa(i)) }

func (e *parseError) finish() *Error {
	slices.Reverse(e.Path)
	return &e.Error
}

func (d *decoder) fail(kind Kind, off int, format string, a ...any) *parseError {
	return &parseError{Error{Kind: kind, Offset: off, Msg: fmt.Sprintf(format, a...)}}
}

func (d *decoder) errEOF() *parseError {
	return &parseError{Error{Kind: EOF, Offset: len(d.data), Msg: "unexpected end of input"}}
}

// invalid refuses the character at d.pos, or reports the end of input.
func (d *decoder) invalid(context string) *parseError {
	if d.pos >= len(d.data) {
		return d.errEOF()
	}
	return &parseError{Error{Kind: Syntax, Offset: d.pos, Msg: "invalid character " + d.quoteAt(d.pos) + " " + context}}
}

// quoteAt quotes the character starting at data[i] for an error message.
func (d *decoder) quoteAt(i int) string {
	r, _ := utf8.DecodeRune(d.data[i:])
	return strconv.QuoteRune(r)
}

// peek skips JSON whitespace and returns the next byte, if any.
func (d *decoder) peek() (byte, bool) {
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
func (d *decoder) value(depth int) (any, *parseError) {
	c, ok := d.peek()
	if !ok {
		return nil, d.errEOF()
	}
	switch c {
	case '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case '{', '[':
		if depth >= d.maxDepth {
			return nil, d.fail(Limit, d.pos, "nesting deeper than %d", d.maxDepth)
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
		n, err := d.num()
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, d.invalid("looking for beginning of value")
}

func (d *decoder) literal(lit string) *parseError {
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
func (d *decoder) object(depth int) (any, *parseError) {
	m := make(map[string]any)
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return nil, d.errEOF()
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
		keyAt := d.pos
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		_, dup := m[k]
		if dup && !d.collect {
			return nil, d.fail(Duplicate, keyAt, "duplicate object key %q", k)
		}
		if n >= d.maxElems {
			return nil, d.fail(Limit, keyAt, "object has more than %d members", d.maxElems)
		}
		if c, ok := d.peek(); !ok || c != ':' {
			return nil, d.invalid("after object key").at(k)
		}
		d.pos++
		mark := len(d.dups)
		v, err := d.value(depth)
		if err != nil {
			return nil, err.at(k)
		}
		for i := mark; i < len(d.dups); i++ {
			d.dups[i].Path = append(d.dups[i].Path, k)
		}
		if dup { // only when collecting: keep the first value
			d.dups = append(d.dups, Dup{Key: k})
			continue
		}
		m[k] = v
	}
}

// array parses the elements after '['. A failure in an element, or in the
// comma before it, is at that element's index.
func (d *decoder) array(depth int) (any, *parseError) {
	if d.elems == nil {
		d.elems = make([]any, 0, 16)
	}
	base := len(d.elems)
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return nil, d.errEOF()
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
		if n >= d.maxElems {
			return nil, d.fail(Limit, d.pos, "array has more than %d elements", d.maxElems)
		}
		if n > 0 {
			if c != ',' {
				return nil, d.invalid("after array element").atIndex(n)
			}
			d.pos++
		}
		mark := len(d.dups)
		v, err := d.value(depth)
		if err != nil {
			return nil, err.atIndex(n)
		}
		for i := mark; i < len(d.dups); i++ {
			d.dups[i].Path = append(d.dups[i].Path, strconv.Itoa(n))
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
func (d *decoder) str() (string, *parseError) {
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
	return "", d.errEOF()
}

// unescape finishes a string literal whose content starts at start and
// has its first backslash at i. It decodes exactly as encoding/json's
// unquote: a \u escape of a UTF-16 surrogate combines with an immediately
// following \u escape into one rune when they form a pair; otherwise it
// becomes U+FFFD and the following escape, if any, is decoded on its own.
func (d *decoder) unescape(start, i int) (string, *parseError) {
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
			return "", d.errEOF()
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
				pair := utf16.DecodeRune(r, lowSurrogateAt(s, i))
				if pair == utf8.RuneError {
					return "", d.loneSurrogate(i-6, r)
				}
				r = pair
				i += 6
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
	return "", d.errEOF()
}

// lowSurrogateAt is the rune of the \u escape at s[i:], if one is there
// and well formed, else -1: what a high surrogate escape just before i
// pairs with.
func lowSurrogateAt(s []byte, i int) rune {
	if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
		if x, bad := hex4(s, i+2); bad < 0 {
			return x
		}
	}
	return -1
}

// loneSurrogate refuses the \u escape at offset at, of surrogate r, which
// is not the first half of a pair followed by its second. encoding/json
// reads it as U+FFFD, so "\ud800" and "\ufffd" would be one string (one
// cell key, one hash) though the texts differ: a lone surrogate is no
// character, and no JSON text needs one.
func (d *decoder) loneSurrogate(at int, r rune) *parseError {
	return d.fail(LoneSurrogate, at, `lone UTF-16 surrogate \u%04x in string escape (a surrogate escape must be a pair: \ud800-\udbff followed by \udc00-\udfff)`, r)
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

// num parses the number literal at d.pos (a '-' or a digit) and hands it
// to Options.Number, if set.
func (d *decoder) num() (json.Number, *parseError) {
	start := d.pos
	n, err := d.scanNum()
	if err != nil {
		return "", err
	}
	if d.number == nil {
		return json.Number(d.src[start:d.pos]), nil
	}
	v, nerr := d.number(Number{Lit: d.src[start:d.pos], Int: d.src[n.intStart:n.intEnd], Frac: d.src[n.fracStart:n.fracEnd], Exp: n.exp})
	if nerr != nil {
		return "", &parseError{Error{Kind: BadNumber, Offset: start, Msg: nerr.Error(), Err: nerr}}
	}
	return v, nil
}

// numSpan is where the parts of a number literal are in the input.
type numSpan struct {
	intStart, intEnd, fracStart, fracEnd int
	exp                                  int
}

// scanNum reads the number literal at d.pos (a '-' or a digit) by the JSON
// grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and leaves d.pos
// after it.
func (d *decoder) scanNum() (numSpan, *parseError) {
	s := d.data
	i := d.pos
	if s[i] == '-' {
		i++
	}
	var n numSpan
	n.intStart = i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		d.pos = i
		return n, d.invalid("in numeric literal")
	}
	n.intEnd = i
	n.fracStart, n.fracEnd = i, i
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			d.pos = i
			return n, d.invalid("after decimal point in numeric literal")
		}
		n.fracStart = i
		i = skipDigits(s, i)
		n.fracEnd = i
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			d.pos = i
			return n, d.invalid("in exponent of numeric literal")
		}
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if n.exp < 1e6 { // far beyond any float64 already
				n.exp = n.exp*10 + int(s[i]-'0')
			}
		}
		if neg {
			n.exp = -n.exp
		}
	}
	d.pos = i
	return n, nil
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
