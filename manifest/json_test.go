package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// parseJSONCases are inputs where a strict JSON parser is easy to get wrong
// (schemas' decodeJSONCases cover the grammar and string escapes in depth;
// these are what the manifest path adds: collected duplicates, its depth
// limit, normalized numbers, byte order marks, positions). They also seed
// FuzzParseJSON.
var parseJSONCases = []string{
	``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{1:2}`, `{"a":1,}`,
	`{"a":1 "b":2}`, `[1 2]`, `[1}`, `{]`, `[[]]]`, `{}{}`, `[] []`, `[]x`, `1 2`, `"a" "b"`, `[1,2`, `{"a":`,
	`{"`, `["a`, `[0,[1,[2,[3,x]]]]`, "[\n  {\"a\": tru}\n]", "[\n  1,\n  2x\n]", "[1,\n  ", "{}\n\n  x",
	`tru`, `"\x"`, `"\u12G4"`, `-`, `01`, `1.`, `1e+`, "\"\x01\"", "\xef\xbb\xbf{}", "\xef\xbb\xbf\xff", "[\xff]",
	`"\ud800"`, `"\ud83d\ude00"`, `{"\u0061":1,"a":2}`,
	// Duplicates: all of them, nested ones inside a dropped value too, first value kept.
	`{"a":1,"a":2}`, `{"a":1,"a":2,"a":3}`, `[{"a":1,"a":2,"b":{"c":1,"c":[{"d":1,"d":2}]}}]`,
	`{"a":{"x":1,"x":2},"a":{"y":1,"y":2}}`, `{"a/b":{"~":1,"~":2}}`, `{"a":1,"a":x}`, `{"a":1,"a":2,}`,
	// Numbers: normalized spellings and float64 range.
	`[1, 1.0, 1e2, -0, -0.0, 0.5, 1.5e-3, 100000000000000000000, 18446744073709551615, -9223372036854775809]`,
	`[1e308, 1.7976931348623157e308, 1.7976931348623159e308, 1e309, -1e400, 1e-400, 4.9e-324, 0e99999999999]`,
	`{"a":[1,-1e999]}`, "[1" + strings.Repeat("0", 500) + "]", "[0." + strings.Repeat("0", 500) + "1]",
	// Depth: the root container is level 1.
	strings.Repeat("[", 60) + strings.Repeat("]", 60), strings.Repeat("[", 61) + strings.Repeat("]", 61),
	strings.Repeat(`{"a":`, 60) + "1" + strings.Repeat("}", 60), strings.Repeat(`{"a":`, 61) + "1" + strings.Repeat("}", 61),
}

// checkParseJSON fails t unless parseJSON decides data as the encoding/json
// token walk it replaced (parseJSONReference) does, with the same values and
// duplicates, and as encoding/json itself does apart from what the manifest
// bounds (depth, float64 range, UTF-8 also inside strings, no byte order mark,
// no lone surrogate escapes).
func checkParseJSON(t *testing.T, data []byte) {
	t.Helper()
	got, gotDups, err := parseJSON(data)
	want, wantDups, werr := parseJSONReference(data)
	switch {
	case err == nil && werr == nil:
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotDups, wantDups) {
			t.Fatalf("parseJSON(%q) = %#v %v, reference %#v %v", data, got, gotDups, want, wantDups)
		}
	case err == nil:
		t.Fatalf("parseJSON(%q) = %#v, reference refuses: %v", data, got, werr)
	case werr == nil:
		t.Fatalf("parseJSON(%q): %v, reference accepts %#v", data, err, want)
	default:
		const located = "invalid JSON at line "
		if strings.HasPrefix(err.Error(), located) != strings.HasPrefix(werr.Error(), located) ||
			!strings.HasPrefix(err.Error(), located) && err.Error() != werr.Error() {
			t.Fatalf("parseJSON(%q): %v; reference: %v", data, err, werr)
		}
	}
	if json.Valid(data) && utf8.Valid(data) {
		if err != nil && !strings.Contains(err.Error(), "is out of range") && !strings.Contains(err.Error(), "nesting deeper than") &&
			!strings.Contains(err.Error(), "lone UTF-16 surrogate") {
			t.Fatalf("parseJSON(%q): %v, but encoding/json accepts it", data, err)
		}
	} else if err == nil {
		t.Fatalf("parseJSON(%q) accepts what encoding/json refuses", data)
	}
}

func TestParseJSONMatchesReference(t *testing.T) {
	for _, data := range parseJSONCases {
		checkParseJSON(t, []byte(data))
	}
}

// TestParseJSONErrors pins the texts of refused files: the line and column
// are of the byte where the problem is (the offending character, the first
// byte of a refused number or of trailing data, the bracket too deep, the
// end of the file).
func TestParseJSONErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`[{"$kind": "defschema",]`, "invalid JSON at line 1, column 24: invalid character ']' looking for beginning of object key string"},
		{"[\n  {\"a\": tru}\n]", "invalid JSON at line 2, column 12: invalid character '}' in literal true (expecting 'e')"},
		{"{\n \"a\": [1, -1e999]\n}", "invalid JSON at line 2, column 11: /a/1: number -1e999 is out of range"},
		{"[1,\n  ", "invalid JSON at line 2, column 3: unexpected end of file"},
		{"{}\n\n  x", "invalid JSON at line 3, column 3: unexpected data after the top-level value"},
		{`"\x"`, `invalid JSON at line 1, column 3: invalid character 'x' in string escape code`},
		{"[[" + strings.Repeat("[", 59), "invalid JSON at line 1, column 61: nesting deeper than 60"},
		{"\xef\xbb\xbf{}", "file starts with a byte order mark; save it as plain UTF-8"},
		{"{\"a\":\"\xff\"}", "file is not valid UTF-8"},
		{"{\n \"key\": \"x\\ud800\"}", `invalid JSON at line 2, column 11: lone UTF-16 surrogate \ud800 in string escape (a surrogate escape must be a pair: \ud800-\udbff followed by \udc00-\udfff)`},
	} {
		_, _, err := parseJSON([]byte(c.data))
		if err == nil || err.Error() != c.want {
			t.Errorf("parseJSON(%q) = %v, want %s", c.data, err, c.want)
		}
	}
}

// FuzzParseJSON: parseJSON accepts exactly what encoding/json's token walk
// accepts within the manifest's bounds, refusing duplicates, with the same
// values.
func FuzzParseJSON(f *testing.F) {
	for _, data := range parseJSONCases {
		f.Add([]byte(data))
	}
	AddManifestSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParseJSON(t, data)
	})
}

// AddManifestSeeds seeds f with every example and testdata manifest file
// (FuzzParseJSON here, FuzzLoad in manifest_test).
func AddManifestSeeds(f *testing.F) {
	for _, pat := range []string{"../examples/manifests/*/*.json", "testdata/*/*.json"} {
		files, _ := filepath.Glob(pat)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
}
