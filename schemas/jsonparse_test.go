package schemas_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// decodeJSONCases are inputs where a hand-written JSON parser is easy to get
// wrong. DecodeJSON must treat each exactly as the encoding/json token walk
// it replaced (DecodeJSONReference) does. They also seed
// FuzzDecodeJSONDifferential.
var decodeJSONCases = []string{
	// Values and structure.
	`null`, `true`, `false`, `0`, `""`, `{}`, `[]`, `[[]]`, `{"a":{}}`, `[{}]`, `[null,true,false]`,
	`{"a":1,"b":[1,"x",{"c":null}],"d":{"e":[]}}`, `{"a/b":{"c~d":[1,x]}}`, `{"a/b":{"c~d":[1,{"e":01}]}}`,
	``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `[,]`, `{,}`, `{,"a":1}`, `{"a"}`, `{"a":}`, `{"a" 1}`,
	`{"a"::1}`, `{"a":1:2}`, `{1:2}`, `{null:1}`, `{"a":1,}`, `{"a":1,,"b":2}`, `{"a":1 "b":2}`, `[1 2]`,
	`[1:2]`, `[1}`, `[}`, `{]`, `{"a":1]`, `[[]]]`, `{}{}`, `[] []`, `[]x`, `1 2`, `"a" "b"`, `{"a":1}}`,
	`[1,2`, `[1,`, `[1`, `{"a":1`, `{"a":1,`, `{"a":`, `{"a"`, `{"`, `["a`, `[0,[1,[2,[3,x]]]]`,
	`{"x":[{"a":1,"a":1}]}`, `{"a":[1,2,{"b":[tru]}]}`,
	// Literals.
	`tru`, `nul`, `f`, `True`, `NULL`, `truex`, `nulll`, `[truefalse]`, `[true,false,null]`, `{"a":nan}`,
	`Infinity`, `-Infinity`, `NaN`, `undefined`, `'a'`,
	// Whitespace and what is not whitespace.
	" \t\n\r1 \t\n\r", "\f1", "\v1", "\u00a01", "\xef\xbb\xbf{}", "1\x00", "\x001", "[1\x00]", " [ 1 , 2 ] ",
	"{ \"a\" : 1 , \"b\" : [ ] }", "\u20281", "1\u2028", "{\"a\":1}\n\n",
	// UTF-8.
	"\"\xff\"", "\xc0\x80", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"",
	"\"é😀\u2028\u2029\ufeff\"", "{\"é\":\"😀\"}", "\"\x7f\"",
	// Strings: escapes.
	`"\"\\\/\b\f\n\r\t"`, `"a\u0000b"`, `"\u0000"`, `"\u001f"`, `"\u00e9"`, `"\u00E9"`, `"\uFFFF"`, `"\ufffd"`,
	`"\u0041\u0042"`, `"x\ny\\z\""`, `"\x"`, `"\'"`, `"\U0041"`, `"\u12"`, `"\u12G4"`, `"\u"`, `"\`, `"\"`,
	`"abc`, `"\u004`, `"\a"`, `"\0"`, `"\/\/"`, `"\\u0041"`,
	// Strings: surrogates.
	`"\uD83D\uDE00"`, `"\ud83d\ude00"`, `"\uDBFF\uDFFF"`, `"\uD800\uDC00"`, `"\ud800"`, `"\ud800\u0041"`,
	`"\udc00"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`, `"\ud800\\udc00"`, `"\ud800x"`, `"\ud800\n"`,
	`"\ud800\udbff"`, `"\udfff\udfff"`, `"\ud800\u"`, `"\ud800\u12"`, `"\ud800\uZZZZ"`, `"\ud800\udc0"`,
	`"a\ud800"`, `"\ud800\udc00\udc00"`, `"\ud7ff\udc00"`, `"\ue000"`, `"\ud800\ue000"`,
	// Strings: raw control characters.
	"\"\x00\"", "\"\x01\"", "\"\x1f\"", "\"a\tb\"", "\"a\nb\"", "\"\r\"", "{\"\x00\":1}", "[\"\x1f\"]",
	// Duplicate keys, also after unescaping.
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"":1,"":2}`, `{"a":{"a":1},"b":{"a":1}}`,
	`{"\ud800":1,"\udc00":2}`, `{"\ud800":1,"\ufffd":2}`, `{"\ud83d\ude00":1,"😀":2}`, `{"a\/b":1,"a/b":2}`,
	`{"a":1,"b":2,"a":x}`, `{"a":1,"a":2,"b":x}`, `{"x":{"y":[{"z":1,"z":2}]}}`, `{"A":1,"a":2}`,
	// Numbers: grammar.
	`-0`, `-0.0`, `0.0e+0`, `0e0`, `0E-0`, `2e-0`, `1E5`, `1e+5`, `1.5e-3`, `-1.25E+2`, `123456789`,
	`01`, `00`, `-01`, `+1`, `.5`, `1.`, `-`, `--1`, `-a`, `1e`, `1e+`, `1E-`, `1.5e`, `1.e5`, `1.0e+`,
	`0x1`, `1_000`, `1,5`, `[1.]`, `[-]`, `[01]`, `{"a":01}`, `[1-2]`, `1e5e5`, `1.2.3`, `-.5`, `0.`,
	`[1.5e,2]`, `-0e-0`, `1E+0001`, `0.000001`, `100000000000000000000`, `-9223372036854775808`,
	`9223372036854775807`, `18446744073709551615`, `18446744073709551616`, `-18446744073709551616`,
	`-18446744073709551617`, `123456789012345678`, `1234567890123456789`, `-123456789012345678`,
	// Numbers: limits.
	`1e308`, `-1e308`, `1.7976931348623157e308`, `1.7976931348623158e308`, `1.7976931348623159e308`,
	`1.8e308`, `17976931348623157e292`, `1e309`, `0.1e309`, `10e307`, `99e307`, `9.99e307`, `0.01e310`,
	`1e-320`, `1e-321`, `0.0001e-316`, `0.00001e-316`, `4.9e-324`, `1e-400`, `1e400`, `-1e400`,
	`0e999999999999`, `0.000e-999999`, `1e999999999999`, `1e-999999999999`, `{"n":1e999999999999}`,
	`1e00000000000000000000000000000000308`, `1e00000000000000000000000000000000309`,
	"1" + strings.Repeat("0", 299), "1" + strings.Repeat("0", 308), "1" + strings.Repeat("0", 309),
	"0." + strings.Repeat("0", 319) + "1", "0." + strings.Repeat("0", 320) + "1",
	"0." + strings.Repeat("0", 397) + "1", "0." + strings.Repeat("0", 398) + "1",
	"1." + strings.Repeat("0", 398), "1." + strings.Repeat("0", 399), "-1." + strings.Repeat("0", 398),
	"0." + strings.Repeat("0", 398), "0." + strings.Repeat("0", 399), "1" + strings.Repeat("0", 399) + "e-300",
	"9" + strings.Repeat("9", 400) + "e-100", "0." + strings.Repeat("0", 10) + "e310",
	// Nesting at and beyond the limit.
	nest("[", "]", 64, "1"), nest("[", "]", 65, "1"), nest("[", "]", 64, ""), nest("[", "]", 65, ""),
	nest(`{"a":`, "}", 64, "1"), nest(`{"a":`, "}", 65, "1"), nest(`{"a":[`, "]}", 32, "1"),
	nest(`{"a":[`, "]}", 33, "1"), nest(`[{"a":`, "}]", 32, "[]"), nest("[", "]", 63, "{}"),
	nest("[", "]", 64, "{}"), nest("[", "]", 1000, ""), nest("[", "", 64, ""), nest("[", "", 65, ""),
	nest(`{"a":`, "", 64, ""), nest(`{"a":`, "}", 64, "x"),
}

// nest wraps inner in n levels of open ... close.
func nest(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// checkSameAsReference fails t unless DecodeJSON and DecodeJSONReference
// both accept js with deeply equal values, or both refuse it with a
// *JSONError at the same pointer.
func checkSameAsReference(t *testing.T, js []byte) {
	t.Helper()
	got, err := schemas.DecodeJSON(js)
	want, werr := schemas.DecodeJSONReference(js)
	switch {
	case err == nil && werr == nil:
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeJSON(%q) = %#v, reference %#v", js, got, want)
		}
		return
	case err == nil:
		t.Fatalf("DecodeJSON(%q) = %#v, reference refuses: %v", js, got, werr)
	case werr == nil:
		t.Fatalf("DecodeJSON(%q): %v, reference accepts %#v", js, err, want)
	}
	var je, wje *schemas.JSONError
	if !errors.As(err, &je) || !errors.Is(err, schemas.ErrBadJSON) {
		t.Fatalf("DecodeJSON(%q): %v is not a *JSONError matching ErrBadJSON", js, err)
	}
	if !strings.HasPrefix(je.Pointer, "/") || je.Msg == "" {
		t.Fatalf("DecodeJSON(%q): error %q has no pointer or no message", js, err)
	}
	if !errors.As(werr, &wje) || je.Pointer != wje.Pointer {
		t.Fatalf("DecodeJSON(%q): %v; reference: %v", js, err, werr)
	}
}

func TestDecodeJSONMatchesReference(t *testing.T) {
	for i, js := range decodeJSONCases {
		name := js
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		t.Run(fmt.Sprintf("%d_%q", i, name), func(t *testing.T) {
			checkSameAsReference(t, []byte(js))
		})
	}
}

// TestDecodeJSONErrors pins where and why DecodeJSON refuses: the pointer of
// the member being parsed, and a message that says what is wrong.
func TestDecodeJSONErrors(t *testing.T) {
	cases := []struct{ js, ptr, msg string }{
		{``, "/", "unexpected end of input"},
		{`{"a":[1,`, "/a/1", "unexpected end of input"},
		{`{"a":[1`, "/a", "unexpected end of input"},
		{`x`, "/", "invalid character 'x' looking for beginning of value"},
		{`[1,x]`, "/1", "invalid character 'x' looking for beginning of value"},
		{`[1 2]`, "/1", "invalid character '2' after array element"},
		{`{"a":1 "b":2}`, "/", `invalid character '"' after object key:value pair`},
		{`{"a" 1}`, "/a", "invalid character '1' after object key"},
		{`{1:2}`, "/", "invalid character '1' looking for beginning of object key string"},
		{`{"a/b":{"c~d":[tru]}}`, "/a~1b/c~0d/0", "invalid character ']' in literal true (expecting 'e')"},
		{`{"a":1,"\u0061":2}`, "/", `duplicate object key "a"`},
		{`{"x":[{"a":1,"a":1}]}`, "/x/0", `duplicate object key "a"`},
		{"\"a\x01\"", "/", `invalid character '\x01' in string literal`},
		{`"\x"`, "/", "invalid character 'x' in string escape code"},
		{`"\u12G4"`, "/", `invalid character 'G' in \u hexadecimal character escape`},
		{`01`, "/", "trailing data after the JSON value (at byte 1)"},
		{`1.`, "/", "unexpected end of input"},
		{`[1.]`, "/0", "invalid character ']' after decimal point in numeric literal"},
		{`[1e]`, "/0", "invalid character ']' in exponent of numeric literal"},
		{`[-]`, "/0", "invalid character ']' in numeric literal"},
		{`{"n":[1e400]}`, "/n/0", "number 1e400 is out of range"},
		{"1" + strings.Repeat("0", 400), "/", "number literal longer than 400 characters"},
		{"\xef\xbb\xbf1", "/", "invalid character '\\ufeff' looking for beginning of value"},
		{"\"\xff\"", "/", "input is not valid UTF-8"},
		{nest("[", "]", 65, ""), strings.Repeat("/0", 64), "nesting deeper than 64"},
		{`{} x`, "/", "trailing data after the JSON value (at byte 3)"},
		{`{"a":["\ud800"]}`, "/a/0", `lone UTF-16 surrogate \ud800 in string escape (a surrogate escape must be a pair: \ud800-\udbff followed by \udc00-\udfff)`},
	}
	for _, c := range cases {
		_, err := schemas.DecodeJSON([]byte(c.js))
		var je *schemas.JSONError
		if !errors.As(err, &je) || je.Pointer != c.ptr || je.Msg != c.msg {
			t.Errorf("DecodeJSON(%q) = %v, want error at %s: %s", c.js, err, c.ptr, c.msg)
		}
	}
}

// TestDecodeJSONElemLimit: containers of exactly maxElems (2^20) members are
// accepted and one more is refused. Arrays are also checked against the
// reference; objects of a million members would take it seconds.
func TestDecodeJSONElemLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds inputs of several megabytes")
	}
	const limit = 1 << 20
	array := func(n int) []byte { return []byte("[" + strings.Repeat("0,", n-1) + "0]") }
	object := func(n int) []byte {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%x":0`, i)
		}
		b.WriteByte('}')
		return []byte(b.String())
	}
	for _, c := range []struct {
		name      string
		js        []byte
		err       string // "" if accepted
		reference bool
	}{
		{"array at limit", array(limit), "", true},
		{"array beyond limit", array(limit + 1), "at /: array has more than 1048576 elements", true},
		{"object at limit", object(limit), "", false},
		{"object beyond limit", object(limit + 1), "at /: object has more than 1048576 members", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := schemas.DecodeJSON(c.js)
			if (err == nil) != (c.err == "") || err != nil && !strings.HasSuffix(err.Error(), c.err) {
				t.Fatalf("DecodeJSON: %v, want %q", err, c.err)
			}
			if c.reference {
				checkSameAsReference(t, c.js)
			}
		})
	}
}
