package sdk_test

import (
	"bytes"
	"encoding/hex"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
)

type tagged struct {
	Zeta    string            `cbor:"zeta"`
	A       int64             `cbor:"a"`
	Long    []byte            `cbor:"a_much_longer_key"`
	Opt     string            `cbor:"opt,omitempty"`
	OptPtr  *uint64           `cbor:"opt_ptr,omitempty"`
	Nested  map[string]any    `cbor:"nested"`
	List    []int32           `cbor:"list"`
	Untyped any               `cbor:"untyped"`
	Flag    bool              `cbor:"flag"`
	Skipped string            `cbor:"-"`
	Strs    map[string]string `cbor:"strs,omitempty"`
}

type untagged struct {
	Name  string
	Count uint8
}

func u64(v uint64) *uint64 { return &v }

// TestMarshalMatchesSchemas pins that the sdk writes the kernel's canonical
// bytes: a guest's state must hash the same as the kernel's own encoding.
func TestMarshalMatchesSchemas(t *testing.T) {
	values := map[string]any{
		"nil":          nil,
		"true":         true,
		"false":        false,
		"zero":         0,
		"uint 23":      uint64(23),
		"uint 24":      uint8(24),
		"uint 255":     255,
		"uint 256":     uint16(256),
		"uint 65535":   65535,
		"uint 65536":   uint32(65536),
		"uint 2^32":    uint64(1) << 32,
		"uint max":     uint64(math.MaxUint64),
		"neg 1":        -1,
		"neg 24":       int8(-24),
		"neg 25":       -25,
		"neg 256":      int16(-256),
		"neg 257":      -257,
		"neg 65537":    int32(-65537),
		"neg min":      int64(math.MinInt64),
		"string":       "héllo, wörld",
		"empty string": "",
		"long string":  strings.Repeat("x", 300),
		"bytes":        []byte{0, 1, 2, 0xff},
		"empty bytes":  []byte{},
		"nil bytes":    []byte(nil),
		"float 1.5":    1.5,
		"float 0.1":    0.1,
		"float 65504":  65504.0,
		"float 1e300":  1e300,
		"float -0":     math.Copysign(0, -1),
		"float32":      float32(3.25),
		"float32 0.1":  float32(0.1),
		"nan":          math.NaN(),
		"inf":          math.Inf(1),
		"-inf":         math.Inf(-1),
		"integral f":   2.0,
		"time":         time.Unix(1_700_000_000, 0).UTC(),
		"array":        []any{1, "a", []byte("b"), nil, -3, 2.5, []any{}},
		"map keys by length then bytes": map[string]any{
			"bb": 1, "a": 2, "ab": 3, "b": 4, "aaa": 5, "": 6, "Z": 7, "é": 8,
		},
		"nested": map[string]any{"m": map[string]any{"x": []any{map[string]any{"y": uint64(1)}}}},
		"struct tagged": tagged{Zeta: "z", A: -5, Long: []byte("l"), Nested: map[string]any{"k": "v", "a": 1},
			List: []int32{1, -1, 1 << 20}, Untyped: map[string]any{"q": []byte{9}}, Flag: true, Skipped: "gone"},
		"struct omitempty set": tagged{Opt: "o", OptPtr: u64(0), Strs: map[string]string{"b": "1", "a": "2"}},
		"struct untagged":      untagged{Name: "n", Count: 200},
		"pointer to struct":    &untagged{Name: "p"},
		"map of structs":       map[string]untagged{"x": {Name: "x"}, "y": {Count: 1}},
		"variant":              sdk.Tagged{Tag: "Created", Value: map[string]any{"note_id": "n", "title": "t"}},
		"receipt envelope": sdk.ReceiptEnvelope{OriginWorkflow: "w", OriginWorkflowHash: "sha256:00", IntentHash: "sha256:11",
			Effect: "e", Executor: "x", Payload: []byte{0xa0}, Status: sdk.StatusOK, EmittedAtSeq: 7, Signature: []byte{1}},
		"timer params": sdk.TimerSetParams{DeliverAtNs: 1 << 40, Key: "k"},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			want, err := schemas.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sdk.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("sdk.Marshal = %x\nschemas.Marshal = %x", got, want)
			}
		})
	}
}

func TestUnmarshalLenientButStrict(t *testing.T) {
	type small struct {
		A int64  `cbor:"a"`
		B string `cbor:"b"`
	}
	good := schemas.MustMarshal(map[string]any{"a": -3, "b": "x", "extra": []any{1, 2}})
	var s small
	if err := sdk.Unmarshal(good, &s); err != nil {
		t.Fatalf("unknown field should be ignored: %v", err)
	}
	if s != (small{A: -3, B: "x"}) {
		t.Fatalf("decoded %+v", s)
	}
	var generic any
	if err := sdk.Unmarshal(good, &generic); err != nil {
		t.Fatal(err)
	}
	if _, ok := generic.(map[string]any); !ok {
		t.Fatalf("a map decodes into an interface as %T, want map[string]any", generic)
	}
	bad := map[string]string{
		"trailing bytes":  hex.EncodeToString(append(append([]byte{}, good...), 0x00)),
		"truncated":       hex.EncodeToString(good[:len(good)-1]),
		"indefinite map":  "bf6161 01ff",
		"tag":             "c1 1a 00000001",
		"invalid utf-8":   "a1 6161 62 ff fe",
		"wrong type":      "a1 6162 6178",
		"negative into u": "a1 6162 20",
		"empty":           "",
		"reserved head":   "1c",
	}
	for name, h := range bad {
		t.Run(name, func(t *testing.T) {
			data, err := hex.DecodeString(strings.ReplaceAll(h, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				A string `cbor:"a"`
				B uint64 `cbor:"b"`
			}
			if err := sdk.Unmarshal(data, &v); err == nil {
				t.Fatalf("%x decoded without error into %+v", data, v)
			}
		})
	}
}

func TestRawValueRoundTrips(t *testing.T) {
	type holder struct {
		Keep sdk.RawValue `cbor:"keep"`
		N    int          `cbor:"n"`
	}
	in := schemas.MustMarshal(map[string]any{"keep": map[string]any{"z": 1, "a": []byte("x")}, "n": 2})
	var h holder
	if err := sdk.Unmarshal(in, &h); err != nil {
		t.Fatal(err)
	}
	if want := schemas.MustMarshal(map[string]any{"z": 1, "a": []byte("x")}); !bytes.Equal(h.Keep, want) {
		t.Fatalf("raw = %x, want %x", h.Keep, want)
	}
	out, err := sdk.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, in) {
		t.Fatalf("re-encoded %x, want %x", out, in)
	}
	if b, _ := sdk.Marshal(sdk.RawValue(nil)); !bytes.Equal(b, []byte{0xf6}) {
		t.Fatalf("empty RawValue encodes as %x, want null", b)
	}
}

func TestVariant(t *testing.T) {
	type created struct {
		NoteID string `cbor:"note_id"`
		Title  string `cbor:"title"`
	}
	data := schemas.MustMarshal(map[string]any{"$tag": "Created", "$value": map[string]any{"note_id": "n", "title": "t"}})
	var v sdk.Variant
	if err := sdk.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Tag != "Created" {
		t.Fatalf("tag %q", v.Tag)
	}
	var c created
	if err := v.As(&c); err != nil || c != (created{"n", "t"}) {
		t.Fatalf("As = %+v, %v", c, err)
	}
	again, err := sdk.Marshal(v)
	if err != nil || !bytes.Equal(again, data) {
		t.Fatalf("a received variant re-encodes as %x (%v), want %x", again, err, data)
	}
	built, err := sdk.Marshal(sdk.Tagged{Tag: "Created", Value: c})
	if err != nil || !bytes.Equal(built, data) {
		t.Fatalf("Tagged encodes as %x (%v), want %x", built, err, data)
	}
	var n struct{ N int }
	if err := v.As(&n); err != nil {
		t.Fatalf("As into an unrelated struct ignores unknown fields: %v", err)
	}
	var wrong []int
	if err := v.As(&wrong); err == nil || !strings.Contains(err.Error(), "variant arm Created") {
		t.Fatalf("As into a slice: %v", err)
	}
	for name, bad := range map[string]any{
		"not a map":       "Created",
		"no tag":          map[string]any{"$value": 1},
		"no value":        map[string]any{"$tag": "A"},
		"extra key":       map[string]any{"$tag": "A", "$value": 1, "x": 2},
		"tag not text":    map[string]any{"$tag": 1, "$value": 1},
		"other keys only": map[string]any{"a": 1, "b": 2},
	} {
		var v sdk.Variant
		if err := sdk.Unmarshal(schemas.MustMarshal(bad), &v); err == nil {
			t.Errorf("%s: decoded as %+v", name, v)
		}
	}
	if _, err := sdk.Marshal(sdk.Variant{Tag: "A"}); err == nil {
		t.Error("a variant with no value encoded")
	}
}

func TestReceiptEnvelopeDecodes(t *testing.T) {
	payload := schemas.MustMarshal(map[string]any{"delivered_at_ns": 42, "key": "k"})
	env := map[string]any{
		"origin_workflow": "com.example/w@1", "origin_workflow_hash": "sha256:" + strings.Repeat("0", 64),
		"origin_key": []byte{0x61, 0x61}, "intent_hash": "sha256:" + strings.Repeat("1", 64),
		"effect": sdk.EffectTimerSet, "executor": "aos/builtin", "issuer_ref": "ref",
		"payload": payload, "status": "ok", "emitted_at_seq": 9, "signature": []byte{7, 7},
	}
	var r sdk.ReceiptEnvelope
	if err := sdk.Unmarshal(schemas.MustMarshal(env), &r); err != nil {
		t.Fatal(err)
	}
	want := sdk.ReceiptEnvelope{OriginWorkflow: "com.example/w@1", OriginWorkflowHash: env["origin_workflow_hash"].(string),
		OriginKey: []byte{0x61, 0x61}, IntentHash: env["intent_hash"].(string), Effect: sdk.EffectTimerSet,
		Executor: "aos/builtin", IssuerRef: "ref", Payload: payload, Status: sdk.StatusOK, EmittedAtSeq: 9, Signature: []byte{7, 7}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("decoded %+v\nwant %+v", r, want)
	}
	if !r.OK() {
		t.Fatal("status ok is not OK()")
	}
	var p sdk.TimerSetReceipt
	if err := r.DecodePayload(&p); err != nil || p != (sdk.TimerSetReceipt{DeliveredAtNs: 42, Key: "k"}) {
		t.Fatalf("payload %+v, %v", p, err)
	}
	r.Payload = []byte{0xff}
	if err := r.DecodePayload(&p); err == nil || !strings.Contains(err.Error(), "receipt payload of sys/timer.set@1") {
		t.Fatalf("garbage payload: %v", err)
	}

	rej := map[string]any{"origin_workflow": "w", "intent_hash": "sha256:" + strings.Repeat("2", 64),
		"effect": "e", "error": "bad payload", "emitted_at_seq": 3}
	var rr sdk.ReceiptRejected
	if err := sdk.Unmarshal(schemas.MustMarshal(rej), &rr); err != nil {
		t.Fatal(err)
	}
	if want := (sdk.ReceiptRejected{OriginWorkflow: "w", IntentHash: rej["intent_hash"].(string), Effect: "e", Error: "bad payload", EmittedAtSeq: 3}); !reflect.DeepEqual(rr, want) {
		t.Fatalf("rejected %+v", rr)
	}
}
