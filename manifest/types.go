package manifest

import (
	"github.com/aos-kernel/aos/schemas"
)

// Manifest is a loaded, fully resolved and validated world manifest.
type Manifest struct {
	Name      string
	Hash      schemas.Hash // covers every def it uses and the routing table
	Schemas   map[string]*SchemaDef
	Modules   map[string]*ModuleDef
	Workflows map[string]*WorkflowDef
	Effects   map[string]*EffectDef // user effects and every built-in sys/ effect
	Routing   Routing
	// Registry has every schema def (user and sys/) compiled.
	Registry *schemas.Registry
	// Defs lists every def the hash covers, sorted by name: all user defs,
	// the built-in sys/ effects some workflow emits, and the built-in sys/
	// schemas the manifest refers to (directly or through other sys/ schemas).
	Defs []DefRef
	// Source is the canonical CBOR of every user def as declared (see
	// FromSource); the kernel journals it on apply so a world can be reloaded
	// without the files.
	Source []byte
}

// DefRef names one def the manifest hash covers.
type DefRef struct {
	Name string
	Kind string // "defschema", "defmodule", "defworkflow", "defeffect"
	Hash schemas.Hash
}

// SchemaDef is a "$kind":"defschema".
type SchemaDef struct {
	schemas.SchemaDef
	Hash schemas.Hash
}

// ModuleDef is a "$kind":"defmodule".
type ModuleDef struct {
	Name    string
	Runtime Runtime
	Hash    schemas.Hash
}

// Runtime says how a module runs.
//
// Kind "builtin": Go code registered with the kernel under Builtin, whose
// declared code Identity the def pins (so the manifest hash changes when the
// code's identity does).
//
// Kind "wasm": Artifact is a path relative to the manifest file; ArtifactHash
// must match its bytes; Bytes holds them once loaded. MaxMemoryMiB bounds the
// guest's linear memory (0: DefaultModuleMemoryMiB). Source optionally names
// the Go package (a directory relative to the manifest file) that `aosd build`
// compiles into Artifact.
type Runtime struct {
	Kind         string `json:"kind"`
	Builtin      string `json:"builtin,omitempty"`
	Identity     string `json:"identity,omitempty"`
	Artifact     string `json:"artifact,omitempty"`
	ArtifactHash string `json:"hash,omitempty"`
	Source       string `json:"source,omitempty"`
	MaxMemoryMiB uint32 `json:"max_memory_mib,omitempty"`
	Bytes        []byte `json:"-"`
}

// Memory limits of a wasm module's linear memory.
const (
	DefaultModuleMemoryMiB = 256
	MaxModuleMemoryMiB     = 4096
)

// MemoryMiB is the module's memory limit with the default applied.
func (r *Runtime) MemoryMiB() uint32 {
	if r.MaxMemoryMiB == 0 {
		return DefaultModuleMemoryMiB
	}
	return r.MaxMemoryMiB
}

// WorkflowDef is a "$kind":"defworkflow".
type WorkflowDef struct {
	Name           string   `json:"name"`
	State          string   `json:"state"`
	Event          string   `json:"event"`
	Context        string   `json:"context,omitempty"`
	Annotations    string   `json:"annotations,omitempty"`
	KeySchema      string   `json:"key_schema,omitempty"`
	EffectsEmitted []string `json:"effects_emitted"`
	Impl           Impl     `json:"impl"`
	// Migrate, when set, is the module's state migration: a pure function
	// from a state of one of From's schemas to a state of State, run when a
	// cell moves onto this manifest with a state State does not accept
	// (docs/upgrades.md, "Migrating state").
	Migrate *Migration `json:"migrate,omitempty"`
	Hash    schemas.Hash
}

// Migration is a defworkflow's "migrate": an entrypoint of the workflow's
// module (Impl.Module) that takes an old state, given as its event of the
// From schema it validates against, and returns the new state.
type Migration struct {
	Entrypoint string   `json:"entrypoint"`
	From       []string `json:"from"`
}

// Keyed reports whether the workflow keeps one cell per key.
func (w *WorkflowDef) Keyed() bool { return w.KeySchema != "" }

// Impl names the module and entrypoint that implement a workflow.
type Impl struct {
	Module     string `json:"module"`
	Entrypoint string `json:"entrypoint"`
}

// EffectDef is a "$kind":"defeffect".
type EffectDef struct {
	Name    string       `json:"name"`
	Params  string       `json:"params"`
	Receipt string       `json:"receipt"`
	Retry   *RetryPolicy `json:"retry,omitempty"`
	Hash    schemas.Hash
}

// RetryPolicy is how executors retry transient failures of an effect.
type RetryPolicy struct {
	MaxAttempts      int   `json:"max_attempts"`
	InitialBackoffMs int64 `json:"initial_backoff_ms"`
	MaxBackoffMs     int64 `json:"max_backoff_ms"`
}

// Routing is the "routing" object of the "$kind":"manifest" def.
type Routing struct {
	Subscriptions []Subscription `json:"subscriptions"`
}

// Subscription routes one event schema to one workflow (keyed when KeyField is set).
type Subscription struct {
	Event    string `json:"event"`
	Workflow string `json:"workflow"`
	KeyField string `json:"key_field,omitempty"`
}

// Problem is one thing wrong with a manifest: the file, the def and the JSON pointer.
type Problem struct {
	File    string
	Def     string
	Pointer string
	Msg     string
}

// Problems lists every problem a load found. It is the error Load returns.
type Problems []Problem
