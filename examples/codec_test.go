package examples_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/schemas"
)

// TestCounterWasmEqualsNativeOnOddInputs hands the counter's wasm build and
// its native builtin state and event bytes the kernel would never pass
// (its schemas refuse them) but a step must still answer the same way on
// both targets: inputs the sdk's compiled codec decodes, inputs it leaves
// to the library which decodes them, and inputs the library refuses, whose
// fault text names the library's error.
func TestCounterWasmEqualsNativeOnOddInputs(t *testing.T) {
	ctx := context.Background()
	m, err := manifest.Load(built.Path(t, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	code := m.Modules["com.example/counter@1"].Runtime.Bytes
	e, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: built.Dir(t) + "/.wasm-cache"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	r, err := e.Compile(ctx, "counter", schemas.HashBytes(code).String(), code, 0)
	if err != nil {
		t.Fatal(err)
	}
	native := counter.Module.Builtin("x").Entrypoints["step"]
	h := func(s string) []byte {
		if s == "" {
			return nil
		}
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct{ name, state, event, want string }{
		// The compiled codec's shapes.
		{"plain", "a1 65636f756e74 01", "a2 63 6b6579 61 61 62 6279 02", "a1 65636f756e74 03"},
		{"new cell", "", "a1 62 6279 20", "a1 65636f756e74 20"},
		{"null state", "f6", "a0", "a1 65636f756e74 00"},
		{"unknown keys", "a2 61 78 fb3ff0000000000000 65636f756e74 01", "a1 61 79 82 01 f5", "a1 65636f756e74 01"},
		// Left to the library, which decodes them.
		{"undefined", "a1 65636f756e74 f7", "a1 62 6279 05", "a1 65636f756e74 05"},
		{"integer key", "a2 00 01 65636f756e74 01", "a1 62 6279 01", "a1 65636f756e74 02"},
		// Left to the library, which refuses them.
		{"float", "a1 65636f756e74 fb3ff0000000000000", "a0", "fault: state does not decode into counter.State: cbor: cannot unmarshal primitives into Go struct field counter.State.count of type int64"},
		{"duplicate key", "a1 65636f756e74 01", "a2 62 6279 01 62 6279 01", "fault: event does not decode into counter.Event: cbor: found duplicate map key \"by\" at map element index 1"},
		{"overflow", "a1 65636f756e74 01", "a1 62 6279 1b8000000000000000", "fault: event does not decode into counter.Event: cbor: cannot unmarshal positive integer into Go struct field counter.Event.by of type int64 (9223372036854775808 overflows int64)"},
		{"bad UTF-8", "a1 65636f756e74 01", "a1 63 6b6579 61 ff", "fault: event does not decode into counter.Event: cbor: invalid UTF-8 string"},
		{"trailing bytes", "a1 65636f756e74 01 00", "a0", "fault: state does not decode into counter.State: cbor: 1 bytes of extraneous data starting at index 8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := &modules.Input{Version: 1, State: h(c.state),
				Event: modules.EventIn{Schema: "com.example/CountEvent@1", Value: h(c.event), Key: schemas.MustMarshal("k")}}
			answer := func(out *modules.Output, err error) string {
				if err != nil {
					return "fault: " + err.Error()
				}
				return hex.EncodeToString(out.State)
			}
			got, gotNative := answer(r.Step(ctx, "step", in)), answer(native(in))
			want := c.want
			if !strings.HasPrefix(want, "fault: ") {
				want = hex.EncodeToString(h(want))
			}
			if got != gotNative || !bytes.Equal([]byte(got), []byte(want)) {
				t.Fatalf("wasm   %s\nnative %s\nwant   %s", got, gotNative, want)
			}
		})
	}
}
