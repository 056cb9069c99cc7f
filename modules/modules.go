package modules

import (
	"fmt"
	"sort"
	"sync"
)

// Input is the step input envelope:
// {version:1, state: bytes|null, event:{schema, value, key?}, ctx?: bytes}.
type Input struct {
	Version uint64  `cbor:"version"`
	State   []byte  `cbor:"state"`         // canonical CBOR of the state, nil when the cell is new
	Event   EventIn `cbor:"event"`         // the delivered event
	Ctx     []byte  `cbor:"ctx,omitempty"` // sys/WorkflowContext@1 when the workflow declares it
}

// EventIn is the event part of the input envelope.
type EventIn struct {
	Schema string `cbor:"schema"`
	Value  []byte `cbor:"value"`
	Key    []byte `cbor:"key,omitempty"`
}

// Output is the step output envelope:
// {state: bytes|null, domain_events?, effects?, ann?}.
type Output struct {
	State        []byte      `cbor:"state"` // nil deletes the cell
	DomainEvents []EventOut  `cbor:"domain_events,omitempty"`
	Effects      []EffectOut `cbor:"effects,omitempty"`
	Ann          []byte      `cbor:"ann,omitempty"`
}

// EventOut is a domain event a step emits; it re-enters ingress.
type EventOut struct {
	Schema string `cbor:"schema"`
	Value  []byte `cbor:"value"`
}

// EffectOut is an effect a step asks for.
type EffectOut struct {
	Effect         string `cbor:"effect"`
	Params         []byte `cbor:"params"`
	IdempotencyKey []byte `cbor:"idempotency_key,omitempty"`
	IssuerRef      string `cbor:"issuer_ref,omitempty"`
}

// StepFunc is a builtin workflow entrypoint. It must be deterministic: the
// same input gives the same output, with no clock, randomness or I/O.
type StepFunc func(in *Input) (*Output, error)

// Builtins maps "<builtin name>" and entrypoint to Go step functions.
// Safe for concurrent use; registration normally happens before a world opens.
type Builtins struct {
	mu  sync.RWMutex
	fns map[string]map[string]StepFunc
}

// NewBuiltins returns an empty registry.
func NewBuiltins() *Builtins { return &Builtins{fns: map[string]map[string]StepFunc{}} }

// Register adds module/entrypoint. Registering a name twice is an error.
func (b *Builtins) Register(module, entrypoint string, fn StepFunc) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.fns[module]
	if m == nil {
		m = map[string]StepFunc{}
		b.fns[module] = m
	}
	if _, ok := m[entrypoint]; ok {
		return fmt.Errorf("modules: builtin %s entrypoint %s registered twice", module, entrypoint)
	}
	m[entrypoint] = fn
	return nil
}

// MustRegister is Register for init-time registration.
func (b *Builtins) MustRegister(module, entrypoint string, fn StepFunc) {
	if err := b.Register(module, entrypoint, fn); err != nil {
		panic(err)
	}
}

// Lookup finds a step function.
func (b *Builtins) Lookup(module, entrypoint string) (StepFunc, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fn, ok := b.fns[module][entrypoint]
	return fn, ok
}

// Names lists registered modules, sorted.
func (b *Builtins) Names() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]string, 0, len(b.fns))
	for n := range b.fns {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
