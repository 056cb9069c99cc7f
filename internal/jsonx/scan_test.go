package jsonx_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/internal/jsonx"
)

// skipAll reads data as one value with the Scanner: Skip, then End.
func skipAll(data []byte, o jsonx.Options) ([]byte, error) {
	sc := new(jsonx.Scanner)
	err := sc.Reset(data, o)
	if err != nil {
		return nil, err
	}
	raw, err := sc.Skip()
	if err != nil {
		return nil, err
	}
	return raw, sc.End()
}

// checkSkip holds Skip to Parse on data: Skip accepts exactly what Parse
// accepts when duplicates are collected (Skip leaves keys to whoever
// parses the span), returns the value's bytes without the whitespace
// around it, and refuses with Parse's kind, offset and message.
func checkSkip(t *testing.T, data []byte, o jsonx.Options) {
	t.Helper()
	o.CollectDuplicates = true
	raw, err := skipAll(data, o)
	_, _, perr := jsonx.Parse(data, o)
	switch {
	case err == nil && perr == nil:
		if want := strings.Trim(string(data), " \t\r\n"); string(raw) != want {
			t.Fatalf("%q: Skip gave %q, want %q", data, raw, want)
		}
	case err == nil || perr == nil:
		t.Fatalf("%q: Skip: %v, Parse: %v", data, err, perr)
	default:
		var a, b *jsonx.Error
		if !errors.As(err, &a) || !errors.As(perr, &b) {
			t.Fatalf("%q: errors %T, %T are not *jsonx.Error", data, err, perr)
		}
		if a.Kind != b.Kind || a.Offset != b.Offset || a.Msg != b.Msg {
			t.Fatalf("%q: Skip refused %v (kind %d), Parse %v (kind %d)", data, a, a.Kind, b, b.Kind)
		}
	}
}

func TestSkipAsParse(t *testing.T) {
	o := jsonx.Options{MaxDepth: 3, MaxElems: 3}
	for _, js := range []string{
		``, ` `, `1`, ` -0.5e+3 `, `"a\u00e9\n"`, `{"a":[1,{"b":null}],"a":2}`, `[true,false,null]`,
		`[1,2,3,4]`, `{"a":1,"b":2,"c":3,"d":4}`, `[[[[]]]]`, `[[[]]]`, `{"a":1,}`, `[1,]`, `[1 2]`,
		`{"a" 1}`, `{1:2}`, `"\x"`, `"\u12"`, `"\u12x4"`, "\"a\tb\"", `tru`, `nul`, `01`, `1.`, `1e`, `-`,
		`{"a":1}x`, `[}`, `[1}`, "\"\xff\"", `{"a":"b"`, `"abc`, `"\`,
		`"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\u12"`, `"\ud800\udc00\udc00"`,
		`{"\ud800":1}`, `["\ud800`, `"\ud800\ud800\udc00"`, `"\ud800\\"`,
	} {
		checkSkip(t, []byte(js), o)
	}
}

// TestScannerObject pins the walk Object and Array make and what they
// hand over: keys unescaped, values' bytes, their refusals of other types.
func TestScannerObject(t *testing.T) {
	data := []byte(` [ {"a\u0062":"x\ty\u00e9", "c" : [1, {"d":2}] }, null ] `)
	sc := new(jsonx.Scanner)
	err := sc.Reset(data, jsonx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = sc.Array("an array", func(i int) error {
		if null, err := sc.Null(); null || err != nil {
			got = append(got, "null")
			return err
		}
		return sc.Object("an object", func(key []byte, keyAt int) error {
			if string(key) == "ab" {
				s, err := sc.String("a string")
				got = append(got, string(key)+"="+s)
				return err
			}
			raw, err := sc.Skip()
			got = append(got, string(key)+"~"+string(raw))
			return err
		})
	})
	if err == nil {
		err = sc.End()
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := "ab=x\ty\u00e9|c~[1, {\"d\":2}]|null"; strings.Join(got, "|") != want {
		t.Fatalf("walked %q, want %q", strings.Join(got, "|"), want)
	}
	for _, c := range []struct {
		js, msg string
		read    func(*jsonx.Scanner) error
	}{
		{`5`, "json: at byte 0: value is not an object", func(sc *jsonx.Scanner) error {
			return sc.Object("an object", func([]byte, int) error { return nil })
		}},
		{` {"a":1}`, "json: at byte 1: value is not an array", func(sc *jsonx.Scanner) error {
			return sc.Array("an array", func(int) error { return nil })
		}},
		{`[1]`, "json: at byte 0: value is not a string", func(sc *jsonx.Scanner) error {
			_, err := sc.String("a string")
			return err
		}},
		{`[1x]`, "json: at byte 2: invalid character 'x' after array element", func(sc *jsonx.Scanner) error {
			_, err := sc.String("a string")
			return err
		}},
		{`nulx`, "json: at byte 3: invalid character 'x' in literal null (expecting 'l')", func(sc *jsonx.Scanner) error {
			_, err := sc.Null()
			return err
		}},
		{`{"a":1,"a":2}`, `json: at byte 7: duplicate object key "a"`, func(sc *jsonx.Scanner) error {
			seen := false
			return sc.Object("an object", func(key []byte, at int) error {
				if seen {
					return sc.Duplicate(string(key), at)
				}
				seen = true
				_, err := sc.Skip()
				return err
			})
		}},
		{`[{}]`, "json: at byte 1: nesting deeper than 1", func(sc *jsonx.Scanner) error {
			return sc.Array("an array", func(int) error {
				return sc.Object("an object", func([]byte, int) error { return nil })
			})
		}},
		{`[[1]]`, "json: at byte 1: nesting deeper than 1", func(sc *jsonx.Scanner) error {
			return sc.Array("an array", func(int) error { _, err := sc.Skip(); return err })
		}},
	} {
		sc := new(jsonx.Scanner)
		err := sc.Reset([]byte(c.js), jsonx.Options{MaxDepth: 1})
		if err == nil {
			err = c.read(sc)
		}
		if err == nil || err.Error() != c.msg {
			t.Errorf("%s: %v, want %s", c.js, err, c.msg)
		}
	}
}

func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9"}]}`, `[1,2,3,4]`, `"\ud800"`, `{"a":1,"a":2}`, `[[[[1]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSkip(t, data, jsonx.Options{MaxDepth: 3, MaxElems: 3})
		checkSkip(t, data, jsonx.Options{})
	})
}
