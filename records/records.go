package records

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Stamp is what ingress adds to an external event: the only way time and
// entropy enter the world.
type Stamp struct {
	NowNs        uint64       `cbor:"now_ns"`
	LogicalNs    uint64       `cbor:"logical_ns"`
	Entropy      []byte       `cbor:"entropy"`
	Height       uint64       `cbor:"height"`
	ManifestHash schemas.Hash `cbor:"manifest_hash"`
}

// TargetRec is one delivery of an event: a workflow and, when keyed, a key.
type TargetRec struct {
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key,omitempty"`
}

// OriginRec says which step emitted an event.
type OriginRec struct {
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key,omitempty"`
	Step     uint64 `cbor:"step"` // seq of the step record
	Depth    uint64 `cbor:"depth"`
}

// EventRec is a domain event: ingress or emitted.
type EventRec struct {
	Schema  string      `cbor:"schema"`
	Value   []byte      `cbor:"value"`
	Stamp   Stamp       `cbor:"stamp"`
	Targets []TargetRec `cbor:"targets"`
	Origin  *OriginRec  `cbor:"origin,omitempty"`
	// IdempotencyKey is the key an ingress event was submitted with, if any
	// (kernel/idempotency.go); replay rebuilds the key table from it.
	IdempotencyKey string `cbor:"idempotency_key,omitempty"`
}

// StepRec is one workflow step that succeeded.
type StepRec struct {
	Input        uint64         `cbor:"input"` // seq of the event consumed
	Workflow     string         `cbor:"workflow"`
	WorkflowHash schemas.Hash   `cbor:"workflow_hash"`
	Key          []byte         `cbor:"key,omitempty"`
	StateHash    *schemas.Hash  `cbor:"state_hash"` // nil: cell deleted / no state
	Emitted      []uint64       `cbor:"emitted,omitempty"`
	Intents      []schemas.Hash `cbor:"intents,omitempty"`
}

// FaultRec is a step that failed; the instance is failed from here on.
type FaultRec struct {
	Input    uint64 `cbor:"input"`
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key,omitempty"`
	Reason   string `cbor:"reason"`
	// Class is "" for a business fault (replay re-runs the step and must
	// reproduce it) or "environmental" (the host stopped the step; replay
	// adopts this record and does not run it).
	Class string `cbor:"class,omitempty"`
}

// IntentRec is an effect intent a step opened.
type IntentRec struct {
	Hash schemas.Hash `cbor:"hash"`
	IntentID
}

// IntentID is everything an intent's identity binds (DESIGN.md §7). Its
// canonical CBOR hash is the intent hash.
type IntentID struct {
	// World is the identity of the world that opened the intent (WorldRec),
	// so two worlds with the same manifest and inputs open intents with
	// different hashes. Empty for intents opened before the world had an
	// identity (journals written before identities existed): their hashes
	// are what they were.
	World              string       `cbor:"world,omitempty"`
	OriginWorkflow     string       `cbor:"origin_workflow"`
	OriginWorkflowHash schemas.Hash `cbor:"origin_workflow_hash"`
	OriginKey          []byte       `cbor:"origin_key"`
	Effect             string       `cbor:"effect"`
	EffectHash         schemas.Hash `cbor:"effect_hash"`
	Params             []byte       `cbor:"params"`
	IdempotencyKey     []byte       `cbor:"idempotency_key"`
	IssuerRef          string       `cbor:"issuer_ref,omitempty"`
	EmittedAt          uint64       `cbor:"emitted_at"` // seq of the step record
	Index              uint64       `cbor:"index"`      // position in the step's effects
}

// ManifestRec is a manifest made current by apply.
type ManifestRec struct {
	Hash   schemas.Hash `cbor:"hash"`
	Name   string       `cbor:"name"`
	Source []byte       `cbor:"source"`
	// Limits are the limits in force from this manifest on; nil in journals
	// written before limits were journaled (replay then uses the kernel's
	// legacy limits).
	Limits *Limits `cbor:"limits,omitempty"`
	// StateChange says which workflows this apply changed the state schema
	// of (kernel/schema_epoch.go); nil in journals written before that was
	// checked.
	StateChange *StateChangeRec `cbor:"state_change,omitempty"`
	// Pin marks an apply --pin (kernel/pins.go): the manifest became
	// current while instances were in flight, and those stay on the
	// manifest they were on. False (absent) for a plain apply, which was
	// made at quiescence and leaves only itself live.
	Pin bool `cbor:"pin,omitempty"`
}

// RetireRec retires a live manifest that is not current and is drained
// (kernel/pins.go): no instance is pinned to it any more, and its modules
// are closed.
type RetireRec struct {
	Hash schemas.Hash `cbor:"hash"`
	Name string       `cbor:"name"`
}

// MoveRec moves one cell (or unkeyed instance) pinned to an older live
// manifest onto the current one (kernel/upgrade.go, `aosd upgrade`). It
// is journaled only after the current manifest's code, replayed over the
// cell's inputs (Inputs, in journal order), reproduced every step the
// journal holds: the same state hashes and the same intents. Its intents
// in flight keep their hashes. Replay applies it without checking again.
type MoveRec struct {
	Workflow string       `cbor:"workflow"`
	Key      []byte       `cbor:"key,omitempty"`
	From     schemas.Hash `cbor:"from"` // the manifest the cell was pinned to
	To       schemas.Hash `cbor:"to"`   // the current manifest, which it moves to
	// Inputs are the seqs of the inputs whose steps were checked, oldest
	// first: the events, receipts and frames delivered to the cell since
	// it was created (or since the snapshot the check started from, when
	// the cell existed there; Since says which). A move changes no state,
	// so a cell moved before is checked over its whole life again.
	Inputs []uint64 `cbor:"inputs"`
	// Since is where the check started: "creation" or "snapshot"; "rest"
	// for a cell at rest moved through its migration, which no step had
	// to be checked for (Inputs is empty).
	Since string `cbor:"since"`
	// StateHash is the cell's state after the move (its migrated state
	// when the new module migrates it); nil when the cell has no state.
	StateHash *schemas.Hash `cbor:"state_hash,omitempty"`
	// Migrated is the hash of the state the new workflow's declared
	// migration took (the cell's state before the move), when the move
	// migrated it: replay runs the migration again on that state and must
	// reach StateHash. Absent for a move that kept the state as it was.
	Migrated *schemas.Hash `cbor:"migrated,omitempty"`
}

// StateChangeRec is what an apply journals about state schemas: the
// workflows whose state schema it changed (sorted; never null) and their new
// schema epoch. Every manifest record written by a kernel that checks state
// schemas carries one; a record without one predates the check, and replay
// then starts no epoch (those journals ran without it and must replay as
// they were written).
type StateChangeRec struct {
	Workflows []string `cbor:"workflows"`
	// Epoch is the logical time of the apply, raised to the latest logical
	// time any step ran at before it (0 when Workflows is empty). Replay
	// adopts it from the journal.
	Epoch uint64 `cbor:"epoch,omitempty"`
}

// ConfigRec is a change of the world's limits, journaled when an operator
// sets them (World.SetLimits, `aosd limits set`) or when a world opens with
// Config.Limits asking for other values than the journal's. Limits journaled
// with a manifest record (ManifestRec.Limits) need no ConfigRec.
type ConfigRec struct {
	Limits Limits `cbor:"limits"`
}

// RecoverRec is an operator's recover of a failed instance: a driver record.
// Replay re-runs it through the same checks and action, and recomputes Input,
// Skipped and Parked from the failed instance it rebuilt.
type RecoverRec struct {
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key,omitempty"`
	Action   string `cbor:"action"`
	Fault    uint64 `cbor:"fault"`             // seq of the fault record answered
	Input    uint64 `cbor:"input"`             // seq of the input whose step failed
	Skipped  uint64 `cbor:"skipped,omitempty"` // events not delivered while failed (journals from before parking)
	Stamp    Stamp  `cbor:"stamp"`             // when the operator acted
	// Parked is how many events were parked for the instance when it was
	// recovered: delivered after the action, in journal order, or dropped
	// when DropParked (the operator's explicit choice) is set.
	Parked     uint64 `cbor:"parked,omitempty"`
	DropParked bool   `cbor:"drop_parked,omitempty"`
}

// Module actions (ModuleRec.Action).
const (
	ModuleAside  = "aside"  // the module's steps kept timing out: its workflows' inputs are parked
	ModuleResume = "resume" // an operator (or an apply that replaced the module) let them run again
)

// ModuleRec sets a module aside or resumes it (kernel/aside.go). A module
// is set aside, inside the cascade of the input whose step timed out once
// too often in a row, by a decision of the host's (wall time): replay adopts
// the record and never judges it again. While it is aside, the inputs of
// the workflows it lists are parked for their instances. A resume is a
// driver record from outside, stamped like a recover: the workflows'
// parked inputs are delivered again, in journal order per instance.
type ModuleRec struct {
	Module    string       `cbor:"module"`
	Hash      schemas.Hash `cbor:"hash"` // the module def's hash when it was set aside
	Action    string       `cbor:"action"`
	Workflows []string     `cbor:"workflows"` // the workflows held (sorted; those that ran on the module when it was set aside)
	Reason    string       `cbor:"reason"`
	// Parked, on a resume, is how many parked events it delivers again (of
	// the instances that are not failed; a failed one keeps its parked
	// events until it is recovered).
	Parked uint64 `cbor:"parked,omitempty"`
	Stamp  *Stamp `cbor:"stamp,omitempty"` // a resume: when it was asked for
}

// CancelRec is an operator's cancellation of an intent in flight
// (kernel/cancel.go): a driver record, stamped at ingress like every input
// from outside. It settles the intent as a receipt would: the world takes
// no receipt, frame or claim for it afterwards, and the origin instance is
// delivered sys/EffectCancelled@1 when its event schema takes it, or fails
// (a business fault, journaled after this record) when it does not. Replay
// re-runs it through the same checks and the same delivery.
type CancelRec struct {
	Intent   schemas.Hash `cbor:"intent"`
	Effect   string       `cbor:"effect"`
	Workflow string       `cbor:"workflow"` // the intent's origin workflow
	Key      []byte       `cbor:"key,omitempty"`
	// Reason is the operator's, as given ("" when none was); By names who
	// asked, as the request said (the API has one token, so this is the
	// caller's word, not an authenticated identity).
	Reason string `cbor:"reason,omitempty"`
	By     string `cbor:"by"`
	Stamp  Stamp  `cbor:"stamp"`
}

// ReceiptRec is a receipt admitted for a pending intent.
type ReceiptRec struct {
	Receipt  receipts.SignedReceipt `cbor:"receipt"`
	Stamp    Stamp                  `cbor:"stamp"`
	Rejected string                 `cbor:"rejected,omitempty"` // payload failed validation
}

// DropRec is a validly signed receipt fenced off: its intent was not
// pending. Since drops were bounded (kernel/fence.go) the kernel journals
// one only for the first late receipt for an intent settled without a
// receipt; older journals hold drops for every receipt of an intent not
// pending, and replay re-emits whatever drops the journal holds.
type DropRec struct {
	Receipt receipts.SignedReceipt `cbor:"receipt"`
	Reason  string                 `cbor:"reason"`
}

// FrameRec is a stream frame: non-authoritative progress of one intent.
// Effect, KeyID and Signature are the signed frame's (receipts.SignedFrame);
// they are absent from frames journaled before frames were signed, and
// replay, which trusts what the journal admitted, does not verify them.
type FrameRec struct {
	// World is the world the frame was signed for; absent from frames
	// journaled before frames named their world (receipts.FrameDomainV1).
	World     string       `cbor:"world,omitempty"`
	Intent    schemas.Hash `cbor:"intent"`
	Seq       uint64       `cbor:"seq"`
	Executor  string       `cbor:"executor"`
	Payload   []byte       `cbor:"payload"`
	Stamp     Stamp        `cbor:"stamp"`
	Effect    string       `cbor:"effect,omitempty"`
	KeyID     string       `cbor:"key_id,omitempty"`
	Signature []byte       `cbor:"signature,omitempty"`
}

// Signed is the frame the record journaled.
func (fr *FrameRec) Signed() *receipts.SignedFrame {
	return &receipts.SignedFrame{Frame: receipts.Frame{World: fr.World, Intent: fr.Intent, Effect: fr.Effect, Seq: fr.Seq,
		Executor: fr.Executor, Payload: fr.Payload}, KeyID: fr.KeyID, Signature: fr.Signature}
}

// WorldRec is the world's identity: journaled once, as the first record of
// a world created since identities existed, or, in a world created before,
// at the first open by code that has them (the intents before it keep the
// hashes they were opened with; those after it bind the identity). Replay
// adopts it; nothing else ever changes it.
type WorldRec struct {
	ID string `cbor:"id"`
}

// A world's identity is WorldIDPrefix followed by the lower-case hex of
// WorldIDBytes random bytes.
const (
	WorldIDPrefix = "world:"
	WorldIDBytes  = 16
)

// CheckWorldID refuses text that is not a world identity.
func CheckWorldID(id string) error {
	raw, ok := strings.CutPrefix(id, WorldIDPrefix)
	if b, err := hex.DecodeString(raw); !ok || err != nil || len(b) != WorldIDBytes || hex.EncodeToString(b) != raw {
		return fmt.Errorf("world identity %q is not %s followed by %d lower-case hex digits", id, WorldIDPrefix, 2*WorldIDBytes)
	}
	return nil
}

// Checkpoint reasons (CheckpointRec.Reason): what asked for the snapshot.
const (
	CheckpointRecords  = "records"  // the records written since the last snapshot reached the configured count
	CheckpointTime     = "time"     // the configured interval passed
	CheckpointOperator = "operator" // `aosd snapshot` or World.Snapshot
)

// CheckpointRec marks a snapshot's point: the snapshot captures the state
// after this record, and every wasm module starts on a fresh instance here,
// live and on replay, so a world opened from the snapshot steps exactly as
// the world that took it did.
type CheckpointRec struct {
	Reason string `cbor:"reason"`
}

// SnapshotRec says the snapshot of the state after the checkpoint record at
// Checkpoint is stored in the CAS as Object (a snapshot.State, Bytes long).
// It is journaled once the object and every node it names are written, so a
// snapshot record always names a complete snapshot.
type SnapshotRec struct {
	Checkpoint uint64       `cbor:"checkpoint"`
	Object     schemas.Hash `cbor:"object"`
	Bytes      uint64       `cbor:"bytes"`
}
