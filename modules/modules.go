package modules

import (
	"context"
	"errors"
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
//
// A returned Fault is journaled verbatim as the step's failure reason; any
// other error is journaled as "step returned an error: <text>".
type StepFunc func(in *Input) (*Output, error)

// Fault is a business fault: the workflow's own code or output failed, in a
// way that replay reproduces. The kernel journals its text verbatim as the
// instance's failure reason. Runtimes return it for traps, guest panics,
// malformed output and forbidden host calls; the SDK returns it for a step's
// error or panic, with the same text on both targets.
type Fault string

func (f Fault) Error() string { return string(f) }

// EnvError is an environmental failure: the host, not the workflow, stopped
// the step (a wall-clock limit, the host out of resources, a runtime that
// could not be instantiated). Replay could not reproduce it, so the kernel
// never journals it as a business fault that replay would re-judge.
type EnvError struct {
	Module string // module def name
	Cause  string // short class: "timeout", "instantiate", "host"
	Err    error
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("module %s: environmental failure (%s): %v", e.Module, e.Cause, e.Err)
}

func (e *EnvError) Unwrap() error { return e.Err }

// IsEnvironmental reports whether err is (or wraps) an EnvError.
func IsEnvironmental(err error) bool {
	var e *EnvError
	return errors.As(err, &e)
}

// Builtin is a module implemented in Go and linked into the host.
//
// Identity is the module's declared code identity. A builtin def in a
// manifest names it ("identity"), so it enters the manifest hash: change the
// Go code, change the identity, and the manifest hash changes with it. A
// builtin whose Identity equals a wasm artifact's hash ("sha256:...") stands
// in for that artifact: the kernel runs it natively instead of the wasm, and
// journals are byte-identical (sdk builds both from one source).
type Builtin struct {
	Name        string
	Identity    string
	Entrypoints map[string]StepFunc
}

// Builtins is the registry of builtin modules, by name.
// Safe for concurrent use; registration normally happens before a world opens.
type Builtins struct {
	mu     sync.RWMutex
	byName map[string]*Builtin
	byID   map[string]*Builtin
}

// NewBuiltins returns an empty registry.
func NewBuiltins() *Builtins {
	return &Builtins{byName: map[string]*Builtin{}, byID: map[string]*Builtin{}}
}

// Add registers a builtin module. Its name and identity must be non-empty
// and not registered before, and it needs at least one entrypoint.
func (b *Builtins) Add(m Builtin) error {
	if m.Name == "" {
		return errors.New("modules: builtin with no name")
	}
	if m.Identity == "" {
		return fmt.Errorf("modules: builtin %s declares no code identity", m.Name)
	}
	if len(m.Entrypoints) == 0 {
		return fmt.Errorf("modules: builtin %s has no entrypoints", m.Name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.byName[m.Name]; ok {
		return fmt.Errorf("modules: builtin %s registered twice", m.Name)
	}
	if o, ok := b.byID[m.Identity]; ok {
		return fmt.Errorf("modules: builtins %s and %s declare the same identity %q", o.Name, m.Name, m.Identity)
	}
	c := m
	c.Entrypoints = make(map[string]StepFunc, len(m.Entrypoints))
	for k, v := range m.Entrypoints {
		c.Entrypoints[k] = v
	}
	b.byName[m.Name] = &c
	b.byID[m.Identity] = &c
	return nil
}

// MustAdd is Add for init-time registration.
func (b *Builtins) MustAdd(m Builtin) {
	if err := b.Add(m); err != nil {
		panic(err)
	}
}

// Register adds one entrypoint to builtin module (creating it with identity
// when new): shorthand for tests and small programs. A module registered
// again must declare the same identity, and an entrypoint only once.
func (b *Builtins) Register(module, identity, entrypoint string, fn StepFunc) error {
	b.mu.Lock()
	m, ok := b.byName[module]
	if ok {
		defer b.mu.Unlock()
		if m.Identity != identity {
			return fmt.Errorf("modules: builtin %s declared with identities %q and %q", module, m.Identity, identity)
		}
		if _, dup := m.Entrypoints[entrypoint]; dup {
			return fmt.Errorf("modules: builtin %s entrypoint %s registered twice", module, entrypoint)
		}
		m.Entrypoints[entrypoint] = fn
		return nil
	}
	b.mu.Unlock()
	return b.Add(Builtin{Name: module, Identity: identity, Entrypoints: map[string]StepFunc{entrypoint: fn}})
}

// MustRegister is Register for init-time registration.
func (b *Builtins) MustRegister(module, identity, entrypoint string, fn StepFunc) {
	if err := b.Register(module, identity, entrypoint, fn); err != nil {
		panic(err)
	}
}

// Get finds a builtin by name.
func (b *Builtins) Get(name string) (*Builtin, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	m, ok := b.byName[name]
	return m, ok
}

// ByIdentity finds the builtin that declares identity (a wasm artifact hash
// for a native stand-in).
func (b *Builtins) ByIdentity(identity string) (*Builtin, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	m, ok := b.byID[identity]
	return m, ok
}

// Names lists registered modules, sorted.
func (b *Builtins) Names() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]string, 0, len(b.byName))
	for n := range b.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Runner runs the entrypoints of one compiled module, keeping at most one
// warm instance. Not safe for concurrent use: the kernel's loop owns it.
type Runner interface {
	// Step runs entrypoint on in. A business fault is a Fault; a failure of
	// the host is an *EnvError. After either the warm instance is gone and
	// the next Step starts on a fresh one.
	Step(ctx context.Context, entrypoint string, in *Input) (*Output, error)
	// Reset discards the warm instance: the next Step starts fresh.
	Reset()
}

// Preparer is implemented by a Runner whose fresh instance costs far more
// than a step (a wasm module's instantiation and _initialize: about 1,000
// steps of the counter example). Prepare makes the warm instance ready, if
// there is none, under ctx; the kernel calls it before it starts the step's
// wall-clock limit, so the host building an instance (slowly, on a loaded
// machine) is never judged as the step's running time. What Prepare returns
// is what the Step would have returned for the same instantiation: a Fault
// for what the guest did, an *EnvError when ctx stopped it or the host
// failed. After an error there is no warm instance.
type Preparer interface {
	Prepare(ctx context.Context) error
}

// Compiler turns a wasm artifact into a Runner. Compiling the same hash again
// reuses the compiled code; every Runner it returns has its own instance.
type Compiler interface {
	Compile(ctx context.Context, name, hash string, code []byte, maxMemoryMiB uint32) (Runner, error)
}
