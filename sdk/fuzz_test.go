package sdk

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

// FuzzDecodeInput: the envelope decoder never panics, and whatever it
// accepts re-encodes (through the library) to an envelope it decodes the
// same way.
func FuzzDecodeInput(f *testing.F) {
	f.Add(schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: []byte{0xa0}}}))
	f.Add(schemas.MustMarshal(&modules.Input{Version: 1, State: []byte{1}, Ctx: []byte{2},
		Event: modules.EventIn{Schema: "s", Value: []byte{3}, Key: []byte{4}}}))
	f.Add([]byte{0xa1, 0x63, 'c', 't', 'x', 0x5b, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var in modules.Input
		if err := decodeInput(data, &in, nil); err != nil {
			return
		}
		var again modules.Input
		if err := decodeInput(schemas.MustMarshal(&in), &again, nil); err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if !reflect.DeepEqual(normInput(in), normInput(again)) {
			t.Fatalf("round trip %+v -> %+v", in, again)
		}
	})
}

// normInput treats empty optional byte fields as absent (they encode so).
func normInput(in modules.Input) modules.Input {
	if len(in.Ctx) == 0 {
		in.Ctx = nil
	}
	if len(in.Event.Key) == 0 {
		in.Event.Key = nil
	}
	return in
}

// FuzzSplitVariant: never panics; what it accepts re-encodes to the input
// when the input was canonical.
func FuzzSplitVariant(f *testing.F) {
	f.Add(schemas.MustMarshal(map[string]any{"$tag": "A", "$value": map[string]any{"x": 1}}))
	f.Add([]byte{0xa2, 0x64, '$', 't', 'a', 'g', 0x61, 'A', 0x66, '$', 'v', 'a', 'l', 'u', 'e', 0x9f})
	f.Fuzz(func(t *testing.T, data []byte) {
		tag, val, err := splitVariant(data)
		if err != nil {
			return
		}
		if schemas.CheckCanonical(data) != nil {
			return
		}
		re, err := Variant{Tag: tag, Value: val}.MarshalCBOR()
		if err != nil || !bytes.Equal(re, data) {
			t.Fatalf("canonical %x re-encodes as %x (%v)", data, re, err)
		}
	})
}

// FuzzDecodeContext: never panics.
func FuzzDecodeContext(f *testing.F) {
	f.Add(schemas.MustMarshal(sys.Context{NowNs: 1, Entropy: make([]byte, 32), Workflow: "w", Key: []byte{0x61, 0x61}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Context
		_ = decodeContext(data, &c)
	})
}

// FuzzGuestStep: whatever the host hands it, the guest answers with a result
// buffer, never a panic.
func FuzzGuestStep(f *testing.F) {
	arm := schemas.MustMarshal(map[string]any{"$tag": "Add", "$value": 1})
	f.Add("step", schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: arm}}))
	f.Add("step", schemas.MustMarshal(&modules.Input{Version: 1, State: []byte{0xa1, 0x61, 'n', 0x20}, Event: modules.EventIn{Schema: "s", Value: arm}}))
	g := &guest{mod: guestModule()}
	f.Fuzz(func(t *testing.T, entry string, data []byte) {
		res := g.step([]byte(entry), data)
		if len(res) == 0 || res[0] > resultFault {
			t.Fatalf("result %x", res)
		}
		if res[0] == resultOutput {
			if err := schemas.CheckCanonical(res[1:]); err != nil {
				t.Fatalf("output envelope not canonical: %v", err)
			}
		}
	})
}
