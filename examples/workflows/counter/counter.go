// Package counter is the example world examples/manifests/counter: a running
// total per key.
package counter

import "github.com/aos-kernel/aos/sdk"

// Module is examples/counter; its one entrypoint, "step", runs
// com.example/counter.step@1.
var Module = sdk.NewModule("examples/counter")

func init() { sdk.Workflow(Module, "step", Step) }

// State is com.example/CounterState@1.
type State struct {
	Count int64 `cbor:"count"`
}

// Event is com.example/CountEvent@1.
type Event struct {
	Key string `cbor:"key"`
	By  int64  `cbor:"by"`
}

// Step adds the event's By to the cell's Count; a new cell starts at zero.
func Step(c *sdk.Ctx, st *State, ev Event) (*State, error) {
	var count int64
	if st != nil {
		count = st.Count
	}
	return &State{Count: count + ev.By}, nil
}
