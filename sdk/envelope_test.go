package sdk

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

func TestOutputEnvelopeMatchesLibrary(t *testing.T) {
	long := bytes.Repeat([]byte{0xa0}, 300)
	outputs := map[string]*modules.Output{
		"deleted":     {},
		"state":       {State: []byte{0xa1, 0x61, 0x61, 0x01}},
		"empty state": {State: []byte{}},
		"long state":  {State: long},
		"ann":         {State: []byte{0xa0}, Ann: []byte{0x63, 'a', 'b', 'c'}},
		"empty lists": {State: []byte{0xa0}, DomainEvents: []modules.EventOut{}, Effects: []modules.EffectOut{}, Ann: []byte{}},
		"events": {State: []byte{0xa0}, DomainEvents: []modules.EventOut{
			{Schema: "com.example/OrderPaid@1", Value: []byte{0xa0}}, {Schema: "x", Value: long}, {Schema: "", Value: nil}}},
		"effects": {Effects: []modules.EffectOut{
			{Effect: "sys/timer.set@1", Params: []byte{0xa1, 0x61, 0x6b, 0x01}},
			{Effect: "e", Params: []byte{0xa0}, IdempotencyKey: []byte("charge:o1")},
			{Effect: "e", Params: []byte{0xa0}, IssuerRef: "deadline"},
			{Effect: "e", Params: nil, IdempotencyKey: []byte{}, IssuerRef: ""},
			{Effect: strings.Repeat("n", 30), Params: long, IdempotencyKey: long, IssuerRef: strings.Repeat("r", 256)}}},
		"everything": {State: []byte{0xf5}, Ann: []byte{0x01},
			DomainEvents: []modules.EventOut{{Schema: "s", Value: []byte{0x02}}},
			Effects:      []modules.EffectOut{{Effect: "e", Params: []byte{0x03}, IdempotencyKey: []byte{4}, IssuerRef: "i"}}},
	}
	many := &modules.Output{State: []byte{0xa0}}
	for i := 0; i < 30; i++ {
		many.DomainEvents = append(many.DomainEvents, modules.EventOut{Schema: "s", Value: []byte{byte(i)}})
		many.Effects = append(many.Effects, modules.EffectOut{Effect: "e", Params: []byte{byte(i)}})
	}
	outputs["30 of each"] = many
	for name, o := range outputs {
		t.Run(name, func(t *testing.T) {
			want := schemas.MustMarshal(o)
			if got := appendOutput([]byte{0x99}, o); !bytes.Equal(got[1:], want) || got[0] != 0x99 {
				t.Fatalf("appendOutput = %x\nlibrary      = %x", got, want)
			}
		})
	}
}

func TestInputEnvelopeDecodes(t *testing.T) {
	inputs := map[string]*modules.Input{
		"new cell":  {Version: 1, Event: modules.EventIn{Schema: "com.example/CountEvent@1", Value: []byte{0xa0}}},
		"keyed":     {Version: 1, State: []byte{0xa0}, Event: modules.EventIn{Schema: "s", Value: []byte{0x01}, Key: []byte{0x61, 0x61}}},
		"context":   {Version: 1, State: []byte{0x01}, Event: modules.EventIn{Schema: "s", Value: []byte{0x02}}, Ctx: []byte{0xa0}},
		"version 7": {Version: 7, Event: modules.EventIn{Value: []byte{0x00}}},
		"big": {Version: 1, State: bytes.Repeat([]byte{1}, 70000), Ctx: bytes.Repeat([]byte{2}, 300),
			Event: modules.EventIn{Schema: strings.Repeat("s", 100), Value: bytes.Repeat([]byte{3}, 1000), Key: bytes.Repeat([]byte{4}, 30)}},
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			var got modules.Input
			if err := decodeInput(schemas.MustMarshal(in), &got, nil); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&got, in) {
				t.Fatalf("decoded %+v\nwant %+v", got, in)
			}
		})
	}
	// Key order is not required: version first, event keys reversed.
	data, _ := hex.DecodeString("a4" + "6776657273696f6e01" + "657374617465f6" + "656576656e74a3" +
		"66736368656d616173" + "6576616c75654100" + "636b65794101" + "63637478f6")
	var got modules.Input
	if err := decodeInput(data, &got, nil); err != nil {
		t.Fatal(err)
	}
	if want := (modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: []byte{0}, Key: []byte{1}}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

func TestInputEnvelopeRefusesGarbage(t *testing.T) {
	ok := schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: []byte{0xa0}}})
	env := func(m map[string]any) []byte { return schemas.MustMarshal(m) }
	ev := map[string]any{"schema": "s", "value": []byte{0xa0}}
	bad := map[string][]byte{
		"empty":           nil,
		"not a map":       {0x80},
		"trailing":        append(append([]byte{}, ok...), 0),
		"truncated":       ok[:len(ok)-1],
		"unknown key":     env(map[string]any{"version": 1, "state": nil, "event": ev, "extra": 1}),
		"no version":      env(map[string]any{"state": nil, "event": ev}),
		"no event":        env(map[string]any{"version": 1, "state": nil}),
		"version text":    env(map[string]any{"version": "1", "state": nil, "event": ev}),
		"state text":      env(map[string]any{"version": 1, "state": "x", "event": ev}),
		"event no value":  env(map[string]any{"version": 1, "event": map[string]any{"schema": "s"}}),
		"event extra":     env(map[string]any{"version": 1, "event": map[string]any{"schema": "s", "value": []byte{0}, "x": 1}}),
		"schema bytes":    env(map[string]any{"version": 1, "event": map[string]any{"schema": []byte("s"), "value": []byte{0}}}),
		"duplicate key":   mustHex("a3" + "6776657273696f6e01" + "6776657273696f6e01" + "656576656e74a16576616c75654100"),
		"indefinite map":  mustHex("bf" + "6776657273696f6e01" + "ff"),
		"huge byte count": mustHex("a1" + "657374617465" + "5b" + "ffffffffffffffff"),
	}
	for name, data := range bad {
		t.Run(name, func(t *testing.T) {
			var in modules.Input
			if err := decodeInput(data, &in, nil); err == nil {
				t.Fatalf("%x decoded as %+v", data, in)
			}
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestContextDecodes(t *testing.T) {
	for _, k := range []sys.Context{
		{NowNs: 1 << 62, LogicalNowNs: 5, Entropy: bytes.Repeat([]byte{9}, 32), JournalHeight: 1 << 33,
			EventHash: "sha256:aa", ManifestHash: "sha256:bb", Workflow: "com.example/w@1", WorkflowHash: "sha256:cc",
			Key: []byte{0x61, 0x61}, CellMode: true},
		{Entropy: bytes.Repeat([]byte{1}, 48), Workflow: "w"},
	} {
		var c Context
		if err := decodeContext(schemas.MustMarshal(k), &c); err != nil {
			t.Fatal(err)
		}
		want := Context(k)
		if !reflect.DeepEqual(c, want) {
			t.Fatalf("decoded %+v\nwant %+v", c, want)
		}
	}
	for name, data := range map[string][]byte{
		"trailing":   append(schemas.MustMarshal(map[string]any{"now_ns": 1}), 0),
		"entropy":    schemas.MustMarshal(map[string]any{"entropy": "x"}),
		"cell_mode":  schemas.MustMarshal(map[string]any{"cell_mode": 1}),
		"workflow":   schemas.MustMarshal(map[string]any{"workflow": 1}),
		"not a map":  schemas.MustMarshal([]any{}),
		"bad skip":   mustHex("a1" + "6178" + "5a0000ffff"),
		"deep skip":  append(mustHex("a1"+"6178"), bytes.Repeat([]byte{0x81}, 100)...),
		"non-text k": mustHex("a1" + "0101"),
	} {
		var c Context
		if err := decodeContext(data, &c); err == nil {
			t.Errorf("%s: %x decoded as %+v", name, data, c)
		}
	}
}

type guestState struct {
	N int64 `cbor:"n"`
}

func guestModule() *Module {
	m := NewModule("test/guest")
	Workflow(m, "step", func(c *Ctx, st *guestState, ev Variant) (*guestState, error) {
		if st == nil {
			st = &guestState{}
		}
		switch ev.Tag {
		case "Add":
			var n int64
			if err := ev.As(&n); err != nil {
				return nil, err
			}
			st.N += n
			c.Emit("test/Added@1", n)
			c.Effect("test/e@1", map[string]any{"n": st.N}, IdempotencyKey([]byte("i")), IssuerRef("r"))
		case "Fail":
			return nil, errors.New("asked to fail")
		case "Panic":
			panic(ev.Tag)
		}
		return st, nil
	})
	return m
}

// TestGuestMatchesNative runs the same inputs through the builtin and the
// wasm guest's byte-level path: same output bytes, same fault texts.
func TestGuestMatchesNative(t *testing.T) {
	m := guestModule()
	fn := m.Builtin("id").Entrypoints["step"]
	g := &guest{mod: m}
	arm := func(tag string, v any) []byte { return schemas.MustMarshal(map[string]any{"$tag": tag, "$value": v}) }
	for name, in := range map[string]*modules.Input{
		"new":       {Version: 1, Event: modules.EventIn{Schema: "s", Value: arm("Add", 2)}},
		"existing":  {Version: 1, State: schemas.MustMarshal(guestState{N: 40}), Event: modules.EventIn{Schema: "s", Value: arm("Add", 2)}},
		"other arm": {Version: 1, State: schemas.MustMarshal(guestState{N: 1}), Event: modules.EventIn{Schema: "s", Value: arm("Other", 0)}},
		"error":     {Version: 1, Event: modules.EventIn{Schema: "s", Value: arm("Fail", 0)}},
		"panic":     {Version: 1, Event: modules.EventIn{Schema: "s", Value: arm("Panic", 0)}},
		"bad arm":   {Version: 1, Event: modules.EventIn{Schema: "s", Value: arm("Add", "two")}},
		"bad state": {Version: 1, State: []byte{0x01}, Event: modules.EventIn{Schema: "s", Value: arm("Add", 1)}},
		"bad event": {Version: 1, Event: modules.EventIn{Schema: "s", Value: []byte{0xa0}}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := fn(in)
			var want []byte
			if err != nil {
				want = append([]byte{resultFault}, err.Error()...)
			} else {
				want = append([]byte{resultOutput}, schemas.MustMarshal(out)...)
			}
			got := g.step([]byte("step"), schemas.MustMarshal(in))
			if !bytes.Equal(got, want) {
				t.Fatalf("guest %q\nnative %q", got, want)
			}
		})
	}
}

func TestGuestFaults(t *testing.T) {
	in := schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: []byte{0xa0}}})
	v2 := schemas.MustMarshal(&modules.Input{Version: 2, Event: modules.EventIn{Schema: "s", Value: []byte{0xa0}}})
	for name, c := range map[string]struct {
		g         *guest
		entry, in []byte
		want      string
	}{
		"unknown entrypoint": {&guest{mod: guestModule()}, []byte("nope"), in, `module test/guest has no entrypoint "nope"`},
		"no module":          {&guest{}, []byte("step"), in, "sdk: no module exported (call sdk.Export from the main package's init)"},
		"malformed":          {&guest{mod: guestModule()}, []byte("step"), []byte{0xa0}, "sdk: malformed input envelope: no version"},
		"empty":              {&guest{mod: guestModule()}, []byte("step"), nil, "sdk: malformed input envelope: truncated"},
		"version":            {&guest{mod: guestModule()}, []byte("step"), v2, "sdk: input envelope version 2, this module speaks 1"},
	} {
		t.Run(name, func(t *testing.T) {
			got := c.g.step(c.entry, c.in)
			if len(got) == 0 || got[0] != resultFault || string(got[1:]) != c.want {
				t.Fatalf("result %q, want fault %q", got, c.want)
			}
		})
	}
}

func TestGuestAlloc(t *testing.T) {
	g := &guest{mod: guestModule()}
	if b := g.alloc(-1); b != nil {
		t.Fatal("negative size allocated")
	}
	if b := g.alloc(0); len(b) != 1 {
		t.Fatal("a zero-size buffer has no address")
	}
	input := schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Value: []byte{0xa0}}})
	entry, in := g.alloc(4), g.alloc(int32(len(input)))
	copy(entry, "step")
	copy(in, input)
	big := g.alloc(10_000) // outgrows the arena: entry and in must stay intact
	for i := range big {
		big[i] = 0xee
	}
	if string(entry) != "step" || !bytes.Equal(in, input) || len(g.old) != 1 {
		t.Fatalf("buffers overlap or were dropped: %q, %d old arenas", entry, len(g.old))
	}
	first := &entry[0]
	if res := g.step(entry, in); res[0] != resultFault || !strings.Contains(string(res), "not a variant") {
		t.Fatalf("result %q", res)
	}
	if len(g.old) != 0 || g.used != 0 {
		t.Fatalf("after the step: %d old arenas, %d bytes used", len(g.old), g.used)
	}
	if again := g.alloc(4); &again[0] == first {
		t.Fatal("the outgrown arena was reused")
	}
	if a, b := g.alloc(1), g.alloc(1); &a[0] == &b[0] {
		t.Fatal("two live buffers share memory")
	}
}

// TestGuestReusesNothingItHandsOut: values a step keeps do not change when
// the guest's buffers are reused by the next step.
func TestGuestReusesNothingItHandsOut(t *testing.T) {
	var kept []Variant
	var keys [][]byte
	m := NewModule("keep")
	Workflow(m, "step", func(c *Ctx, st *guestState, ev Variant) (*guestState, error) {
		kept = append(kept, ev)
		keys = append(keys, c.Key())
		c.Emit("s", ev)
		return st, nil
	})
	g := &guest{mod: m}
	var wantEv, wantKey [][]byte
	for i := 0; i < 3; i++ {
		ev := schemas.MustMarshal(map[string]any{"$tag": "T", "$value": i})
		key := schemas.MustMarshal(fmt.Sprint("k", i))
		wantEv, wantKey = append(wantEv, ev), append(wantKey, key)
		input := schemas.MustMarshal(&modules.Input{Version: 1, Event: modules.EventIn{Schema: "s", Value: ev, Key: key}})
		buf := g.alloc(int32(4 + len(input)))
		copy(buf, "step")
		copy(buf[4:], input)
		if res := g.step(buf[:4], buf[4:]); res[0] != resultOutput {
			t.Fatalf("step %d: %q", i, res)
		}
	}
	for i := range kept {
		if b, _ := kept[i].MarshalCBOR(); !bytes.Equal(b, wantEv[i]) || !bytes.Equal(keys[i], wantKey[i]) {
			t.Fatalf("step %d kept %x / key %x, want %x / %x", i, b, keys[i], wantEv[i], wantKey[i])
		}
	}
}
