package sdk

import (
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

type benchState struct {
	Count int64 `cbor:"count"`
}

type benchEvent struct {
	Key string `cbor:"key"`
	By  int64  `cbor:"by"`
}

func benchModule() *Module {
	m := NewModule("bench")
	Workflow(m, "counter", func(c *Ctx, st *benchState, ev benchEvent) (*benchState, error) {
		var n int64
		if st != nil {
			n = st.Count
		}
		return &benchState{Count: n + ev.By}, nil
	})
	Workflow(m, "timer", func(c *Ctx, st *benchState, ev Variant) (*benchState, error) {
		wc, err := c.Context()
		if err != nil {
			return nil, err
		}
		c.Timer(wc.LogicalNowNs+1, "k", IssuerRef("r"))
		return st, nil
	})
	RawWorkflow(m, "raw", func(c *Ctx, state, event []byte) ([]byte, error) { return state, nil })
	return m
}

func benchInputs() map[string]*modules.Input {
	ctx := schemas.MustMarshal(sys.Context{NowNs: 1 << 60, LogicalNowNs: 1 << 50, Entropy: make([]byte, 32),
		JournalHeight: 1000, EventHash: "sha256:" + string(make([]byte, 64)), ManifestHash: "sha256:m",
		Workflow: "com.example/counter.step@1", WorkflowHash: "sha256:w", Key: []byte{0x61, 0x61}, CellMode: true})
	counter := &modules.Input{Version: 1, State: schemas.MustMarshal(benchState{Count: 41}), Ctx: ctx,
		Event: modules.EventIn{Schema: "com.example/CountEvent@1", Value: schemas.MustMarshal(benchEvent{Key: "a", By: 1}), Key: []byte{0x61, 0x61}}}
	timer := *counter
	timer.Event.Value = schemas.MustMarshal(map[string]any{"$tag": "Set", "$value": map[string]any{"reminder_id": "r"}})
	return map[string]*modules.Input{"counter": counter, "timer": &timer, "raw": counter}
}

// BenchmarkNativeStep is the sdk's per-step cost in a builtin: decode state
// and event into author types, run the step, encode the state (and, for
// timer, read the context and emit an effect).
func BenchmarkNativeStep(b *testing.B) {
	m := benchModule()
	bi := m.Builtin("bench")
	for entry, in := range benchInputs() {
		b.Run(entry, func(b *testing.B) {
			fn := bi.Entrypoints[entry]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fn(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGuestStep is what a wasm guest does per step, run natively:
// decode the input envelope, step, encode the output envelope.
func BenchmarkGuestStep(b *testing.B) {
	g := &guest{mod: benchModule()}
	for entry, in := range benchInputs() {
		data := schemas.MustMarshal(in)
		b.Run(entry, func(b *testing.B) {
			e := []byte(entry)
			b.ReportAllocs()
			for b.Loop() {
				if r := g.step(e, data); r[0] != resultOutput {
					b.Fatalf("%s", r[1:])
				}
			}
		})
	}
}
