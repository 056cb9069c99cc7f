package sdk

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

// Plain copies of the sdk's hand-decoded records: same fields and tags, no
// methods, so the library decodes them by reflection.
type (
	plainEnvelope     ReceiptEnvelope
	plainRejected     ReceiptRejected
	plainTimerReceipt TimerSetReceipt
)

// plainContext is Context as the kernel writes it.
type plainContext = sys.Context

// fastCases decodes data with each hand decoder and with the library into
// the plain copy. The hand decoder must accept nothing the library refuses,
// and decode what both accept to the same values; it may refuse more (null
// for a text field, a key that is not text), but not on what the kernel
// writes: on exact data both must agree.
func fastCases(t *testing.T, data []byte, exact bool) {
	t.Helper()
	check := func(name string, fastErr, libErr error, fast, lib any) {
		t.Helper()
		if fastErr == nil && libErr != nil {
			t.Fatalf("%s on %x: hand decoder accepts, library says %v", name, data, libErr)
		}
		if exact && fastErr != nil && libErr == nil {
			t.Fatalf("%s on %x: hand decoder refuses the kernel's bytes: %v", name, data, fastErr)
		}
		if fastErr == nil && !reflect.DeepEqual(fast, lib) {
			t.Fatalf("%s on %x: hand decoder %+v, library %+v", name, data, fast, lib)
		}
	}
	var e ReceiptEnvelope
	var pe plainEnvelope
	fe, le := Unmarshal(data, &e), decMode.Unmarshal(data, &pe)
	check("envelope", fe, le, e, ReceiptEnvelope(pe))

	var r ReceiptRejected
	var pr plainRejected
	fe, le = Unmarshal(data, &r), decMode.Unmarshal(data, &pr)
	check("rejected", fe, le, r, ReceiptRejected(pr))

	var tr TimerSetReceipt
	var ptr plainTimerReceipt
	fe, le = Unmarshal(data, &tr), decMode.Unmarshal(data, &ptr)
	check("timer receipt", fe, le, tr, TimerSetReceipt(ptr))

	var c Context
	var pc plainContext
	fe, le = decodeContext(data, &c), decMode.Unmarshal(data, &pc)
	check("context", fe, le, c, Context(pc))
}

// kernelRecords are records as the kernel writes them.
func kernelRecords() [][]byte {
	h := "sha256:" + strings.Repeat("ab", 32)
	return [][]byte{
		schemas.MustMarshal(map[string]any{"origin_workflow": "w", "origin_workflow_hash": h, "origin_key": []byte{0x61, 0x61},
			"intent_hash": h, "effect": "e", "executor": "x", "issuer_ref": "r", "payload": []byte{0xa0},
			"status": "ok", "emitted_at_seq": 7, "signature": []byte{1, 2}}),
		schemas.MustMarshal(map[string]any{"origin_workflow": "w", "intent_hash": h, "effect": "e", "error": "bad", "emitted_at_seq": 1}),
		schemas.MustMarshal(map[string]any{"delivered_at_ns": 5, "key": "k"}),
		schemas.MustMarshal(map[string]any{"delivered_at_ns": 5}),
		schemas.MustMarshal(sys.Context{NowNs: 1, Entropy: make([]byte, 32), Workflow: "w", Key: []byte{1}, CellMode: true, EventHash: h}),
		schemas.MustMarshal(sys.Context{NowNs: 1, Entropy: make([]byte, 40), Workflow: "w"}),
	}
}

func fastSeeds() [][]byte {
	h := "sha256:" + strings.Repeat("ab", 32)
	env := map[string]any{"origin_workflow": "w", "origin_workflow_hash": h, "origin_key": []byte{0x61, 0x61},
		"intent_hash": h, "effect": "e", "executor": "x", "issuer_ref": "r", "payload": []byte{0xa0},
		"status": "ok", "emitted_at_seq": 7, "signature": []byte{1, 2}}
	thin := map[string]any{"effect": "e", "status": "timeout", "payload": []byte{}}
	extra := map[string]any{"effect": "e", "future": []any{1, map[string]any{"x": nil}, -3, 1.5, "é"}, "error": "bad"}
	seeds := [][]byte{
		schemas.MustMarshal(env), schemas.MustMarshal(thin), schemas.MustMarshal(extra),
		schemas.MustMarshal(map[string]any{"delivered_at_ns": 5, "key": "k"}),
		schemas.MustMarshal(sys.Context{NowNs: 1, Entropy: make([]byte, 32), Workflow: "w", Key: []byte{1}, CellMode: true, EventHash: h}),
		schemas.MustMarshal(map[string]any{}),
		schemas.MustMarshal(map[string]any{"effect": 1}),
		schemas.MustMarshal(map[string]any{"emitted_at_seq": -1}),
		schemas.MustMarshal(map[string]any{"emitted_at_seq": 1.5}),
		schemas.MustMarshal(map[string]any{"payload": "text"}),
		schemas.MustMarshal(map[string]any{"payload": nil, "origin_key": nil}),
		schemas.MustMarshal(map[string]any{"cell_mode": 1, "key": []byte{}}),
		schemas.MustMarshal([]any{1, 2}),
		mustHex("a1" + "66737461747573" + "62fffe"),                           // status: invalid UTF-8
		mustHex("a2" + "6665666665637461" + "61" + "6665666665637462"),        // effect twice (malformed: odd)
		mustHex("a2" + "66656666656374" + "6161" + "66656666656374" + "6162"), // effect twice
		mustHex("a1" + "6178" + "c101"),                                       // a tag in an unknown field
		mustHex("a1" + "6178" + "f7"),                                         // undefined in an unknown field
		mustHex("a1" + "6178" + "f810"),                                       // a malformed simple value
		mustHex("a1" + "6178" + "f93c00"),                                     // a float16
		mustHex("a1" + "66737461747573" + "f6"),                               // status: null
		mustHex("a1" + "6e656d69747465645f61745f736571" + "f6"),               // emitted_at_seq: null
		mustHex("a1" + "6663656c6c5f6d6f6465" + "f6"),                         // cell_mode: null
		mustHex("a10101"), // an integer key
		append(schemas.MustMarshal(thin), 0),
	}
	return seeds
}

func TestFastDecodersMatchLibrary(t *testing.T) {
	for _, s := range kernelRecords() {
		fastCases(t, s, true)
	}
	for _, s := range fastSeeds() {
		fastCases(t, s, false)
	}
}

// FuzzFastDecodersMatchLibrary: the hand decoders accept exactly what the
// library accepts, and decode it to the same values.
func FuzzFastDecodersMatchLibrary(f *testing.F) {
	for _, s := range fastSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fastCases(t, data, false) })
}

func TestTimerParamsMatchLibrary(t *testing.T) {
	for _, p := range []TimerSetParams{{}, {DeliverAtNs: 23}, {DeliverAtNs: 1 << 40, Key: "k"},
		{DeliverAtNs: ^uint64(0), Key: strings.Repeat("k", 300)}, {Key: "é"}} {
		if got, want := appendTimerSetParams(nil, p.DeliverAtNs, p.Key), schemas.MustMarshal(p); !bytes.Equal(got, want) {
			t.Errorf("%+v: %x, library %x", p, got, want)
		}
	}
}
