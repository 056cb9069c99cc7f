package kernel

import (
	"github.com/aos-kernel/aos/schemas"
)

// Stamp is what ingress adds to an external event: the only way time and
// entropy enter the world.
type Stamp struct {
	NowNs        uint64       `cbor:"now_ns" json:"now_ns"`
	LogicalNs    uint64       `cbor:"logical_ns" json:"logical_ns"`
	Entropy      []byte       `cbor:"entropy" json:"entropy"`
	Height       uint64       `cbor:"height" json:"height"`
	ManifestHash schemas.Hash `cbor:"manifest_hash" json:"manifest_hash"`
}

// TargetRec is one delivery of an event: a workflow and, when keyed, a key.
type TargetRec struct {
	Workflow string `cbor:"workflow" json:"workflow"`
	Key      []byte `cbor:"key,omitempty" json:"key,omitempty"`
}

// OriginRec says which step emitted an event.
type OriginRec struct {
	Workflow string `cbor:"workflow" json:"workflow"`
	Key      []byte `cbor:"key,omitempty" json:"key,omitempty"`
	Step     uint64 `cbor:"step" json:"step"` // seq of the step record
	Depth    uint64 `cbor:"depth" json:"depth"`
}

// EventRec is a domain event: ingress or emitted.
type EventRec struct {
	Schema  string      `cbor:"schema" json:"schema"`
	Value   []byte      `cbor:"value" json:"value"`
	Stamp   Stamp       `cbor:"stamp" json:"stamp"`
	Targets []TargetRec `cbor:"targets" json:"targets"`
	Origin  *OriginRec  `cbor:"origin,omitempty" json:"origin,omitempty"`
	// IdempotencyKey is the key an ingress event was submitted with, if any
	// (idempotency.go); replay rebuilds the key table from it.
	IdempotencyKey string `cbor:"idempotency_key,omitempty" json:"idempotency_key,omitempty"`
}

// StepRec is one workflow step that succeeded.
type StepRec struct {
	Input        uint64         `cbor:"input" json:"input"` // seq of the event consumed
	Workflow     string         `cbor:"workflow" json:"workflow"`
	WorkflowHash schemas.Hash   `cbor:"workflow_hash" json:"workflow_hash"`
	Key          []byte         `cbor:"key,omitempty" json:"key,omitempty"`
	StateHash    *schemas.Hash  `cbor:"state_hash" json:"state_hash"` // nil: cell deleted / no state
	Emitted      []uint64       `cbor:"emitted,omitempty" json:"emitted,omitempty"`
	Intents      []schemas.Hash `cbor:"intents,omitempty" json:"intents,omitempty"`
}

// FaultRec is a step that failed; the instance is failed from here on.
type FaultRec struct {
	Input    uint64 `cbor:"input" json:"input"`
	Workflow string `cbor:"workflow" json:"workflow"`
	Key      []byte `cbor:"key,omitempty" json:"key,omitempty"`
	Reason   string `cbor:"reason" json:"reason"`
	// Class is "" for a business fault (replay re-runs the step and must
	// reproduce it) or "environmental" (the host stopped the step; replay
	// adopts this record and does not run it).
	Class string `cbor:"class,omitempty" json:"class,omitempty"`
}

// IntentRec is an effect intent a step opened.
type IntentRec struct {
	Hash schemas.Hash `cbor:"hash" json:"hash"`
	IntentID
}

// IntentID is everything an intent's identity binds (DESIGN.md §7). Its
// canonical CBOR hash is the intent hash.
type IntentID struct {
	OriginWorkflow     string       `cbor:"origin_workflow" json:"origin_workflow"`
	OriginWorkflowHash schemas.Hash `cbor:"origin_workflow_hash" json:"origin_workflow_hash"`
	OriginKey          []byte       `cbor:"origin_key" json:"origin_key"`
	Effect             string       `cbor:"effect" json:"effect"`
	EffectHash         schemas.Hash `cbor:"effect_hash" json:"effect_hash"`
	Params             []byte       `cbor:"params" json:"params"`
	IdempotencyKey     []byte       `cbor:"idempotency_key" json:"idempotency_key"`
	IssuerRef          string       `cbor:"issuer_ref,omitempty" json:"issuer_ref,omitempty"`
	EmittedAt          uint64       `cbor:"emitted_at" json:"emitted_at"` // seq of the step record
	Index              uint64       `cbor:"index" json:"index"`           // position in the step's effects
}

// ManifestRec is a manifest made current by apply.
type ManifestRec struct {
	Hash   schemas.Hash `cbor:"hash" json:"hash"`
	Name   string       `cbor:"name" json:"name"`
	Source []byte       `cbor:"source" json:"-"`
	// Limits are the limits in force from this manifest on; nil in journals
	// written before limits were journaled (replay then uses legacyLimits).
	Limits *Limits `cbor:"limits,omitempty" json:"limits,omitempty"`
	// StateChange says which workflows this apply changed the state schema
	// of (schema_epoch.go); nil in journals written before that was checked.
	StateChange *StateChangeRec `cbor:"state_change,omitempty" json:"state_change,omitempty"`
}

// workflowContext is sys/WorkflowContext@1.
type workflowContext struct {
	NowNs         uint64 `cbor:"now_ns"`
	LogicalNowNs  uint64 `cbor:"logical_now_ns"`
	Entropy       []byte `cbor:"entropy"`
	JournalHeight uint64 `cbor:"journal_height"`
	EventHash     string `cbor:"event_hash"`
	ManifestHash  string `cbor:"manifest_hash"`
	Workflow      string `cbor:"workflow"`
	WorkflowHash  string `cbor:"workflow_hash"`
	Key           []byte `cbor:"key,omitempty"`
	CellMode      bool   `cbor:"cell_mode"`
}
