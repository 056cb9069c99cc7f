package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// parseJSONReference is the former parseJSON, a walk over encoding/json's
// Decoder.Token, kept as the oracle of the differential tests: parseJSON
// must accept and refuse exactly what it does, with the same values and
// duplicate keys.
func parseJSONReference(data []byte) (any, []dupKey, error) {
	if !utf8.Valid(data) {
		return nil, nil, errors.New("file is not valid UTF-8")
	}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, nil, errors.New("file starts with a byte order mark; save it as plain UTF-8")
	}
	p := &refParser{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	p.dec.UseNumber()
	v, err := p.value("", 0)
	if err != nil {
		return nil, nil, p.located(err)
	}
	if _, err := p.dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("unexpected data after the top-level value")
		}
		return nil, nil, p.located(err)
	}
	return v, p.dups, nil
}

type refParser struct {
	dec  *json.Decoder
	data []byte
	dups []dupKey
}

// token is dec.Token, refusing a string token that holds a lone surrogate
// escape.
func (p *refParser) token() (json.Token, error) {
	from := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if _, isStr := tok.(string); err == nil && isStr && loneSurrogate(p.data[from:p.dec.InputOffset()]) {
		return nil, errors.New("lone UTF-16 surrogate in string escape")
	}
	return tok, err
}

// located prefixes err with the line and column where the decoder stopped.
func (p *refParser) located(err error) error {
	off := p.dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	line, col := 1, 1
	for _, c := range p.data[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("unexpected end of file")
	}
	return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, err)
}

func (p *refParser) value(ptr string, depth int) (any, error) {
	tok, err := p.token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, fmt.Errorf("nested more than %d levels deep", maxDepth)
		}
		if t == '{' {
			return p.object(ptr, depth+1)
		}
		if t == '[' {
			return p.array(ptr, depth+1)
		}
		return nil, fmt.Errorf("unexpected %q", rune(t))
	case json.Number:
		n, err := normNumber(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", displayPtr(ptr), err)
		}
		return n, nil
	default: // string, bool, nil
		return t, nil
	}
}

func (p *refParser) object(ptr string, depth int) (any, error) {
	m := map[string]any{}
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key must be a string, found %v", tok)
		}
		v, err := p.value(ptrJoin(ptr, k), depth)
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			p.dups = append(p.dups, dupKey{ptr: ptr, key: k})
			continue // keep the first; the load fails anyway
		}
		m[k] = v
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return nil, err
	}
	return m, nil
}

func (p *refParser) array(ptr string, depth int) (any, error) {
	a := []any{}
	for p.dec.More() {
		v, err := p.value(ptrJoin(ptr, strconv.Itoa(len(a))), depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	if _, err := p.dec.Token(); err != nil { // ']'
		return nil, err
	}
	return a, nil
}

// loneSurrogate reports whether raw, the bytes of one token (and the
// separators before it), holds a \u escape of a UTF-16 surrogate that is
// not a high one followed at once by a low one: encoding/json reads it as
// U+FFFD, the strict parser refuses it.
func loneSurrogate(raw []byte) bool {
	hex := func(i int) rune {
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // the escaped character
			continue
		}
		r := hex(i)
		if r >= 0xd800 && r <= 0xdbff {
			if lo := hex(i + 6); lo >= 0xdc00 && lo <= 0xdfff {
				i += 11
				continue
			}
			return true
		}
		if r >= 0xdc00 && r <= 0xdfff {
			return true
		}
		i += 5
	}
	return false
}
