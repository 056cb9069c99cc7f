package sdk

import (
	"fmt"
	"reflect"
	"sort"
	"unsafe"

	"github.com/aos-kernel/aos/modules"
)

// Module is a workflow module: named entrypoints, each a workflow step. The
// same Module is exported as a wasm module (Export) and registered natively
// as a builtin (Builtin), and both run the same code, so their outputs are
// byte-identical.
//
// Register every entrypoint before the module is used (in a package-level
// var initializer or init); a Module is then safe for concurrent steps.
type Module struct {
	name    string
	entries map[string]handler
}

// handler runs one step on c's input. It returns the new state's bytes, or a
// fault text; what the step emitted is in c.
type handler func(c *Ctx) (state []byte, fault string)

// NewModule returns an empty module. name is the name hosts know it by: a
// builtin def's "builtin" names it.
func NewModule(name string) *Module {
	if name == "" {
		panic("sdk: module with no name")
	}
	return &Module{name: name, entries: map[string]handler{}}
}

// Name is the module's name.
func (m *Module) Name() string { return m.name }

// Entrypoints lists the module's entrypoints, sorted.
func (m *Module) Entrypoints() []string {
	out := make([]string, 0, len(m.entries))
	for e := range m.entries {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

func (m *Module) add(entrypoint string, h handler) {
	if entrypoint == "" {
		panic(fmt.Sprintf("sdk: module %s: entrypoint with no name", m.name))
	}
	if _, ok := m.entries[entrypoint]; ok {
		panic(fmt.Sprintf("sdk: module %s: entrypoint %s registered twice", m.name, entrypoint))
	}
	m.entries[entrypoint] = h
}

// Workflow registers step as entrypoint of m.
//
// The step gets the cell's state decoded into S (nil when the cell is new,
// or the unkeyed workflow has no state yet) and the event decoded into E,
// and returns the next state: nil deletes the cell (for an unkeyed workflow,
// clears its state). Returning the state it was given keeps it (it is
// encoded again, canonically). What it emits goes through c.
//
// A returned error fails the step with the fault "step returned an error:
// <error>"; a panic with "step panicked: <value>"; a state or event that
// does not decode into S or E with a fault naming which. Each is journaled
// as the instance's failure reason, the same text on every target.
//
// Use Variant as E for a variant event schema (and to receive receipts).
func Workflow[S, E any](m *Module, entrypoint string, step func(c *Ctx, state *S, event E) (*S, error)) {
	sName, eName := fmt.Sprintf("%T", *new(S)), fmt.Sprintf("%T", *new(E))
	// Compiled once here; nil for a type the plans do not cover, which
	// then goes through the library (codec.go).
	sPlan, _ := compilePlan(reflect.TypeFor[S]())
	ePlan, _ := compilePlan(reflect.TypeFor[E]())
	m.add(entrypoint, func(c *Ctx) ([]byte, string) {
		var st *S
		if c.in.State != nil {
			st = new(S)
			if sPlan == nil || !sPlan.decode(c.in.State, unsafe.Pointer(st)) {
				*st = *new(S) // the library decodes into a zero value
				if err := Unmarshal(c.in.State, st); err != nil {
					return nil, fmt.Sprintf("state does not decode into %s: %v", sName, err)
				}
			}
		}
		ev := new(E)
		if ePlan == nil || !ePlan.decode(c.in.Event.Value, unsafe.Pointer(ev)) {
			*ev = *new(E)
			if err := Unmarshal(c.in.Event.Value, ev); err != nil {
				return nil, fmt.Sprintf("event does not decode into %s: %v", eName, err)
			}
		}
		next, err := step(c, st, *ev)
		if err != nil {
			return nil, stepError(err)
		}
		if next == nil {
			return nil, ""
		}
		if sPlan != nil {
			return sPlan.encodeState(unsafe.Pointer(next)), ""
		}
		b, err := Marshal(next)
		if err != nil {
			return nil, fmt.Sprintf("state does not encode from %s: %v", sName, err)
		}
		return b, ""
	})
}

// RawWorkflow registers step as entrypoint of m with the state and event as
// canonical CBOR: state is nil for a new cell, and the step returns the next
// state's canonical CBOR (nil deletes the cell). Errors and panics fault as
// with Workflow. The kernel validates the returned state against the
// workflow's state schema. state and event are the step's input buffer:
// valid during the step only, never to be written; copy what you keep.
func RawWorkflow(m *Module, entrypoint string, step func(c *Ctx, state, event []byte) ([]byte, error)) {
	m.add(entrypoint, func(c *Ctx) ([]byte, string) {
		next, err := step(c, c.in.State, c.in.Event.Value)
		if err != nil {
			return nil, stepError(err)
		}
		return next, ""
	})
}

func stepError(err error) string { return "step returned an error: " + err.Error() }

// Builtin returns m as a builtin module under its name, declaring identity
// as its code identity (a builtin def in a manifest names both; an identity
// equal to the hash of m's wasm build lets the builtin stand in for it).
// Every entrypoint becomes a StepFunc that returns a modules.Fault when the
// step fails.
func (m *Module) Builtin(identity string) modules.Builtin {
	b := modules.Builtin{Name: m.name, Identity: identity, Entrypoints: make(map[string]modules.StepFunc, len(m.entries))}
	for e, h := range m.entries {
		b.Entrypoints[e] = func(in *modules.Input) (*modules.Output, error) {
			f := &frame{c: Ctx{in: in}}
			if fault := run(h, &f.c, &f.out); fault != "" {
				return nil, modules.Fault(fault)
			}
			return &f.out, nil
		}
	}
	return b
}

// frame is one native step's context and output, allocated together.
type frame struct {
	c   Ctx
	out modules.Output
}

// run runs h on c's input and fills out, or returns the step's fault: the
// one code path both targets take.
func run(h handler, c *Ctx, out *modules.Output) (fault string) {
	defer func() {
		if r := recover(); r != nil {
			// Only the value: a stack trace differs between builds and targets.
			fault = fmt.Sprintf("step panicked: %v", r)
		}
	}()
	state, fault := h(c)
	if fault != "" {
		return fault
	}
	if c.err != nil {
		return c.err.Error()
	}
	*out = modules.Output{State: state, DomainEvents: c.events, Effects: c.effects, Ann: c.ann}
	return ""
}
