package jsonx

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Scanner reads one JSON text piece by piece without building it: the
// caller walks the containers it knows (Object, Array), reads the strings it
// keeps (String), and takes the raw bytes of the values it hands on (Skip).
// A request envelope is read this way so that its payload is parsed once,
// by whoever consumes it, and not also into an intermediate value.
//
// The grammar, the UTF-8 check, MaxDepth and MaxElems are Parse's, and a
// refusal is the same *Error (Offset set; Path left empty, since the caller
// knows where it is). Two things are the caller's: Skip checks a value's
// grammar but not duplicate keys inside it (the span is meant to be parsed
// again by a Parse, which does), and Object hands every key to the caller,
// which refuses duplicates of the keys it takes (Duplicate words the error)
// and keys it does not know. Options.Number and CollectDuplicates do not
// apply.
type Scanner struct {
	d     decoder
	depth int // containers open around d.pos
}

// Reset starts s over data under o (a Scanner declared as a variable and
// Reset costs no allocation). It refuses data that is not UTF-8 before
// anything is read.
func (s *Scanner) Reset(data []byte, o Options) error {
	if !utf8.Valid(data) {
		return &Error{Kind: NotUTF8, Offset: firstInvalidUTF8(data), Msg: "input is not valid UTF-8"}
	}
	*s = Scanner{d: decoder{data: data, maxDepth: o.MaxDepth, maxElems: o.MaxElems}}
	if s.d.maxDepth <= 0 {
		s.d.maxDepth = math.MaxInt
	}
	if s.d.maxElems <= 0 {
		s.d.maxElems = math.MaxInt
	}
	return nil
}

// Peek skips whitespace and returns the next byte; ok is false at the end.
func (s *Scanner) Peek() (c byte, ok bool) { return s.d.peek() }

// End refuses anything but whitespace after the value read.
func (s *Scanner) End() error {
	if _, ok := s.d.peek(); ok {
		return &Error{Kind: Trailing, Offset: s.d.pos, Msg: "invalid character " + s.d.quoteAt(s.d.pos) + " after the value"}
	}
	return nil
}

// Null reads a null literal if one is next and says whether it did.
func (s *Scanner) Null() (bool, error) {
	if c, ok := s.d.peek(); !ok || c != 'n' {
		return false, nil
	}
	if err := s.d.literal("null"); err != nil {
		return false, err.finish()
	}
	return true, nil
}

// String reads the string literal next and returns it unescaped as Parse
// would. Anything else is refused with want ("a string", say) in the
// message.
func (s *Scanner) String(want string) (string, error) {
	c, ok := s.d.peek()
	if !ok {
		return "", s.d.errEOF().finish()
	}
	if c != '"' {
		return "", s.notA(want)
	}
	start := s.d.pos + 1
	if err := s.d.skipStr(); err != nil {
		return "", err.finish()
	}
	raw := s.d.data[start : s.d.pos-1]
	for _, b := range raw {
		if b == '\\' {
			return s.d.unescapeAt(start)
		}
	}
	return string(raw), nil
}

// Skip checks the value next against the grammar, bounded by MaxDepth and
// MaxElems counted from the containers open around it, and returns its
// bytes (a slice of data, without the whitespace around it).
func (s *Scanner) Skip() ([]byte, error) {
	c, ok := s.d.peek()
	if !ok {
		return nil, s.d.errEOF().finish()
	}
	start := s.d.pos
	if err := s.d.skip(c, s.depth); err != nil {
		return nil, err.finish()
	}
	return s.d.data[start:s.d.pos], nil
}

// Object reads the object next, calling member with each key in order,
// when the scanner stands at the key's value: member must read exactly
// that value (String, Skip, Null, Object, Array) or return an error, which
// stops the walk and is returned. key is valid only during the call
// (compare it as string(key), which does not allocate); keyAt is the byte
// offset of the key, for Duplicate and the caller's own errors. Anything
// but an object is refused with want in the message.
func (s *Scanner) Object(want string, member func(key []byte, keyAt int) error) error {
	if err := s.open('{', want); err != nil {
		return err
	}
	defer func() { s.depth-- }()
	var callerErr error
	err := s.d.members(true, func(key []byte, keyAt int) *parseError {
		if callerErr = member(key, keyAt); callerErr != nil {
			return errStop
		}
		return nil
	})
	return s.result(err, callerErr)
}

// open steps into the object or array (by its opening byte) next, one
// level deeper; anything else is refused with want in the message, and a
// level past the depth limit too.
func (s *Scanner) open(opening byte, want string) error {
	c, ok := s.d.peek()
	if !ok {
		return s.d.errEOF().finish()
	}
	if c != opening {
		return s.notA(want)
	}
	if s.depth >= s.d.maxDepth {
		return s.d.fail(Limit, s.d.pos, "nesting deeper than %d", s.d.maxDepth).finish()
	}
	s.d.pos++
	s.depth++
	return nil
}

// Array reads the array next, calling elem with each element's index when
// the scanner stands at it; elem must read exactly that element or return
// an error, which stops the walk and is returned. Anything but an array is
// refused with want in the message.
func (s *Scanner) Array(want string, elem func(i int) error) error {
	if err := s.open('[', want); err != nil {
		return err
	}
	defer func() { s.depth-- }()
	var callerErr error
	err := s.d.elements(func(i int) *parseError {
		if callerErr = elem(i); callerErr != nil {
			return errStop
		}
		return nil
	})
	return s.result(err, callerErr)
}

// errStop ends a walk of members or elements when the caller's function
// refused; never finished or shown.
var errStop = &parseError{}

// result is a walk's outcome: the caller's own error if its function
// refused, else the grammar's, if any.
func (s *Scanner) result(err *parseError, callerErr error) error {
	switch {
	case callerErr != nil:
		return callerErr
	case err != nil:
		return err.finish()
	}
	return nil
}

// Duplicate is the refusal of a key the object already had, at keyAt.
func (s *Scanner) Duplicate(key string, keyAt int) error {
	return &Error{Kind: Duplicate, Offset: keyAt, Msg: "duplicate object key " + strconv.Quote(key)}
}

// notA refuses the value next, which is not what the caller wants: a
// value that is not JSON is refused in the grammar's words first.
func (s *Scanner) notA(want string) error {
	at := s.d.pos
	c, _ := s.d.peek()
	if err := s.d.skip(c, s.depth); err != nil {
		return err.finish()
	}
	return &Error{Kind: Syntax, Offset: at, Msg: "value is not " + want}
}

// key reads the object key at d.pos (a '"'): a slice of data, or a copy
// when it has escapes.
func (d *decoder) key() ([]byte, *parseError) {
	start := d.pos + 1
	if err := d.skipStr(); err != nil {
		return nil, err
	}
	raw := d.data[start : d.pos-1]
	for _, b := range raw {
		if b == '\\' {
			// A copy: d.scratch is reused by the reads of the member.
			k, err := d.unescape(start, start+indexBackslash(raw))
			if err != nil {
				return nil, err
			}
			return []byte(k), nil
		}
	}
	return raw, nil
}

// unescapeAt reads the string literal whose content starts at start and
// has escapes, which skipStr already checked.
func (d *decoder) unescapeAt(start int) (string, error) {
	v, err := d.unescape(start, start+indexBackslash(d.data[start:]))
	if err != nil {
		return "", err.finish()
	}
	return v, nil
}

func indexBackslash(b []byte) int {
	for i, c := range b {
		if c == '\\' {
			return i
		}
	}
	return len(b)
}

// skip checks the value at d.pos, whose first byte is c, depth containers
// deep, and leaves d.pos after it.
func (d *decoder) skip(c byte, depth int) *parseError {
	switch c {
	case '"':
		return d.skipStr()
	case '{', '[':
		if depth >= d.maxDepth {
			return d.fail(Limit, d.pos, "nesting deeper than %d", d.maxDepth)
		}
		d.pos++
		if c == '{' {
			return d.skipObject(depth + 1)
		}
		return d.skipArray(depth + 1)
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	if c == '-' || c >= '0' && c <= '9' {
		_, err := d.scanNum()
		return err
	}
	return d.invalid("looking for beginning of value")
}

func (d *decoder) skipObject(depth int) *parseError {
	return d.members(false, func([]byte, int) *parseError { return d.skipNext(depth) })
}

func (d *decoder) skipArray(depth int) *parseError {
	return d.elements(func(int) *parseError { return d.skipNext(depth) })
}

// skipNext skips the value next, depth containers deep.
func (d *decoder) skipNext(depth int) *parseError {
	c, ok := d.peek()
	if !ok {
		return d.errEOF()
	}
	return d.skip(c, depth)
}

// members walks the members of the object whose '{' was just read, to its
// '}', calling member at each member's value (which member must read);
// with keys the member gets the key (a slice of data, or a copy when it
// has escapes), without them nil and the key is only checked. keyAt is
// the key's offset.
func (d *decoder) members(keys bool, member func(key []byte, keyAt int) *parseError) *parseError {
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return d.errEOF()
		}
		if c == '}' {
			d.pos++
			return nil
		}
		if n > 0 {
			if c != ',' {
				return d.invalid("after object key:value pair")
			}
			d.pos++
			c, ok = d.peek()
		}
		if !ok || c != '"' {
			return d.invalid("looking for beginning of object key string")
		}
		keyAt := d.pos
		var key []byte
		var err *parseError
		if keys {
			key, err = d.key()
		} else {
			err = d.skipStr()
		}
		if err != nil {
			return err
		}
		if n >= d.maxElems {
			return d.fail(Limit, keyAt, "object has more than %d members", d.maxElems)
		}
		if c, ok := d.peek(); !ok || c != ':' {
			return d.invalid("after object key")
		}
		d.pos++
		if err := member(key, keyAt); err != nil {
			return err
		}
	}
}

// elements walks the elements of the array whose '[' was just read, to
// its ']', calling elem with each index where the element starts (which
// elem must read).
func (d *decoder) elements(elem func(i int) *parseError) *parseError {
	for n := 0; ; n++ {
		c, ok := d.peek()
		if !ok {
			return d.errEOF()
		}
		if c == ']' {
			d.pos++
			return nil
		}
		if c == '}' {
			if n == 0 {
				return d.invalid("looking for beginning of value")
			}
			return d.invalid("after array element")
		}
		if n >= d.maxElems {
			return d.fail(Limit, d.pos, "array has more than %d elements", d.maxElems)
		}
		if n > 0 {
			if c != ',' {
				return d.invalid("after array element")
			}
			d.pos++
		}
		if err := elem(n); err != nil {
			return err
		}
	}
}

// skipStr checks the string literal at d.pos (a '"') as str would read it,
// without unescaping, and leaves d.pos after its closing quote.
func (d *decoder) skipStr() *parseError {
	s := d.data
	for i := d.pos + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			d.pos = i + 1
			return nil
		case c < 0x20:
			d.pos = i
			return d.invalid("in string literal")
		case c == '\\':
			if i+1 >= len(s) {
				d.pos = len(s)
				return d.errEOF()
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				r, bad := hex4(s, i+2)
				if bad >= 0 {
					if bad >= len(s) {
						d.pos = len(s)
						return d.errEOF()
					}
					d.pos = bad
					return d.invalid(`in \u hexadecimal character escape`)
				}
				if utf16.IsSurrogate(r) {
					if utf16.DecodeRune(r, lowSurrogateAt(s, i+6)) == utf8.RuneError {
						return d.loneSurrogate(i, r)
					}
					i += 6 // the low half, checked
				}
				i += 5
			default:
				d.pos = i + 1
				return d.invalid("in string escape code")
			}
		}
	}
	d.pos = len(s)
	return d.errEOF()
}
