package jsonx_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/internal/jsonx"
)

// TestErrors pins each kind of refusal: its Kind, the byte offset where the
// problem is and the path of the member being parsed. (schemas' and
// manifest's differential tests hold messages and values to encoding/json.)
func TestErrors(t *testing.T) {
	errNeg := errors.New("negative")
	noNeg := func(n jsonx.Number) (json.Number, error) {
		if n.Lit[0] == '-' {
			return "", errNeg
		}
		return json.Number(n.Lit), nil
	}
	o := jsonx.Options{MaxDepth: 2, MaxElems: 2, Number: noNeg}
	for _, c := range []struct {
		js   string
		kind jsonx.Kind
		off  int
		path string
	}{
		{`{"a":[1,x]}`, jsonx.Syntax, 8, "a/1"},
		{`{"a":[1,`, jsonx.EOF, 8, "a/1"},
		{"[\"\xff\"]", jsonx.NotUTF8, 2, ""},
		{`[1] x`, jsonx.Trailing, 4, ""},
		{`{"b":1,"a":{"c":1,"c":2}}`, jsonx.Duplicate, 18, "a"},
		{`[[[]]]`, jsonx.Limit, 2, "0/0"},
		{`[1,2,3]`, jsonx.Limit, 4, ""},
		{`{"a":[1, -2]}`, jsonx.BadNumber, 9, "a/1"},
		{`{"a":["x\ud800"]}`, jsonx.LoneSurrogate, 8, "a/0"},
		{`{"a":"\udc00\ud800"}`, jsonx.LoneSurrogate, 6, "a"},
		{`["\ud800\u0041"]`, jsonx.LoneSurrogate, 2, "0"},
		{`{"\ud800":1}`, jsonx.LoneSurrogate, 2, ""},
	} {
		_, _, err := jsonx.Parse([]byte(c.js), o)
		var e *jsonx.Error
		if !errors.As(err, &e) || e.Kind != c.kind || e.Offset != c.off || strings.Join(e.Path, "/") != c.path {
			t.Errorf("Parse(%q) = %#v, want kind %d at byte %d, path %q", c.js, err, c.kind, c.off, c.path)
		}
		if c.kind == jsonx.BadNumber && !errors.Is(err, errNeg) {
			t.Errorf("Parse(%q) = %v, does not wrap the Number error", c.js, err)
		}
	}
}

// TestCollectDuplicates: every duplicate, nested ones inside a dropped value
// too, in the order the parse finishes them; the first value is kept.
func TestCollectDuplicates(t *testing.T) {
	js := `{"a":{"x":1,"x":2},"a":[{"y":1,"y":2}],"b":[0,{"c~/":1,"c~/":2}]}`
	v, dups, err := jsonx.Parse([]byte(js), jsonx.Options{CollectDuplicates: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []jsonx.Dup{{Path: []string{"a"}, Key: "x"}, {Path: []string{"a", "0"}, Key: "y"}, {Path: nil, Key: "a"},
		{Path: []string{"b", "1"}, Key: "c~/"}}
	if !reflect.DeepEqual(dups, want) {
		t.Errorf("dups = %q, want %q", dups, want)
	}
	if got := v.(map[string]any)["a"]; !reflect.DeepEqual(got, map[string]any{"x": json.Number("1")}) {
		t.Errorf(`"a" = %v, want the first value`, got)
	}
}

// TestZeroOptions: no limits, literals as written.
func TestZeroOptions(t *testing.T) {
	js := strings.Repeat("[", 100) + "1.50e0" + strings.Repeat("]", 100)
	v, _, err := jsonx.Parse([]byte(js), jsonx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		v = v.([]any)[0]
	}
	if v != json.Number("1.50e0") {
		t.Errorf("innermost value %#v, want the literal", v)
	}
}

func TestLineColumn(t *testing.T) {
	data := []byte("ab\ncd\n")
	for _, c := range []struct{ off, line, col int }{{0, 1, 1}, {2, 1, 3}, {3, 2, 1}, {6, 3, 1}, {99, 3, 1}, {-1, 1, 1}} {
		if l, col := jsonx.LineColumn(data, c.off); l != c.line || col != c.col {
			t.Errorf("LineColumn(%d) = %d:%d, want %d:%d", c.off, l, col, c.line, c.col)
		}
	}
}

// TestSurrogates: a surrogate pair escape is one character; a surrogate
// escape that is not half of a pair is refused, wherever it is (encoding/json
// would read it as U+FFFD, which "\ufffd" also is).
func TestSurrogates(t *testing.T) {
	for _, c := range []struct{ js, want string }{
		{`"\ud83d\ude00"`, "\U0001F600"},
		{`"\uDBFF\uDFFF"`, "\U0010FFFF"},
		{`"a\ud800\udc00b"`, "a\U00010000b"},
		{`"\ufffd"`, "\ufffd"},
		{`"\ud7ff\ue000"`, "\ud7ff\ue000"},
	} {
		v, _, err := jsonx.Parse([]byte(c.js), jsonx.Options{})
		if err != nil || v != c.want {
			t.Errorf("Parse(%s) = %q, %v, want %q", c.js, v, err, c.want)
		}
	}
	for _, js := range []string{`"\ud800"`, `"\udfff"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\ud800\ud800\udc00"`,
		`"\ud800\\udc00"`, `"\ud800x"`, `"\ud800\udbff"`, `"\ud800\u"`, `"\ud800\udc0"`, `"\ud83d\ude00\udc00"`} {
		_, _, err := jsonx.Parse([]byte(js), jsonx.Options{})
		var e *jsonx.Error
		if !errors.As(err, &e) || e.Kind != jsonx.LoneSurrogate || !strings.Contains(e.Msg, "lone UTF-16 surrogate") {
			t.Errorf("Parse(%s) = %v, want a lone surrogate refused", js, err)
		}
	}
}
