package views

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The journal's export (GET /v1/journal, `aosd journal --json`): one JSON
// object per record, {"body", "kind", "seq"}, whose body holds every field
// of the record (package records) under its own name. It is lossless:
// ParseRecord reads a line back into the record, its body byte for byte
// the journaled one (TestExportLossless, for every kind journal.Kinds
// lists), so an export is enough to re-verify receipts, frames and intent
// hashes offline (verify.go, `aosd journal verify --file`).
//
// Encodings (docs/API.md):
//   - hashes as "sha256:<hex>", seqs and numbers as JSON numbers;
//   - raw bytes (a stamp's entropy, a signature, an intent's idempotency
//     key, a manifest's source) as standard padded base64, null for none;
//   - a canonical CBOR value (an event's value, an intent's params, a
//     frame's payload) as its JSON form X, plus X_cbor (the standard base64
//     of the bytes) whenever that JSON does not convert back (schemaless,
//     as receipts.PayloadFromJSON converts) to exactly the bytes: a value
//     holding byte strings, say, reads as JSON with base64 text and is
//     exact in X_cbor. X is left out when the value has no JSON form;
//   - a key as records.KeyJSON renders it (null for none), plus key_cbor
//     on the same rule;
//   - the signed receipt inside a receipt or drop record exactly in the
//     form executors post it (receipts.ToJSON: payload or payload_cbor),
//     so any ed25519 library can re-check it as docs/receipts.md says.

// JournalEntry is one exported journal record: its seq, kind and body, the
// body one of the *Body types below for the kinds records knows, else the
// record's CBOR as JSON. Fields are declared in name order, as the JSON has
// always listed them.
type JournalEntry struct {
	Body any    `json:"body"`
	Kind string `json:"kind"`
	Seq  uint64 `json:"seq"`
}

// StampBody is a stamp (records.Stamp): ingress time, entropy, height and
// manifest.
type StampBody struct {
	Entropy      []byte       `json:"entropy"`
	Height       uint64       `json:"height"`
	LogicalNs    uint64       `json:"logical_ns"`
	ManifestHash schemas.Hash `json:"manifest_hash"`
	NowNs        uint64       `json:"now_ns"`
}

// TargetBody is one delivery of an event (records.TargetRec).
type TargetBody struct {
	Key      json.RawMessage `json:"key"`
	KeyCBOR  *[]byte         `json:"key_cbor,omitempty"`
	Workflow string          `json:"workflow"`
}

// OriginBody says which step emitted an event (records.OriginRec).
type OriginBody struct {
	Depth    uint64          `json:"depth"`
	Key      json.RawMessage `json:"key"`
	KeyCBOR  *[]byte         `json:"key_cbor,omitempty"`
	Step     uint64          `json:"step"`
	Workflow string          `json:"workflow"`
}

// EventBody is an event record (records.EventRec).
type EventBody struct {
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Origin         *OriginBody     `json:"origin,omitempty"`
	Schema         string          `json:"schema"`
	Stamp          StampBody       `json:"stamp"`
	Targets        []TargetBody    `json:"targets"`
	Value          json.RawMessage `json:"value,omitempty"`
	ValueCBOR      *[]byte         `json:"value_cbor,omitempty"`
}

// StepBody is a step record (records.StepRec).
type StepBody struct {
	Emitted      []uint64        `json:"emitted"`
	Input        uint64          `json:"input"`
	Intents      []schemas.Hash  `json:"intents"`
	Key          json.RawMessage `json:"key"`
	KeyCBOR      *[]byte         `json:"key_cbor,omitempty"`
	StateHash    *schemas.Hash   `json:"state_hash"`
	Workflow     string          `json:"workflow"`
	WorkflowHash schemas.Hash    `json:"workflow_hash"`
}

// FaultBody is a fault record (records.FaultRec).
type FaultBody struct {
	Class    string          `json:"class,omitempty"`
	Input    uint64          `json:"input"`
	Key      json.RawMessage `json:"key"`
	KeyCBOR  *[]byte         `json:"key_cbor,omitempty"`
	Reason   string          `json:"reason"`
	Workflow string          `json:"workflow"`
}

// IntentBody is an intent record (records.IntentRec): its hash and every
// field the hash binds.
type IntentBody struct {
	Effect             string          `json:"effect"`
	EffectHash         schemas.Hash    `json:"effect_hash"`
	EmittedAt          uint64          `json:"emitted_at"`
	Hash               schemas.Hash    `json:"hash"`
	IdempotencyKey     []byte          `json:"idempotency_key"`
	Index              uint64          `json:"index"`
	IssuerRef          string          `json:"issuer_ref,omitempty"`
	OriginKey          json.RawMessage `json:"origin_key"`
	OriginKeyCBOR      *[]byte         `json:"origin_key_cbor,omitempty"`
	OriginWorkflow     string          `json:"origin_workflow"`
	OriginWorkflowHash schemas.Hash    `json:"origin_workflow_hash"`
	Params             json.RawMessage `json:"params,omitempty"`
	ParamsCBOR         *[]byte         `json:"params_cbor,omitempty"`
	// World is the world the intent binds (absent for intents opened
	// before the world had an identity).
	World string `json:"world,omitempty"`
}

// ManifestBody is a manifest record (records.ManifestRec). SourceBytes is
// len(Source), kept from when the source was counted, not shown.
type ManifestBody struct {
	Hash        schemas.Hash     `json:"hash"`
	Limits      *Limits          `json:"limits,omitempty"`
	Name        string           `json:"name"`
	Pin         bool             `json:"pin,omitempty"` // an apply --pin
	Source      []byte           `json:"source"`
	SourceBytes int              `json:"source_bytes"`
	StateChange *StateChangeBody `json:"state_change,omitempty"`
}

// StateChangeBody is what an apply journaled about state schemas
// (records.StateChangeRec).
type StateChangeBody struct {
	Epoch     uint64   `json:"epoch,omitempty"`
	Workflows []string `json:"workflows"`
}

// ConfigBody is a config record (records.ConfigRec).
type ConfigBody struct {
	Limits Limits `json:"limits"`
}

// RecoverBody is a recover record (records.RecoverRec).
type RecoverBody struct {
	Action     string          `json:"action"`
	DropParked bool            `json:"drop_parked"`
	Fault      uint64          `json:"fault"`
	Input      uint64          `json:"input"`
	Key        json.RawMessage `json:"key"`
	KeyCBOR    *[]byte         `json:"key_cbor,omitempty"`
	Parked     uint64          `json:"parked"`
	Skipped    uint64          `json:"skipped"`
	Stamp      StampBody       `json:"stamp"`
	Workflow   string          `json:"workflow"`
}

// ModuleBody is a module record (records.ModuleRec): a module set aside
// (its steps kept timing out) or resumed.
type ModuleBody struct {
	Action    string       `json:"action"` // aside or resume
	Hash      schemas.Hash `json:"hash"`
	Module    string       `json:"module"`
	Parked    uint64       `json:"parked"`
	Reason    string       `json:"reason"`
	Stamp     *StampBody   `json:"stamp"` // a resume's; null for a set-aside
	Workflows []string     `json:"workflows"`
}

// RetireBody is a retire record (records.RetireRec): a drained live
// manifest retired.
type RetireBody struct {
	Hash schemas.Hash `json:"hash"`
	Name string       `json:"name"`
}

// CancelBody is a cancel record (records.CancelRec): an operator cancelled
// an intent in flight.
type CancelBody struct {
	By       string          `json:"by"`
	Effect   string          `json:"effect"`
	Intent   schemas.Hash    `json:"intent"`
	Key      json.RawMessage `json:"key"`
	KeyCBOR  *[]byte         `json:"key_cbor,omitempty"`
	Reason   string          `json:"reason"`
	Stamp    StampBody       `json:"stamp"`
	Workflow string          `json:"workflow"`
}

// MoveBody is a move record (records.MoveRec): a cell moved from the
// manifest it was pinned to onto the current one after a replay check.
type MoveBody struct {
	From      schemas.Hash    `json:"from"`
	Inputs    []uint64        `json:"inputs"`
	Key       json.RawMessage `json:"key"`
	KeyCBOR   *[]byte         `json:"key_cbor,omitempty"`
	Migrated  *schemas.Hash   `json:"migrated,omitempty"` // the state the workflow's migration took
	Since     string          `json:"since"`
	StateHash *schemas.Hash   `json:"state_hash,omitempty"`
	To        schemas.Hash    `json:"to"`
	Workflow  string          `json:"workflow"`
}

// CheckpointBody is a checkpoint record (records.CheckpointRec): a
// snapshot's point, and what asked for it.
type CheckpointBody struct {
	Reason string `json:"reason"` // records, time or operator
}

// SnapshotBody is a snapshot record (records.SnapshotRec): the snapshot of
// the state after the checkpoint record at Checkpoint is stored as Object.
type SnapshotBody struct {
	Bytes      uint64       `json:"bytes"`
	Checkpoint uint64       `json:"checkpoint"`
	Object     schemas.Hash `json:"object"`
}

// ReceiptBody is a receipt record (records.ReceiptRec): the signed receipt
// as executors post it (receipts.ToJSON), when it was admitted, and why its
// payload was rejected, if it was.
type ReceiptBody struct {
	Receipt  json.RawMessage `json:"receipt"`
	Rejected string          `json:"rejected,omitempty"`
	Stamp    StampBody       `json:"stamp"`
}

// DropBody is a drop record (records.DropRec): a validly signed receipt
// fenced off, as executors post it, and why.
type DropBody struct {
	Reason  string          `json:"reason"`
	Receipt json.RawMessage `json:"receipt"`
}

// WorldBody is the world record (records.WorldRec): the world's identity.
type WorldBody struct {
	ID string `json:"id"`
}

// FrameBody is a frame record (records.FrameRec): a signed stream frame
// and when it was admitted. Effect, KeyID and Signature are absent from
// frames journaled before frames were signed, and World from frames
// journaled before frames named their world.
type FrameBody struct {
	Effect      string          `json:"effect,omitempty"`
	Executor    string          `json:"executor"`
	Intent      schemas.Hash    `json:"intent"`
	KeyID       string          `json:"key_id,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadCBOR *[]byte         `json:"payload_cbor,omitempty"`
	Seq         uint64          `json:"seq"`
	Signature   []byte          `json:"signature,omitempty"`
	Stamp       StampBody       `json:"stamp"`
	World       string          `json:"world,omitempty"`
}

// Describe renders a journal record as its export line's object: every
// field, values and keys shown as JSON where that is exact (see the top of
// this file).
func Describe(r journal.Record) (*JournalEntry, error) {
	rec, err := records.Decode(r)
	if err != nil {
		return nil, err
	}
	var body any
	switch rec := rec.(type) {
	case *records.EventRec:
		b := &EventBody{IdempotencyKey: rec.IdempotencyKey, Schema: rec.Schema, Stamp: stampBody(&rec.Stamp),
			Targets: make([]TargetBody, len(rec.Targets))}
		if rec.Targets == nil {
			b.Targets = nil
		}
		b.Value, b.ValueCBOR = valueOut(rec.Value)
		for i, t := range rec.Targets {
			b.Targets[i].Workflow = t.Workflow
			b.Targets[i].Key, b.Targets[i].KeyCBOR = keyOut(t.Key)
		}
		if o := rec.Origin; o != nil {
			b.Origin = &OriginBody{Depth: o.Depth, Step: o.Step, Workflow: o.Workflow}
			b.Origin.Key, b.Origin.KeyCBOR = keyOut(o.Key)
		}
		body = b
	case *records.StepRec:
		b := &StepBody{Emitted: rec.Emitted, Input: rec.Input, Intents: rec.Intents,
			StateHash: rec.StateHash, Workflow: rec.Workflow, WorkflowHash: rec.WorkflowHash}
		b.Key, b.KeyCBOR = keyOut(rec.Key)
		body = b
	case *records.FaultRec:
		b := &FaultBody{Class: rec.Class, Input: rec.Input, Reason: rec.Reason, Workflow: rec.Workflow}
		b.Key, b.KeyCBOR = keyOut(rec.Key)
		body = b
	case *records.IntentRec:
		b := &IntentBody{Effect: rec.Effect, EffectHash: rec.EffectHash, EmittedAt: rec.EmittedAt, Hash: rec.Hash,
			IdempotencyKey: rec.IdempotencyKey, Index: rec.Index, IssuerRef: rec.IssuerRef,
			OriginWorkflow: rec.OriginWorkflow, OriginWorkflowHash: rec.OriginWorkflowHash, World: rec.World}
		b.OriginKey, b.OriginKeyCBOR = keyOut(rec.OriginKey)
		b.Params, b.ParamsCBOR = valueOut(rec.Params)
		body = b
	case *records.ManifestRec:
		b := &ManifestBody{Hash: rec.Hash, Name: rec.Name, Pin: rec.Pin, Source: rec.Source, SourceBytes: len(rec.Source)}
		if rec.Limits != nil {
			lim := Limits(*rec.Limits)
			b.Limits = &lim
		}
		if sc := rec.StateChange; sc != nil {
			b.StateChange = &StateChangeBody{Epoch: sc.Epoch, Workflows: sc.Workflows}
		}
		body = b
	case *records.ConfigRec:
		body = &ConfigBody{Limits: Limits(rec.Limits)}
	case *records.RecoverRec:
		b := &RecoverBody{Action: rec.Action, DropParked: rec.DropParked, Fault: rec.Fault, Input: rec.Input,
			Parked: rec.Parked, Skipped: rec.Skipped, Stamp: stampBody(&rec.Stamp), Workflow: rec.Workflow}
		b.Key, b.KeyCBOR = keyOut(rec.Key)
		body = b
	case *records.ModuleRec:
		b := &ModuleBody{Action: rec.Action, Hash: rec.Hash, Module: rec.Module, Parked: rec.Parked, Reason: rec.Reason,
			Workflows: rec.Workflows}
		if rec.Stamp != nil {
			sb := stampBody(rec.Stamp)
			b.Stamp = &sb
		}
		body = b
	case *records.RetireRec:
		body = &RetireBody{Hash: rec.Hash, Name: rec.Name}
	case *records.CancelRec:
		b := &CancelBody{By: rec.By, Effect: rec.Effect, Intent: rec.Intent, Reason: rec.Reason, Stamp: stampBody(&rec.Stamp),
			Workflow: rec.Workflow}
		b.Key, b.KeyCBOR = keyOut(rec.Key)
		body = b
	case *records.MoveRec:
		b := &MoveBody{From: rec.From, Inputs: rec.Inputs, Migrated: rec.Migrated, Since: rec.Since, StateHash: rec.StateHash, To: rec.To, Workflow: rec.Workflow}
		b.Key, b.KeyCBOR = keyOut(rec.Key)
		body = b
	case *records.CheckpointRec:
		body = &CheckpointBody{Reason: rec.Reason}
	case *records.SnapshotRec:
		body = &SnapshotBody{Bytes: rec.Bytes, Checkpoint: rec.Checkpoint, Object: rec.Object}
	case *records.WorldRec:
		body = &WorldBody{ID: rec.ID}
	case *records.ReceiptRec:
		sr, err := receipts.ToJSON(rec.Receipt)
		if err != nil {
			return nil, err
		}
		body = &ReceiptBody{Receipt: sr, Rejected: rec.Rejected, Stamp: stampBody(&rec.Stamp)}
	case *records.DropRec:
		sr, err := receipts.ToJSON(rec.Receipt)
		if err != nil {
			return nil, err
		}
		body = &DropBody{Reason: rec.Reason, Receipt: sr}
	case *records.FrameRec:
		b := &FrameBody{Effect: rec.Effect, Executor: rec.Executor, Intent: rec.Intent, KeyID: rec.KeyID,
			Seq: rec.Seq, Signature: rec.Signature, Stamp: stampBody(&rec.Stamp), World: rec.World}
		b.Payload, b.PayloadCBOR = valueOut(rec.Payload)
		body = b
	default:
		js, err := schemas.ToJSON(r.Body)
		if err != nil {
			return nil, err
		}
		body = json.RawMessage(js)
	}
	return &JournalEntry{Body: body, Kind: string(r.Kind), Seq: r.Seq}, nil
}

func stampBody(s *records.Stamp) StampBody {
	return StampBody{Entropy: s.Entropy, Height: s.Height, LogicalNs: s.LogicalNs, ManifestHash: s.ManifestHash, NowNs: s.NowNs}
}

func stampRec(s *StampBody) records.Stamp {
	return records.Stamp{Entropy: s.Entropy, Height: s.Height, LogicalNs: s.LogicalNs, ManifestHash: s.ManifestHash, NowNs: s.NowNs}
}

// valueOut renders a canonical CBOR value field: its JSON form (nil when it
// has none, or when b is nil: the field is then left out) and, when that
// form does not convert back to exactly b, b itself for the _cbor field.
func valueOut(b []byte) (json.RawMessage, *[]byte) {
	if b == nil {
		return nil, nil
	}
	js, err := schemas.ToJSON(b)
	if err != nil {
		return nil, &b
	}
	if back, err := receipts.PayloadFromJSON(js); err != nil || !bytes.Equal(back, b) {
		return js, &b
	}
	return js, nil
}

// keyOut renders a key field: records.KeyJSON's form (null for no key)
// and, when that does not read back as exactly key (keyFromJSON), key
// itself for the _cbor field.
func keyOut(key []byte) (json.RawMessage, *[]byte) {
	js := records.KeyJSON(key)
	if back, err := keyFromJSON(js); err != nil || !bytes.Equal(back, key) || (back == nil) != (key == nil) {
		return js, &key
	}
	return js, nil
}

// keyFromJSON reads a key's JSON form: null is no key.
func keyFromJSON(js json.RawMessage) ([]byte, error) {
	if js == nil || string(js) == "null" {
		return nil, nil
	}
	return receipts.PayloadFromJSON(js)
}

// valueIn is valueOut read back: the _cbor bytes when given (and then the
// JSON form, if any, must be the one those bytes render as, so the readable
// and the exact value cannot disagree), else the JSON form converted, else
// nil.
func valueIn(field string, js json.RawMessage, raw *[]byte) ([]byte, error) {
	if raw != nil {
		b := emptyIfNil(*raw)
		if js != nil {
			want, err := schemas.ToJSON(b)
			if err != nil || !sameJSON(js, want) {
				return nil, fmt.Errorf("%s does not match %s_cbor", field, field)
			}
		}
		return b, nil
	}
	if js == nil {
		return nil, nil
	}
	b, err := receipts.PayloadFromJSON(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return b, nil
}

// keyIn is keyOut read back, as valueIn.
func keyIn(field string, js json.RawMessage, raw *[]byte) ([]byte, error) {
	if raw != nil {
		b := emptyIfNil(*raw)
		if js != nil && !sameJSON(js, records.KeyJSON(b)) {
			return nil, fmt.Errorf("%s does not match %s_cbor", field, field)
		}
		return b, nil
	}
	b, err := keyFromJSON(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	return b, nil
}

// emptyIfNil is b, or an empty slice for nil: a _cbor field that is present
// holds bytes, if none.
func emptyIfNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// sameJSON reports whether two JSON texts are equal once compacted and
// HTML-escaped alike (the export escapes <, > and & in strings; a
// rendering may not).
func sameJSON(a, b []byte) bool {
	return bytes.Equal(normalJSON(a), normalJSON(b))
}

func normalJSON(js []byte) []byte {
	var c, e bytes.Buffer
	if json.Compact(&c, js) != nil {
		return nil
	}
	json.HTMLEscape(&e, c.Bytes())
	return e.Bytes()
}

// streamError is the error line an export stream ends with when it fails
// midway (the API's error body, package api).
type streamError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Where   string `json:"where"`
}

// ErrExport is wrapped by every error of ParseRecord.
var ErrExport = errors.New("views: not a journal export line")

// ParseRecord reads one line of the journal's export back into the
// journaled record: its seq, kind and canonical CBOR body, byte for byte
// what the journal holds for a line Describe wrote. The line must be one
// JSON object with seq, kind and body, no duplicate keys at any depth and
// no field the export does not write; a kind this build does not know is
// refused. Errors wrap ErrExport and name the seq and the field.
func ParseRecord(line []byte) (journal.Record, error) {
	// Decode parses the whole line with jsonx first, so a duplicate key at
	// any depth (body included) is refused here, before any field is read.
	var top struct {
		Body  json.RawMessage `json:"body"`
		Kind  *string         `json:"kind"`
		Seq   *uint64         `json:"seq"`
		Error *streamError    `json:"error"`
	}
	if err := Decode(line, &top); err != nil {
		return journal.Record{}, fmt.Errorf("%w: %v", ErrExport, err)
	}
	if top.Error != nil {
		return journal.Record{}, fmt.Errorf("%w: the export's stream ended in an error: %s: %s", ErrExport, top.Error.Code, top.Error.Message)
	}
	if top.Seq == nil || top.Kind == nil || top.Body == nil {
		return journal.Record{}, fmt.Errorf("%w: want an object with seq, kind and body", ErrExport)
	}
	r := journal.Record{Seq: *top.Seq, Kind: journal.Kind(*top.Kind)}
	body, err := parseBody(r.Kind, top.Body)
	if err != nil {
		return journal.Record{}, fmt.Errorf("%w: seq %d (%s): %v", ErrExport, r.Seq, r.Kind, err)
	}
	r.Body = body
	return r, nil
}

// parseBody reads a body of kind back into its record's canonical CBOR.
func parseBody(kind journal.Kind, js json.RawMessage) ([]byte, error) {
	rec, err := parseRec(kind, js)
	if err != nil {
		return nil, err
	}
	return schemas.Marshal(rec)
}

func parseRec(kind journal.Kind, js json.RawMessage) (any, error) {
	into := func(v any) error {
		if err := Decode(js, v); err != nil {
			return fmt.Errorf("body: %v", err)
		}
		return nil
	}
	var err error
	switch kind {
	case journal.KindEvent:
		var b EventBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.EventRec{Schema: b.Schema, Stamp: stampRec(&b.Stamp), IdempotencyKey: b.IdempotencyKey}
		if rec.Value, err = valueIn("value", b.Value, b.ValueCBOR); err != nil {
			return nil, err
		}
		if b.Targets != nil {
			rec.Targets = make([]records.TargetRec, len(b.Targets))
		}
		for i, t := range b.Targets {
			rec.Targets[i].Workflow = t.Workflow
			if rec.Targets[i].Key, err = keyIn(fmt.Sprintf("targets/%d/key", i), t.Key, t.KeyCBOR); err != nil {
				return nil, err
			}
		}
		if o := b.Origin; o != nil {
			rec.Origin = &records.OriginRec{Workflow: o.Workflow, Step: o.Step, Depth: o.Depth}
			if rec.Origin.Key, err = keyIn("origin/key", o.Key, o.KeyCBOR); err != nil {
				return nil, err
			}
		}
		return rec, nil
	case journal.KindStep:
		var b StepBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.StepRec{Input: b.Input, Workflow: b.Workflow, WorkflowHash: b.WorkflowHash,
			StateHash: b.StateHash, Emitted: b.Emitted, Intents: b.Intents}
		rec.Key, err = keyIn("key", b.Key, b.KeyCBOR)
		return rec, err
	case journal.KindFault:
		var b FaultBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.FaultRec{Input: b.Input, Workflow: b.Workflow, Reason: b.Reason, Class: b.Class}
		rec.Key, err = keyIn("key", b.Key, b.KeyCBOR)
		return rec, err
	case journal.KindIntent:
		var b IntentBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.IntentRec{Hash: b.Hash, IntentID: records.IntentID{World: b.World, OriginWorkflow: b.OriginWorkflow,
			OriginWorkflowHash: b.OriginWorkflowHash, Effect: b.Effect, EffectHash: b.EffectHash,
			IdempotencyKey: b.IdempotencyKey, IssuerRef: b.IssuerRef, EmittedAt: b.EmittedAt, Index: b.Index}}
		if rec.OriginKey, err = keyIn("origin_key", b.OriginKey, b.OriginKeyCBOR); err != nil {
			return nil, err
		}
		rec.Params, err = valueIn("params", b.Params, b.ParamsCBOR)
		return rec, err
	case journal.KindManifest:
		var b ManifestBody
		if err := into(&b); err != nil {
			return nil, err
		}
		if b.SourceBytes != len(b.Source) {
			return nil, fmt.Errorf("source_bytes is %d, but source holds %d bytes", b.SourceBytes, len(b.Source))
		}
		rec := &records.ManifestRec{Hash: b.Hash, Name: b.Name, Source: b.Source, Pin: b.Pin}
		if b.Limits != nil {
			lim := records.Limits(*b.Limits)
			rec.Limits = &lim
		}
		if sc := b.StateChange; sc != nil {
			rec.StateChange = &records.StateChangeRec{Workflows: sc.Workflows, Epoch: sc.Epoch}
		}
		return rec, nil
	case journal.KindConfig:
		var b ConfigBody
		if err := into(&b); err != nil {
			return nil, err
		}
		return &records.ConfigRec{Limits: records.Limits(b.Limits)}, nil
	case journal.KindRecover:
		var b RecoverBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.RecoverRec{Workflow: b.Workflow, Action: b.Action, Fault: b.Fault, Input: b.Input,
			Skipped: b.Skipped, Stamp: stampRec(&b.Stamp), Parked: b.Parked, DropParked: b.DropParked}
		rec.Key, err = keyIn("key", b.Key, b.KeyCBOR)
		return rec, err
	case journal.KindModule:
		var b ModuleBody
		if err := into(&b); err != nil {
			return nil, err
		}
		if b.Workflows == nil {
			return nil, errors.New("body: workflows: missing (a module record lists them, [] for none)")
		}
		rec := &records.ModuleRec{Module: b.Module, Hash: b.Hash, Action: b.Action, Workflows: b.Workflows,
			Reason: b.Reason, Parked: b.Parked}
		if b.Stamp != nil {
			st := stampRec(b.Stamp)
			rec.Stamp = &st
		}
		return rec, nil
	case journal.KindRetire:
		var b RetireBody
		if err := into(&b); err != nil {
			return nil, err
		}
		return &records.RetireRec{Hash: b.Hash, Name: b.Name}, nil
	case journal.KindCancel:
		var b CancelBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.CancelRec{Intent: b.Intent, Effect: b.Effect, Workflow: b.Workflow, Reason: b.Reason, By: b.By,
			Stamp: stampRec(&b.Stamp)}
		rec.Key, err = keyIn("key", b.Key, b.KeyCBOR)
		return rec, err
	case journal.KindMove:
		var b MoveBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.MoveRec{Workflow: b.Workflow, From: b.From, To: b.To, Inputs: b.Inputs, Since: b.Since, StateHash: b.StateHash, Migrated: b.Migrated}
		var err error
		rec.Key, err = keyIn("key", b.Key, b.KeyCBOR)
		return rec, err
	case journal.KindCheckpoint:
		var b CheckpointBody
		if err := into(&b); err != nil {
			return nil, err
		}
		return &records.CheckpointRec{Reason: b.Reason}, nil
	case journal.KindSnapshot:
		var b SnapshotBody
		if err := into(&b); err != nil {
			return nil, err
		}
		return &records.SnapshotRec{Checkpoint: b.Checkpoint, Object: b.Object, Bytes: b.Bytes}, nil
	case journal.KindWorld:
		var b WorldBody
		if err := into(&b); err != nil {
			return nil, err
		}
		return &records.WorldRec{ID: b.ID}, nil
	case journal.KindReceipt:
		var b ReceiptBody
		if err := into(&b); err != nil {
			return nil, err
		}
		sr, err := parseReceipt(b.Receipt)
		if err != nil {
			return nil, err
		}
		return &records.ReceiptRec{Receipt: sr, Stamp: stampRec(&b.Stamp), Rejected: b.Rejected}, nil
	case journal.KindDrop:
		var b DropBody
		if err := into(&b); err != nil {
			return nil, err
		}
		sr, err := parseReceipt(b.Receipt)
		if err != nil {
			return nil, err
		}
		return &records.DropRec{Receipt: sr, Reason: b.Reason}, nil
	case journal.KindFrame:
		var b FrameBody
		if err := into(&b); err != nil {
			return nil, err
		}
		rec := &records.FrameRec{World: b.World, Intent: b.Intent, Seq: b.Seq, Executor: b.Executor, Stamp: stampRec(&b.Stamp),
			Effect: b.Effect, KeyID: b.KeyID, Signature: b.Signature}
		rec.Payload, err = valueIn("payload", b.Payload, b.PayloadCBOR)
		return rec, err
	}
	return nil, fmt.Errorf("unknown record kind %q", kind)
}

// parseReceipt reads a signed receipt in its JSON form (receipts.ReceiptForm)
// without judging it: the export gives back what the journal holds, and
// verification (Keyring.Verify) judges.
func parseReceipt(js json.RawMessage) (receipts.SignedReceipt, error) {
	var f receipts.ReceiptForm
	if err := Decode(js, &f); err != nil {
		return receipts.SignedReceipt{}, fmt.Errorf("receipt: %v", err)
	}
	return f.Unchecked()
}
