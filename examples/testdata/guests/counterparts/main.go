//go:build wasip1

// Command counterparts is the counter example taken apart, for
// BenchmarkCounterStepParts: each entrypoint does a little more of a step,
// so the differences between them are what each part costs in wasm.
package main

import "github.com/aos-kernel/aos/sdk"

type state struct {
	Count int64 `cbor:"count"`
}

type event struct {
	Key string `cbor:"key"`
	By  int64  `cbor:"by"`
}

var mod = sdk.NewModule("bench/counterparts")

func init() {
	// raw: the envelope in and out, nothing decoded: the fixed cost.
	sdk.RawWorkflow(mod, "raw", func(_ *sdk.Ctx, st, _ []byte) ([]byte, error) { return st, nil })
	// decode: raw plus decoding the state and the event into Go values.
	sdk.RawWorkflow(mod, "decode", func(_ *sdk.Ctx, st, ev []byte) ([]byte, error) {
		var s state
		var e event
		if err := sdk.Unmarshal(st, &s); err != nil {
			return nil, err
		}
		if err := sdk.Unmarshal(ev, &e); err != nil {
			return nil, err
		}
		return st, nil
	})
	// full: decode, add, encode the new state (what the typed API does).
	sdk.Workflow(mod, "full", func(_ *sdk.Ctx, s *state, e event) (*state, error) {
		if s == nil {
			s = &state{}
		}
		s.Count += e.By
		return s, nil
	})
	sdk.Export(mod)
}

func main() {}
