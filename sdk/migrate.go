package sdk

import (
	"fmt"
	"reflect"
	"unsafe"
)

// Migration registers migrate as entrypoint of m: a workflow's declared
// state migration (a defworkflow's "migrate", docs/upgrades.md). The kernel
// calls it with a cell's old state, the first schema of the declaration's
// "from" it validates against, and the cell's key when it moves the cell
// onto a manifest whose state schema refuses that state; it returns the new
// state, which must validate against the workflow's state schema.
//
// A migration is pure: it gets no context and can emit nothing, and the
// kernel runs it again on replay and when it checks an upgrade (the new
// step after each old step must give the migration of the old state), so
// it must give the same bytes for the same old state every time. An error,
// a panic, an old state that does not decode into O or a nil result fails
// the migration: nothing is journaled and the cell stays on its manifest
// with the reason.
func Migration[O, N any](m *Module, entrypoint string, migrate func(from string, old *O) (*N, error)) {
	oName, nName := fmt.Sprintf("%T", *new(O)), fmt.Sprintf("%T", *new(N))
	oPlan, _ := compilePlan(reflect.TypeFor[O]())
	nPlan, _ := compilePlan(reflect.TypeFor[N]())
	m.add(entrypoint, func(c *Ctx) ([]byte, string) {
		old := new(O)
		if oPlan == nil || !oPlan.decode(c.in.Event.Value, unsafe.Pointer(old)) {
			*old = *new(O)
			if err := Unmarshal(c.in.Event.Value, old); err != nil {
				return nil, fmt.Sprintf("old state (%s) does not decode into %s: %v", c.in.Event.Schema, oName, err)
			}
		}
		next, err := migrate(c.in.Event.Schema, old)
		if err != nil {
			return nil, "migration returned an error: " + err.Error()
		}
		if next == nil {
			return nil, "migration returned no state"
		}
		if nPlan != nil {
			return nPlan.encodeState(unsafe.Pointer(next)), ""
		}
		b, err := Marshal(next)
		if err != nil {
			return nil, fmt.Sprintf("state does not encode from %s: %v", nName, err)
		}
		return b, ""
	})
}
