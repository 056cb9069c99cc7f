package schemas_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// FuzzDecode: the strict decoder never panics, and whatever it accepts is
// exactly the canonical encoding of what it returns.
func FuzzDecode(f *testing.F) {
	for _, h := range []string{
		"a2616102616201", "f93e00", "3bffffffffffffffff", "1bffffffffffffffff", "43000102",
		"a16161a26162f6616382 01f94100", "9f01ff", "a2616202616101", "1801", "fa3fc00000",
		"c11a00000000", "f7", "f0", "a10102", "80", "a0", "60", "40", "f97e00", "fb3fb999999999999a",
	} {
		b, _ := hex.DecodeString(stripSpaces(h))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := schemas.Decode(data)
		if err != nil {
			return
		}
		re, err := schemas.Marshal(v)
		if err != nil {
			t.Fatalf("Decode(%x) accepted but Marshal failed: %v", data, err)
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("Decode(%x) accepted, Marshal gives %x", data, re)
		}
		_, _ = schemas.ToJSON(data)
	})
}

var fuzzSchemas = []string{"t/Any@1", "t/Rec@1", "t/Ev@1", "t/Choice@1", "t/Bytes@1", "sys/WorkflowContext@1", "sys/HttpRequestParams@1"}

// FuzzFromJSON: JSON -> CBOR never panics; accepted output is canonical,
// valid, and ToJSON -> FromJSON reproduces it byte for byte.
func FuzzFromJSON(f *testing.F) {
	r := testRegistry(f)
	seeds := []string{
		`{"b":1,"a":2}`, `1.0`, `-0`, `1e300`, `18446744073709551616`, `-18446744073709551616`, `0.1`,
		`9007199254740993.5`, `{"a":{"c":[1,2.5],"b":null}}`, `"AAEC"`, `{"a":1,"a":2}`, `[[[[]]]]`,
		`{"blob":"AAEC","id":"x","list":["AA=="],"pair":["a","AA=="],"tags":{"t":"AQ=="},"pat":{"b_1":"AA==","z":"AA=="},"all":""}`,
		`{"$tag":"Raw","$value":"AAEC"}`, `{"$tag":"Rec","$value":{"blob":""}}`, `{"k":"b","v":"AA=="}`, `{"k":"s","v":"AA=="}`,
		`{"method":"GET","url":"u","body":"aGk=","headers":{"a":"b"}}`, `1e-320`, `123456789012345678901234567890`, `"\u00e9\ud83d\ude00"`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, js []byte) {
		name := fuzzSchemas[int(which)%len(fuzzSchemas)]
		b, err := r.FromJSON(name, js)
		if err != nil {
			return
		}
		if err := schemas.CheckCanonical(b); err != nil {
			t.Fatalf("FromJSON(%s, %q) = %x: not canonical: %v", name, js, b, err)
		}
		if err := r.Validate(name, b); err != nil {
			t.Fatalf("FromJSON(%s, %q) = %x: Validate: %v", name, js, b, err)
		}
		back, err := schemas.ToJSON(b)
		if err != nil {
			t.Fatalf("ToJSON(%x): %v", b, err)
		}
		again, err := r.FromJSON(name, back)
		if err != nil {
			t.Fatalf("FromJSON(%s, ToJSON) of %q -> %s: %v", name, js, back, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("%q -> %x -> %s -> %x", js, b, back, again)
		}
	})
}

// FuzzValidateFastPath: Validate's fast path never calls valid a value its
// general path refuses. Inputs are arbitrary bytes against every schema of
// fastRegistry, seeded with valid and invalid values; each input is also
// tried after one structural edit (a non-shortest head, an indefinite
// length, reordered or duplicated keys, a tag, text and bytes swapped, ...).
func FuzzValidateFastPath(f *testing.F) {
	r := fastRegistry(f)
	names := r.Names()
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	for _, c := range fastCases {
		data, err := schemas.Marshal(c.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(index[c.schema]), data, uint16(0), uint8(0))
	}
	for i, c := range validJSON {
		data, err := r.FromJSON(c.schema, []byte(c.js))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(index[c.schema]), data, uint16(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte, k uint16, m uint8) {
		name := names[int(which)%len(names)]
		check := func(data []byte) {
			if schemas.FastValid(r, name, data) {
				if err := schemas.ValidateSlow(r, name, data); err != nil {
					t.Fatalf("%s: fast path accepts %x, general path says %v", name, data, err)
				}
			}
		}
		check(data)
		if it, rest, ok := parseItem(data); ok && len(rest) == 0 {
			mut, _ := it.emit(int(k)%it.count(), mutation(m)%numMutations)
			check(mut)
		}
	})
}

func stripSpaces(s string) string { return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)) }

// FuzzFromJSONFastPath: FromJSON with its fast path gives exactly what the
// general path gives — the same bytes, or the same error — on arbitrary
// JSON against every schema of fastRegistry.
func FuzzFromJSONFastPath(f *testing.F) {
	r := fastRegistry(f)
	names := r.Names()
	index := map[string]int{}
	for i, n := range names {
		index[n] = i
	}
	for _, c := range validJSON {
		f.Add(uint8(index[c.schema]), []byte(c.js))
	}
	for _, s := range []string{`1.0`, `-0`, `1e2`, `18446744073709551616`, `{"a":1,"a":2}`, `"\u00e9"`, `[1,2.5]`, `null`, `{}`} {
		f.Add(uint8(0), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, js []byte) {
		name := names[int(which)%len(names)]
		fast, ferr := r.FromJSON(name, js)
		slow, serr := schemas.FromJSONSlow(r, name, js)
		switch {
		case (ferr == nil) != (serr == nil):
			t.Fatalf("%s %q: fast (%x, %v), general (%x, %v)", name, js, fast, ferr, slow, serr)
		case ferr != nil && ferr.Error() != serr.Error():
			t.Fatalf("%s %q: messages differ:\n%v\n%v", name, js, ferr, serr)
		case !bytes.Equal(fast, slow):
			t.Fatalf("%s %q: fast %x, general %x", name, js, fast, slow)
		}
	})
}

// FuzzDecodeJSONDifferential: DecodeJSON accepts exactly what the
// encoding/json token walk it replaced accepts, with deeply equal values,
// and refuses the rest with a *JSONError at the same pointer.
func FuzzDecodeJSONDifferential(f *testing.F) {
	for _, js := range decodeJSONCases {
		f.Add([]byte(js))
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		checkSameAsReference(t, js)
	})
}
