package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// DecodeJSONReference is the former DecodeJSON, a walk over encoding/json's
// Decoder.Token, kept for differential tests and benchmarks of DecodeJSON.
// It must accept and refuse exactly what DecodeJSON does, with the same values.
func DecodeJSONReference(js []byte) (any, error) {
	if !utf8.Valid(js) {
		return nil, &JSONError{Pointer: "/", Msg: "input is not valid UTF-8"}
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	p := refParser{dec: d, js: js}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if tok, err := d.Token(); err != io.EOF {
		if err != nil {
			return nil, &JSONError{Pointer: "/", Msg: "after the value: " + err.Error()}
		}
		return nil, &JSONError{Pointer: "/", Msg: fmt.Sprintf("unexpected %v after the value", tok)}
	}
	return v, nil
}

type refParser struct {
	dec  *json.Decoder
	js   []byte
	path []string
}

// token is dec.Token, refusing a string token that holds a lone surrogate
// escape.
func (p *refParser) token() (json.Token, error) {
	from := p.dec.InputOffset()
	tok, err := p.dec.Token()
	if _, isStr := tok.(string); err == nil && isStr && loneSurrogate(p.js[from:p.dec.InputOffset()]) {
		return nil, errors.New("lone UTF-16 surrogate in string escape")
	}
	return tok, err
}

func (p *refParser) fail(format string, a ...any) error {
	return &JSONError{Pointer: pointer(p.path), Msg: fmt.Sprintf(format, a...)}
}

func (p *refParser) value(depth int) (any, error) {
	tok, err := p.token()
	if err != nil {
		if err == io.EOF {
			return nil, p.fail("unexpected end of input")
		}
		return nil, p.fail("%v", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, p.fail("nesting deeper than %d", maxDepth)
		}
		if t == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case json.Number:
		if err := checkNumber(t); err != nil {
			return nil, p.fail("%v", err)
		}
		return t, nil
	default: // string, bool, nil
		return t, nil
	}
}

func (p *refParser) object(depth int) (any, error) {
	m := make(map[string]any)
	for p.dec.More() {
		tok, err := p.token()
		if err != nil {
			return nil, p.fail("%v", err)
		}
		k, ok := tok.(string)
		if !ok {
			return nil, p.fail("object key is not a string")
		}
		if _, dup := m[k]; dup {
			return nil, p.fail("duplicate object key %q", k)
		}
		if len(m) >= maxElems {
			return nil, p.fail("object has more than %d members", maxElems)
		}
		p.path = append(p.path, k)
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		m[k] = v
	}
	if _, err := p.dec.Token(); err != nil { // '}'
		return nil, p.fail("%v", err)
	}
	return m, nil
}

func (p *refParser) array(depth int) (any, error) {
	a := []any{}
	for p.dec.More() {
		if len(a) >= maxElems {
			return nil, p.fail("array has more than %d elements", maxElems)
		}
		p.path = append(p.path, strconv.Itoa(len(a)))
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		a = append(a, v)
	}
	if _, err := p.dec.Token(); err != nil { // ']'
		return nil, p.fail("%v", err)
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
