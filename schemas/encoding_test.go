package schemas_test

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// testRegistry holds the defs the golden vectors use.
func testRegistry(t testing.TB) *schemas.Registry {
	t.Helper()
	r := schemas.NewRegistry()
	err := r.Define([]schemas.SchemaDef{
		{Name: "t/Any@1", Schema: []byte(`{}`)},
		{Name: "t/Bytes@1", Schema: []byte(`{"type":"string","contentEncoding":"base64"}`)},
		{Name: "t/Rec@1", Schema: []byte(`{"type":"object","properties":{
			"id":{"type":"string"},
			"blob":{"$ref":"t/Bytes@1"},
			"list":{"type":"array","items":{"$ref":"#/$defs/b"}},
			"pair":{"type":"array","prefixItems":[{"type":"string"},{"$ref":"#/$defs/b"}]},
			"tags":{"type":"object","additionalProperties":{"$ref":"#/$defs/b"}},
			"pat":{"type":"object","patternProperties":{"^b_":{"$ref":"#/$defs/b"}}},
			"all":{"allOf":[{"type":"string"},{"contentEncoding":"base64"}]}
		},"$defs":{"b":{"type":"string","contentEncoding":"base64"}}}`)},
		{Name: "t/Ev@1", Variant: []schemas.Arm{{Tag: "Raw", Schema: "t/Bytes@1"}, {Tag: "Rec", Schema: "t/Rec@1"}}},
		{Name: "t/Choice@1", Schema: []byte(`{"oneOf":[
			{"type":"object","properties":{"k":{"const":"b"},"v":{"type":"string","contentEncoding":"base64"}},"required":["k"]},
			{"type":"object","properties":{"k":{"const":"s"},"v":{"type":"string"}},"required":["k"]}]}`)},
	})
	if err != nil {
		t.Fatalf("define: %v", err)
	}
	return r
}

// TestGoldenVectors pins the canonical encoding byte for byte.
func TestGoldenVectors(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		name, schema, js, hex string
	}{
		{"key order a", "t/Any@1", `{"b":1,"a":2}`, "a2616102616201"},
		{"key order b", "t/Any@1", `{"a":2,"b":1}`, "a2616102616201"},
		{"whitespace", "t/Any@1", " {\n\t\"a\" : 2 ,\r\n \"b\":1 } \n", "a2616102616201"},
		{"shorter key first", "t/Any@1", `{"aa":1,"b":2}`, "a261620262616101"},
		{"int 1", "t/Any@1", `1`, "01"},
		{"int 1.0", "t/Any@1", `1.0`, "01"},
		{"int 1e0", "t/Any@1", `1e0`, "01"},
		{"int 10e-1", "t/Any@1", `10e-1`, "01"},
		{"int 1e2", "t/Any@1", `1e2`, "1864"},
		{"zero", "t/Any@1", `0`, "00"},
		{"negative zero", "t/Any@1", `-0`, "00"},
		{"negative zero float", "t/Any@1", `-0.0`, "00"},
		{"neg 1", "t/Any@1", `-1`, "20"},
		{"neg 1.0", "t/Any@1", `-1.0`, "20"},
		{"neg 500", "t/Any@1", `-500`, "3901f3"},
		{"255", "t/Any@1", `255`, "18ff"},
		{"256", "t/Any@1", `256`, "190100"},
		{"2^32", "t/Any@1", `4294967296`, "1b0000000100000000"},
		{"max uint64", "t/Any@1", `18446744073709551615`, "1bffffffffffffffff"},
		{"min int64", "t/Any@1", `-9223372036854775808`, "3b7fffffffffffffff"},
		{"below int64", "t/Any@1", `-9223372036854775809`, "3b8000000000000000"},
		{"min cbor int", "t/Any@1", `-18446744073709551616`, "3bffffffffffffffff"},
		{"2^64 is a float", "t/Any@1", `18446744073709551616`, "fa5f800000"},
		{"1e300 is a float", "t/Any@1", `1e300`, "fb7e37e43c8800759c"},
		{"float16 1.5", "t/Any@1", `1.5`, "f93e00"},
		{"float16 1.50", "t/Any@1", `1.50`, "f93e00"},
		{"float16 -2.5", "t/Any@1", `-2.5`, "f9c100"},
		{"float32", "t/Any@1", `100000.5`, "fa47c35040"},
		{"float64", "t/Any@1", `0.1`, "fb3fb999999999999a"},
		{"rounds to integral", "t/Any@1", `9007199254740993.5`, "1b0020000000000002"},
		{"true", "t/Any@1", `true`, "f5"},
		{"null", "t/Any@1", `null`, "f6"},
		{"string", "t/Any@1", `"hi"`, "626869"},
		{"utf8", "t/Any@1", `"\u00e9"`, "62c3a9"},
		{"nested", "t/Any@1", `{"a":{"c":[1,2.5],"b":null}}`, "a16161a26162f66163820 1f94100"},
		{"bytes", "t/Bytes@1", `"AAEC"`, "43000102"},
		{"empty bytes", "t/Bytes@1", `""`, "40"},
		{"bytes via $ref", "t/Rec@1", `{"blob":"AAEC","id":"AAEC"}`, "a262696464414145436462 6c6f6243000102"},
		{"bytes in items", "t/Rec@1", `{"list":["AA==","AQ=="]}`, "a1646c6973748241004101"},
		{"bytes in prefixItems", "t/Rec@1", `{"pair":["AA==","AA=="]}`, "a164706169728264414 1 3d3d4100"},
		{"bytes in additionalProperties", "t/Rec@1", `{"tags":{"x":"AA=="}}`, "a1647461677 3a161784100"},
		{"bytes in patternProperties", "t/Rec@1", `{"pat":{"b_x":"AA==","s":"AA=="}}`, "a16370617 4a2617364414 13d3d 63625f784100"},
		{"bytes via allOf", "t/Rec@1", `{"all":"AA=="}`, "a163616c6c4100"},
		{"variant bytes arm", "t/Ev@1", `{"$tag":"Raw","$value":"AAEC"}`, "a264247461676352617766247661 6c756543000102"},
		{"variant rec arm", "t/Ev@1", `{"$value":{"blob":""},"$tag":"Rec"}`, "a264247461676352656366247661 6c7565a164626c6f6240"},
		{"oneOf picks bytes branch", "t/Choice@1", `{"k":"b","v":"AA=="}`, "a2616b616261764100"},
		{"oneOf picks text branch", "t/Choice@1", `{"k":"s","v":"AA=="}`, "a2616b6173617664414 13d3d"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := strings.ReplaceAll(c.hex, " ", "")
			got, err := r.FromJSON(c.schema, []byte(c.js))
			if err != nil {
				t.Fatalf("FromJSON(%s, %s): %v", c.schema, c.js, err)
			}
			if hex.EncodeToString(got) != want {
				t.Fatalf("FromJSON(%s, %s) = %x, want %s", c.schema, c.js, got, want)
			}
			if err := r.Validate(c.schema, got); err != nil {
				t.Fatalf("Validate(%x): %v", got, err)
			}
			js, err := schemas.ToJSON(got)
			if err != nil {
				t.Fatalf("ToJSON: %v", err)
			}
			again, err := r.FromJSON(c.schema, js)
			if err != nil || hex.EncodeToString(again) != want {
				t.Fatalf("round trip via %s = %x, %v; want %s", js, again, err, want)
			}
		})
	}
}

func TestSameValueSameHash(t *testing.T) {
	r := testRegistry(t)
	var first schemas.Hash
	for i, js := range []string{`{"n":1,"s":"x"}`, `{"s":"x","n":1.0}`, `{ "s" : "x" , "n" : 1e0 }`, `{"n":100e-2,"s":"x"}`} {
		b, err := r.FromJSON("t/Any@1", []byte(js))
		if err != nil {
			t.Fatal(err)
		}
		h := schemas.HashBytes(b)
		if i == 0 {
			first = h
		} else if h != first {
			t.Fatalf("%s hashes to %s, want %s", js, h, first)
		}
	}
}

func TestFromJSONRejects(t *testing.T) {
	r := testRegistry(t)
	cases := []struct {
		name, schema, js, ptr, msg string
	}{
		{"duplicate key", "t/Any@1", `{"a":1,"a":2}`, "/", "duplicate object key"},
		{"nested duplicate key", "t/Any@1", `{"x":[{"a":1,"a":1}]}`, "/x/0", "duplicate object key"},
		{"trailing garbage", "t/Any@1", `{"a":1} x`, "/", "after the JSON value"},
		{"second value", "t/Any@1", `1 2`, "/", "after the JSON value"},
		{"truncated", "t/Any@1", `{"a":`, "/a", "unexpected end"},
		{"empty", "t/Any@1", ``, "/", "unexpected end"},
		{"bad utf8", "t/Any@1", "\"\xff\"", "/", "UTF-8"},
		{"number too big", "t/Any@1", `1e400`, "/", "out of range"},
		{"huge exponent", "t/Any@1", `{"n":1e999999999999}`, "/n", "out of range"},
		{"number too small", "t/Any@1", `1e-400`, "/", "out of range"},
		{"bad base64", "t/Bytes@1", `"A"`, "/", "base64"},
		{"base64 stray bits", "t/Bytes@1", `"QR=="`, "/", "base64"},
		{"base64 newline", "t/Rec@1", `{"blob":"AA\n=="}`, "/blob", "base64"},
		{"base64url", "t/Bytes@1", `"-_8="`, "/", "base64"},
		{"schema violation", "t/Rec@1", `{"id":5}`, "/id", "expected string"},
		{"variant unknown tag", "t/Ev@1", `{"$tag":"Nope","$value":1}`, "/$tag", "must be one of"},
		{"variant extra field", "t/Ev@1", `{"$tag":"Raw","$value":"","x":1}`, "/", "additionalProperties"},
		{"variant bad arm value", "t/Ev@1", `{"$tag":"Rec","$value":{"id":1}}`, "/$value/id", "expected string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.FromJSON(c.schema, []byte(c.js))
			var ve *schemas.ValueError
			if !errors.As(err, &ve) {
				t.Fatalf("FromJSON(%q) = %v, want *ValueError", c.js, err)
			}
			if ve.Schema != c.schema || ve.Pointer != c.ptr || !strings.Contains(ve.Msg, c.msg) {
				t.Fatalf("got %q (pointer %q), want pointer %q and %q", err, ve.Pointer, c.ptr, c.msg)
			}
			if !errors.Is(err, schemas.ErrInvalid) {
				t.Fatalf("errors.Is(err, ErrInvalid) is false")
			}
		})
	}
	if _, err := r.FromJSON("t/Missing@1", []byte(`1`)); !errors.Is(err, schemas.ErrUnknownSchema) {
		t.Fatalf("unknown schema: %v", err)
	}
}

func TestNestingLimit(t *testing.T) {
	r := testRegistry(t)
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	b, err := r.FromJSON("t/Any@1", []byte(deep(64)))
	if err != nil {
		t.Fatalf("64 levels: %v", err)
	}
	if err := r.Validate("t/Any@1", b); err != nil {
		t.Fatalf("64 levels do not decode again: %v", err)
	}
	if _, err := r.FromJSON("t/Any@1", []byte(deep(65))); err == nil {
		t.Fatal("65 levels accepted")
	}
}

func TestFromValue(t *testing.T) {
	r := testRegistry(t)
	b, err := r.FromValue("t/Rec@1", map[string]any{"blob": "AAEC", "id": "x", "n": 1.0, "m": 2, "f": 0.5})
	if err != nil {
		t.Fatal(err)
	}
	want := "a56166f93800616d02616e01626964617864626c6f6243000102"
	if hex.EncodeToString(b) != want {
		t.Fatalf("got %x want %s", b, want)
	}
	if _, err := r.FromValue("t/Any@1", map[string]any{"x": []byte{1}}); err == nil {
		t.Fatal("[]byte accepted as a JSON value")
	}
}

// TestStrictDecoding feeds CBOR that is well-formed but not canonical, or not
// well-formed, to Decode and Validate: each must be refused.
func TestStrictDecoding(t *testing.T) {
	r := testRegistry(t)
	cases := []struct{ name, hex string }{
		{"duplicate key", "a2616101616102"},
		{"indefinite array", "9f01ff"},
		{"indefinite map", "bf616101ff"},
		{"indefinite bytes", "5f4100ff"},
		{"indefinite text", "7f6161ff"},
		{"trailing bytes", "0100"},
		{"two items", "f6f6"},
		{"truncated", "a16161"},
		{"empty", ""},
		{"int not shortest 1 byte", "1801"},
		{"int not shortest 2 bytes", "190001"},
		{"int not shortest 8 bytes", "1b0000000000000001"},
		{"neg int not shortest", "3800"},
		{"length not shortest", "780161"},
		{"float32 for float16", "fa3fc00000"},
		{"float64 for float16", "fb3ff8000000000000"},
		{"keys unsorted", "a2616202616101"},
		{"keys length unsorted", "a26261610161 6202"},
		{"tag epoch", "c11a00000000"},
		{"tag bignum", "c240"},
		{"self-describe tag", "d9d9f701"},
		{"invalid utf8", "61ff"},
		{"undefined", "f7"},
		{"simple value", "f0"},
		{"reserved ai", "1c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := schemas.Decode(b); err == nil {
				t.Errorf("Decode(%s) accepted", c.hex)
			}
			if err := r.Validate("t/Any@1", b); err == nil {
				t.Errorf("Validate(%s) accepted", c.hex)
			}
			if _, err := schemas.ToJSON(b); err == nil {
				t.Errorf("ToJSON(%s) accepted", c.hex)
			}
			var v any
			if err := schemas.Unmarshal(b, &v); err == nil {
				t.Errorf("Unmarshal(%s) accepted", c.hex)
			}
		})
	}
}

// TestValidateDataModel: canonical CBOR that FromJSON can never produce is
// refused by Validate (floats that are integral, NaN, non-text keys, bytes
// where the schema wants text and the other way round).
func TestValidateDataModel(t *testing.T) {
	r := testRegistry(t)
	cases := []struct{ name, schema, hex, msg string }{
		{"integral float", "t/Any@1", "f93c00", "not canonical"},
		{"negative zero float", "t/Any@1", "f98000", "not canonical"},
		{"NaN", "t/Any@1", "f97e00", "not canonical"},
		{"infinity", "t/Any@1", "f97c00", "not canonical"},
		{"int key", "t/Any@1", "a10102", "non-text keys"},
		{"text for bytes", "t/Bytes@1", "64414145 43", "want a byte string"},
		{"bytes for text", "t/Any@1", "4100", "want a text string"},
		{"bytes for text in map", "t/Rec@1", "a162696441 00", "want a text string"},
		{"schema violation", "t/Rec@1", "a1626964 05", "expected string"},
		{"variant wrong type in arm", "t/Ev@1", "a264247461676352617766247661 6c75656441413d3d", "want a byte string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
			err := r.Validate(c.schema, b)
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Validate(%s, %s) = %v, want %q", c.schema, c.hex, err, c.msg)
			}
		})
	}
}

func TestToJSON(t *testing.T) {
	cases := []struct{ hex, js string }{
		{"a2616102616201", `{"a":2,"b":1}`},
		{"43000102", `"AAEC"`},
		{"3bffffffffffffffff", `-18446744073709551616`},
		{"fb3fb999999999999a", `0.1`},
		{"fa5f800000", `1.8446744073709552e+19`},
		{"fb7e37e43c8800759c", `1e+300`},
		{"633c263e", `"<&>"`},
	}
	for _, c := range cases {
		b, _ := hex.DecodeString(c.hex)
		got, err := schemas.ToJSON(b)
		if err != nil || string(got) != c.js {
			t.Errorf("ToJSON(%s) = %s, %v; want %s", c.hex, got, err, c.js)
		}
	}
	if _, err := schemas.ToJSON([]byte{0xa1, 0x01, 0x02}); err == nil {
		t.Error("non-text key rendered")
	}
}

// TestErrorMessagesAreDeterministic: a value with several problems gets the
// same message on every call. Messages reach the journal (a step's fault
// reason, a rejected receipt's reason), so map iteration order must not
// choose which problem is reported or in what order.
func TestErrorMessagesAreDeterministic(t *testing.T) {
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{
		{Name: "t/Many@1", Schema: []byte(`{"type":"object","additionalProperties":false,"properties":{
			"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"},"d":{"type":"integer"},
			"e":{"type":"integer"},"f":{"type":"integer"},"g":{"type":"integer"},"h":{"type":"integer"},
			"x":{"type":"string"},"y":{"type":"string"},"z":{"type":"string"},"w":{"type":"string"}}}`)},
		{Name: "t/Bytes8@1", Schema: []byte(`{"type":"object","properties":{
			"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":"string"},
			"e":{"type":"string"},"f":{"type":"string"},"g":{"type":"string"},"h":{"type":"string"}}}`)},
	}); err != nil {
		t.Fatal(err)
	}
	many := schemas.MustMarshal(map[string]any{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8",
		"x": 1, "y": 2, "z": 3, "w": 4, "extra1": 1, "extra2": 2})
	bytes8 := schemas.MustMarshal(map[string]any{"a": []byte{1}, "b": []byte{2}, "c": []byte{3}, "d": []byte{4},
		"e": []byte{5}, "f": []byte{6}, "g": []byte{7}, "h": []byte{8}})
	for _, c := range []struct {
		schema string
		value  []byte
		json   string
	}{
		{"t/Many@1", many, ""},
		{"t/Bytes8@1", bytes8, ""},
		{"t/Many@1", nil, `{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","x":1,"y":2,"z":3,"w":4}`},
	} {
		var first string
		for i := 0; i < 200; i++ {
			var err error
			if c.json != "" {
				_, err = r.FromJSON(c.schema, []byte(c.json))
			} else {
				err = r.Validate(c.schema, c.value)
			}
			if err == nil {
				t.Fatalf("%s: invalid value accepted", c.schema)
			}
			if i == 0 {
				first = err.Error()
			} else if err.Error() != first {
				t.Fatalf("%s: message changed between calls:\n%s\n%s", c.schema, first, err.Error())
			}
		}
	}
}

// TestZeroWithHugeExponent: "0e<huge>" is zero, but the JSON Schema
// validator parses numbers with big.Rat, which cannot read such a literal,
// and panicked on it. It is refused with a clear error before validation,
// everywhere a number enters.
func TestZeroWithHugeExponent(t *testing.T) {
	r := testRegistry(t)
	for _, js := range []string{`0E10000000000000000000`, `{"n":-0.0e99999999999999999999}`, `[0e1001]`} {
		if _, err := r.FromJSON("t/Any@1", []byte(js)); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("%s: %v", js, err)
		}
	}
	for _, js := range []string{`0e1000`, `1e-320`, `0.0e-1000`} {
		if _, err := r.FromJSON("t/Any@1", []byte(js)); err != nil {
			t.Errorf("%s: %v", js, err)
		}
	}
}
