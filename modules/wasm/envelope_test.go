package wasm

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

var inputs = []*modules.Input{
	{Version: 1, Event: modules.EventIn{Schema: "a/B@1"}},
	{Version: 1, State: []byte{}, Event: modules.EventIn{Schema: "a/B@1", Value: []byte{}, Key: []byte{}}, Ctx: []byte{}},
	{Version: 1, State: []byte{0xa0}, Event: modules.EventIn{Schema: "com.acme/Order@2", Value: []byte{0xf6}, Key: []byte{0x61, 'k'}}},
	{Version: 300, State: bytes.Repeat([]byte{7}, 70000), Event: modules.EventIn{Schema: strings.Repeat("s", 300), Value: bytes.Repeat([]byte{1}, 300)}, Ctx: []byte{0xa1, 0x61, 'n', 0x01}},
}

func TestAppendInputIsMarshal(t *testing.T) {
	for i, in := range inputs {
		if got, want := appendInput(nil, in), schemas.MustMarshal(in); !bytes.Equal(got, want) {
			t.Errorf("input %d:\n got %x\nwant %x", i, got, want)
		}
	}
}

func FuzzAppendInput(f *testing.F) {
	for _, in := range inputs[:3] {
		f.Add(in.Version, in.State, in.State == nil, in.Event.Schema, in.Event.Value, in.Event.Key, in.Ctx)
	}
	f.Fuzz(func(t *testing.T, version uint64, state []byte, nilState bool, schema string, value, key, ctx []byte) {
		if nilState {
			state = nil
		}
		in := &modules.Input{Version: version, State: state, Event: modules.EventIn{Schema: schema, Value: value, Key: key}, Ctx: ctx}
		want, err := schemas.Marshal(in)
		if err != nil {
			t.Skip(err)
		}
		if got := appendInput(nil, in); !bytes.Equal(got, want) {
			t.Fatalf("got %x\nwant %x", got, want)
		}
	})
}

var outputs = []*modules.Output{
	{},
	{State: []byte{}},
	{State: []byte{0xa1, 0x61, 'n', 0x01}, Ann: []byte{0xf5}},
	{
		State:        []byte{0xa0},
		DomainEvents: []modules.EventOut{{Schema: "a/E@1", Value: []byte{0x01}}, {Schema: "", Value: nil}},
		Effects: []modules.EffectOut{
			{Effect: "http.request", Params: []byte{0xa0}, IdempotencyKey: []byte{1}, IssuerRef: "r"},
			{Effect: "timer.set", Params: nil},
			{Effect: "e", Params: []byte{}, IssuerRef: "only"},
		},
	},
	{State: bytes.Repeat([]byte{9}, 70000), Ann: bytes.Repeat([]byte{3}, 300)},
}

func TestDecodeOutputRoundTrip(t *testing.T) {
	for i, want := range outputs {
		b := schemas.MustMarshal(want)
		got, err := decodeOutput(b)
		if err != nil {
			t.Fatalf("output %d (%x): %v", i, b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("output %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestDecodeOutputRefuses(t *testing.T) {
	enc := func(v any) []byte { return schemas.MustMarshal(v) }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "is not canonical CBOR: truncated (at byte 0)"},
		{"not a map", enc([]int{1}), "wasm guest output: the envelope is an array, want a map"},
		{"no state", enc(map[string]any{}), `wasm guest output: missing key "state"`},
		{"unknown key", enc(map[string]any{"state": nil, "x": 1}), `wasm guest output: unknown key "x"`},
		{"int key", []byte{0xa1, 0x01, 0xf6}, "a key of the envelope is an unsigned integer, want a text string"},
		{"state text", enc(map[string]any{"state": "s"}), "wasm guest output: state is a text string, want a byte string or null"},
		{"state float", []byte{0xa1, 0x65, 's', 't', 'a', 't', 'e', 0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}, "state is a float"},
		{"empty ann", enc(map[string]any{"state": nil, "ann": []byte{}}), "ann is empty; leave the key out instead"},
		{"null ann", enc(map[string]any{"state": nil, "ann": nil}), "ann is null, want a byte string"},
		{"empty effects", enc(map[string]any{"state": nil, "effects": []any{}}), "effects is empty; leave the key out instead"},
		{"event no schema", enc(map[string]any{"state": nil, "domain_events": []any{map[string]any{"value": []byte{1}}}}),
			`missing key "schema" in domain_events[0]`},
		{"event extra", enc(map[string]any{"state": nil, "domain_events": []any{map[string]any{"schema": "s", "value": nil, "v": 1}}}),
			`unknown key "v" in domain_events[0]`},
		{"effect params text", enc(map[string]any{"state": nil, "effects": []any{map[string]any{"effect": "e", "params": "p"}}}),
			"effects[0].params is a text string, want a byte string or null"},
		{"effect empty issuer", enc(map[string]any{"state": nil, "effects": []any{map[string]any{"effect": "e", "params": nil, "issuer_ref": ""}}}),
			"effects[0].issuer_ref is empty"},
		{"long head", []byte{0xb8, 0x01, 0x65, 's', 't', 'a', 't', 'e', 0xf6}, "not canonical CBOR: head of 1 not in its shortest form (at byte 0)"},
		{"indefinite", []byte{0xbf, 0x65, 's', 't', 'a', 't', 'e', 0xf6, 0xff}, "indefinite-length item"},
		{"unsorted", []byte{0xa2, 0x65, 's', 't', 'a', 't', 'e', 0xf6, 0x63, 'a', 'n', 'n', 0x41, 0x01}, `key "ann" of the envelope is out of canonical order`},
		{"duplicate", []byte{0xa2, 0x65, 's', 't', 'a', 't', 'e', 0xf6, 0x65, 's', 't', 'a', 't', 'e', 0xf6}, `key "state" of the envelope appears twice`},
		{"trailing", append(enc(map[string]any{"state": nil}), 0), "not canonical CBOR: 1 bytes after the envelope"},
		{"truncated", enc(map[string]any{"state": []byte{1, 2, 3}})[:9], "truncated"},
		{"bad utf8", []byte{0xa2, 0x65, 's', 't', 'a', 't', 'e', 0xf6, 0x6d, 'd', 'o', 'm', 'a', 'i', 'n', '_', 'e', 'v', 'e', 'n', 't', 's',
			0x81, 0xa2, 0x65, 'v', 'a', 'l', 'u', 'e', 0xf6, 0x66, 's', 'c', 'h', 'e', 'm', 'a', 0x61, 0xff}, "domain_events[0].schema is not UTF-8"},
		{"huge array", []byte{0xa2, 0x65, 's', 't', 'a', 't', 'e', 0xf6, 0x67, 'e', 'f', 'f', 'e', 'c', 't', 's', 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := decodeOutput(tc.b)
			if err == nil {
				t.Fatalf("decoded %+v", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeOutput: the decoder never panics, and accepts exactly the
// canonical encodings of outputs: whatever it accepts, schemas.Marshal
// writes back byte for byte.
func FuzzDecodeOutput(f *testing.F) {
	for _, o := range outputs {
		if b := schemas.MustMarshal(o); len(b) < 1000 { // minimizing a large input takes the fuzzer minutes
			f.Add(b)
		}
	}
	f.Add([]byte{0xa1, 0x65, 's', 't', 'a', 't', 'e', 0x58, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := decodeOutput(bytes.Clone(b))
		if err != nil {
			return
		}
		if re := schemas.MustMarshal(out); !bytes.Equal(re, b) {
			t.Fatalf("accepted %x\nwhich encodes as %x", b, re)
		}
	})
}

func TestCapture(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		writes []string
		want   string
	}{
		{8, nil, ""},
		{8, []string{"ab", "cd"}, "abcd"},
		{8, []string{"abcdefgh"}, "abcdefgh"},
		{8, []string{"abcdefghij"}, "abcd\n…[2 bytes elided]…\nghij"},
		{8, []string{"abc", "defgh", "ijklm"}, "abcd\n…[5 bytes elided]…\njklm"},
		{8, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, "abcd\n…[3 bytes elided]…\nhijk"},
		{16, []string{"panic: x\n\n"}, "panic: x"},
		{4, []string{"\xff\xfe"}, "\uFFFD"},
	} {
		c := newCapture(tc.limit)
		for _, w := range tc.writes {
			c.write([]byte(w))
		}
		if got := c.String(); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.writes, got, tc.want)
		}
		c.reset()
		if got := c.String(); got != "" {
			t.Errorf("after reset: %q", got)
		}
	}
}
