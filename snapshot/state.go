package snapshot

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Version is the encoding version of State this code writes and reads.
const Version = 1

// ErrInvalid reports a snapshot object that does not decode or breaks a rule
// of State (order, uniqueness, consistency between its tables).
var ErrInvalid = errors.New("snapshot: invalid snapshot object")

// Instance statuses a snapshot holds: only instances not at rest are kept.
// A parked instance is not failed, has no intent in flight, and has events
// parked because its module is set aside.
const (
	StatusWaiting = "waiting"
	StatusFailed  = "failed"
	StatusParked  = "parked"
	// StatusPinned: at rest, but pinned to an older live manifest whose
	// state the current one does not accept (kernel/pins.go).
	StatusPinned = "pinned"
)

// State is everything a world's loop derives from its journal, as of the
// record at Height. Lists are sorted as each field says; Decode refuses any
// other order, so a State has one encoding.
type State struct {
	Version uint64 `cbor:"version"`
	// Height is the seq of the last record the state includes (the
	// checkpoint record of a snapshot).
	Height uint64 `cbor:"height"`
	// Logical is the last logical time stamped.
	Logical uint64 `cbor:"logical"`
	// Manifest is the world's manifest; nil before the first apply.
	Manifest *Manifest `cbor:"manifest"`
	// Limits are the world's limits in force.
	Limits records.Limits `cbor:"limits"`
	// Workflows: one per cell head the world keeps (the manifest's workflows
	// and those that left it with cells), sorted by name.
	Workflows []Workflow `cbor:"workflows"`
	// Instances: every instance not at rest, sorted by (workflow, key bytes).
	Instances []Instance `cbor:"instances"`
	// Intents: the intents in flight, sorted by hash.
	Intents []Intent `cbor:"intents"`
	// Settled: the receipt fence, oldest settlement first (eviction order).
	Settled []Settled `cbor:"settled"`
	// Idempotency: the ingress idempotency table, oldest first (eviction order).
	Idempotency []Idem `cbor:"idempotency"`
	// Epochs: the state-schema epochs.
	Epochs Epochs `cbor:"epochs"`
	// World is the world's identity (records.WorldRec); empty in snapshots
	// of a world that had none yet (taken before identities existed, or
	// before its first open by code that has them), which then encode as
	// they did.
	World string `cbor:"world,omitempty"`
	// Aside: the modules set aside, sorted by name (absent when none, so
	// a snapshot written before modules could be set aside keeps its
	// bytes).
	Aside []Aside `cbor:"aside,omitempty"`
	// Live: the live manifests other than Manifest (kept by apply --pin
	// for the instances pinned to them), in the order they were applied
	// (absent when none, so a world with no pins keeps its bytes).
	Live []LiveManifest `cbor:"live,omitempty"`
}

// LiveManifest is an older live manifest (kernel/pins.go).
type LiveManifest struct {
	Hash      schemas.Hash   `cbor:"hash"`
	Source    schemas.Hash   `cbor:"source"`    // as Manifest.Source
	Artifacts []schemas.Hash `cbor:"artifacts"` // as Manifest.Artifacts
	// Seq is the manifest record that applied it.
	Seq uint64 `cbor:"seq"`
}

// Aside is one module set aside (records.ModuleRec).
type Aside struct {
	Module    string       `cbor:"module"`
	Hash      schemas.Hash `cbor:"hash"`      // its def's hash when it was set aside
	Seq       uint64       `cbor:"seq"`       // the module record that set it aside
	Reason    string       `cbor:"reason"`    // that record's reason
	Workflows []string     `cbor:"workflows"` // the workflows it holds, sorted
}

// Manifest names the world's manifest and what it needs from the CAS.
type Manifest struct {
	Hash schemas.Hash `cbor:"hash"`
	// Source is the CAS object holding the manifest's Source bytes
	// (manifest.FromSource rebuilds it), so a snapshot does not need the
	// journal record that applied it.
	Source schemas.Hash `cbor:"source"`
	// Artifacts are the wasm artifacts its modules run, sorted.
	Artifacts []schemas.Hash `cbor:"artifacts"`
}

// Workflow is one workflow's cells.
type Workflow struct {
	Name string `cbor:"name"`
	// Root is its CellIndex root (the zero hash for no cells).
	Root schemas.Hash `cbor:"root"`
	// Cells is how many cells the index holds.
	Cells uint64 `cbor:"cells"`
	// State is, for an unkeyed workflow, the hash of its one state (the
	// cell under the empty key); nil when keyed or without state.
	State *schemas.Hash `cbor:"state,omitempty"`
}

// Instance is one instance not at rest.
type Instance struct {
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key"`
	Status   string `cbor:"status"` // StatusWaiting, StatusFailed or StatusParked
	Fault    *Fault `cbor:"fault,omitempty"`
	// Parked are the events parked for the instance, in the order it will
	// take them (absent when none, so older snapshots keep their bytes).
	Parked []Delivery `cbor:"parked,omitempty"`
	// Pin is the older live manifest the instance steps under (absent:
	// the current one), and PinWhy why one at rest stays on it.
	Pin    *schemas.Hash `cbor:"pin,omitempty"`
	PinWhy string        `cbor:"pin_why,omitempty"`
}

// Fault is what a failed instance keeps about its failure.
type Fault struct {
	Seq     uint64 `cbor:"seq"`   // the fault record
	Input   uint64 `cbor:"input"` // the input whose step failed
	Class   string `cbor:"class"`
	Reason  string `cbor:"reason"`
	Skipped uint64 `cbor:"skipped"` // events not delivered since
	// Retry is the failed delivery kept for an operator's retry; nil when
	// the input never reached the instance.
	Retry *Delivery `cbor:"retry,omitempty"`
}

// Delivery is one event as delivered to an instance.
type Delivery struct {
	Seq       uint64        `cbor:"seq"`
	Schema    string        `cbor:"schema"`
	Value     []byte        `cbor:"value"`
	Stamp     records.Stamp `cbor:"stamp"`
	EventHash schemas.Hash  `cbor:"event_hash"`
	Depth     uint64        `cbor:"depth"`
}

// Intent is an intent in flight with its stream-frame counters.
type Intent struct {
	Intent records.IntentRec `cbor:"intent"`
	// Frames is how many stream frames are journaled for it.
	Frames uint64 `cbor:"frames"`
	// LastFrame is the executor's seq of the last frame (0 for none).
	LastFrame uint64 `cbor:"last_frame"`
}

// Settled is a recently settled intent the fence remembers.
type Settled struct {
	Intent  schemas.Hash `cbor:"intent"`
	Effect  string       `cbor:"effect"`
	Seq     uint64       `cbor:"seq"`      // the record that settled it
	DropSeq uint64       `cbor:"drop_seq"` // the drop journaled for its late receipt; 0 for none
	Receipt bool         `cbor:"receipt"`  // settled by a receipt (else by a cancel or its instance's failure)
	// Cancelled: an operator's cancel settled it (kernel/cancel.go); Seq
	// is the cancel record. Absent from the bytes when false, so snapshots
	// written before cancels keep their bytes.
	Cancelled bool `cbor:"cancelled,omitempty"`
}

// Idem is a remembered ingress idempotency key.
type Idem struct {
	Key     []byte `cbor:"key"` // 16 bytes: the key's identity
	Seq     uint64 `cbor:"seq"`
	Logical uint64 `cbor:"logical"`
	Sum     []byte `cbor:"sum"` // 16 bytes: the event's identity
}

// IdemIDLen is the length of Idem.Key and Idem.Sum.
const IdemIDLen = 16

// Epochs are the state-schema epochs (see the kernel's schema_epoch.go).
type Epochs struct {
	// MaxRun is the highest logical time a step has run at.
	MaxRun uint64 `cbor:"max_run"`
	// Known is the state schema each workflow's cells were last written
	// under, sorted by workflow.
	Known []KnownSchema `cbor:"known"`
	// Changes are the workflows' last state-schema changes, sorted by workflow.
	Changes []Epoch `cbor:"changes"`
}

// SchemaID identifies a state schema: its name and a hash over its
// definition and every schema it refers to.
type SchemaID struct {
	Name string       `cbor:"name"`
	Hash schemas.Hash `cbor:"hash"`
}

// KnownSchema is one workflow's current state schema.
type KnownSchema struct {
	Workflow string   `cbor:"workflow"`
	Schema   SchemaID `cbor:"schema"`
}

// Epoch is one workflow's last state-schema change.
type Epoch struct {
	Workflow string   `cbor:"workflow"`
	At       uint64   `cbor:"at"`
	From     SchemaID `cbor:"from"`
	To       SchemaID `cbor:"to"`
}

// Encode checks s and returns its canonical bytes.
func Encode(s *State) ([]byte, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return schemas.Marshal(s)
}

// Decode decodes and checks a snapshot object. The bytes must be the
// canonical encoding Encode writes.
func Decode(data []byte) (*State, error) {
	var s State
	if err := schemas.UnmarshalTrustedBig(data, &s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if s.Version != Version {
		return nil, fmt.Errorf("%w: version %d, this program reads version %d", ErrInvalid, s.Version, Version)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	re, err := schemas.Marshal(&s)
	if err != nil {
		return nil, fmt.Errorf("%w: re-encode: %v", ErrInvalid, err)
	}
	if !bytes.Equal(re, data) {
		return nil, fmt.Errorf("%w: not in canonical form", ErrInvalid)
	}
	return &s, nil
}

// Check enforces the rules that make a State's encoding unique and its
// tables consistent: sorted, unique lists; instance statuses with what they
// need; every intent's origin a waiting instance, and every waiting
// instance the origin of an intent.
func (s *State) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: height %d: %s", ErrInvalid, s.Height, fmt.Sprintf(format, a...))
	}
	if s.Version != Version {
		return bad("version %d, want %d", s.Version, Version)
	}
	if m := s.Manifest; m != nil {
		for i := 1; i < len(m.Artifacts); i++ {
			if bytes.Compare(m.Artifacts[i-1][:], m.Artifacts[i][:]) >= 0 {
				return bad("manifest artifacts not sorted and unique at %d", i)
			}
		}
	}
	for i, w := range s.Workflows {
		if w.Name == "" {
			return bad("workflow %d has no name", i)
		}
		if i > 0 && s.Workflows[i-1].Name >= w.Name {
			return bad("workflows not sorted and unique at %q", w.Name)
		}
		if w.Root.IsZero() != (w.Cells == 0) {
			return bad("workflow %s: root %s with %d cells", w.Name, w.Root, w.Cells)
		}
		if w.State != nil && w.Cells != 1 {
			return bad("workflow %s: an unkeyed state with %d cells", w.Name, w.Cells)
		}
	}
	waiting := map[string]bool{}
	for i := range s.Instances {
		in := &s.Instances[i]
		if i > 0 {
			p := &s.Instances[i-1]
			if p.Workflow > in.Workflow || (p.Workflow == in.Workflow && bytes.Compare(p.Key, in.Key) >= 0) {
				return bad("instances not sorted and unique at workflow %s", in.Workflow)
			}
		}
		switch in.Status {
		case StatusFailed:
			if in.Fault == nil {
				return bad("failed instance of %s without its fault", in.Workflow)
			}
		case StatusWaiting:
			if in.Fault != nil {
				return bad("waiting instance of %s with a fault", in.Workflow)
			}
			waiting[in.Workflow+"\x00"+string(in.Key)] = false
		case StatusParked:
			if in.Fault != nil || len(in.Parked) == 0 {
				return bad("parked instance of %s with a fault or no parked events", in.Workflow)
			}
		case StatusPinned:
			if in.Fault != nil || in.Pin == nil || len(in.Parked) > 0 {
				return bad("pinned instance of %s with a fault, parked events or no pin", in.Workflow)
			}
		default:
			return bad("instance of %s has status %q (a snapshot holds %s, %s and %s instances)", in.Workflow, in.Status, StatusWaiting, StatusFailed, StatusParked)
		}
		if in.Parked != nil && len(in.Parked) == 0 {
			return bad("instance of %s with an empty parked list (absent when none)", in.Workflow)
		}
	}
	for i := range s.Intents {
		it := &s.Intents[i].Intent
		if i > 0 && bytes.Compare(s.Intents[i-1].Intent.Hash[:], it.Hash[:]) >= 0 {
			return bad("intents not sorted and unique at %s", it.Hash)
		}
		id := it.OriginWorkflow + "\x00" + string(it.OriginKey)
		if _, ok := waiting[id]; !ok {
			return bad("intent %s: its origin (workflow %s) is not a waiting instance", it.Hash, it.OriginWorkflow)
		}
		waiting[id] = true
	}
	for id, has := range waiting {
		if !has {
			wf, _, _ := bytes.Cut([]byte(id), []byte{0})
			return bad("a waiting instance of %s has no intent in flight", wf)
		}
	}
	seenSettled := make(map[schemas.Hash]bool, len(s.Settled))
	for i, st := range s.Settled {
		if i > 0 && s.Settled[i-1].Seq > st.Seq {
			return bad("settled intents not in settlement order at %d", i)
		}
		if seenSettled[st.Intent] {
			return bad("settled intent %s listed twice", st.Intent)
		}
		if st.Cancelled && st.Receipt {
			return bad("settled intent %s: settled at seq %d both by a cancel and by a receipt", st.Intent, st.Seq)
		}
		seenSettled[st.Intent] = true
	}
	seenIdem := make(map[string]bool, len(s.Idempotency))
	for i, e := range s.Idempotency {
		if len(e.Key) != IdemIDLen || len(e.Sum) != IdemIDLen {
			return bad("idempotency entry %d: key and sum must be %d bytes", i, IdemIDLen)
		}
		if i > 0 && s.Idempotency[i-1].Seq >= e.Seq {
			return bad("idempotency entries not in seq order at %d", i)
		}
		if seenIdem[string(e.Key)] {
			return bad("idempotency key listed twice at %d", i)
		}
		seenIdem[string(e.Key)] = true
	}
	for i := 1; i < len(s.Epochs.Known); i++ {
		if s.Epochs.Known[i-1].Workflow >= s.Epochs.Known[i].Workflow {
			return bad("known state schemas not sorted and unique at %q", s.Epochs.Known[i].Workflow)
		}
	}
	for i := 1; i < len(s.Epochs.Changes); i++ {
		if s.Epochs.Changes[i-1].Workflow >= s.Epochs.Changes[i].Workflow {
			return bad("state-schema epochs not sorted and unique at %q", s.Epochs.Changes[i].Workflow)
		}
	}
	if s.Aside != nil && len(s.Aside) == 0 {
		return bad("an empty list of modules set aside (absent when none)")
	}
	if s.Live != nil && len(s.Live) == 0 {
		return bad("an empty list of live manifests (absent when none)")
	}
	live := map[schemas.Hash]bool{}
	for i, lm := range s.Live {
		if (i > 0 && s.Live[i-1].Seq >= lm.Seq) || live[lm.Hash] || (s.Manifest != nil && lm.Hash == s.Manifest.Hash) {
			return bad("live manifest %s listed twice, out of order, or the current one", lm.Hash)
		}
		live[lm.Hash] = true
	}
	for i := range s.Instances {
		if p := s.Instances[i].Pin; p != nil && !live[*p] {
			return bad("instance of %s pinned to %s, which is not a live manifest", s.Instances[i].Workflow, *p)
		}
	}
	held := map[string]bool{}
	for i, a := range s.Aside {
		if i > 0 && s.Aside[i-1].Module >= a.Module {
			return bad("modules set aside not sorted and unique at %q", a.Module)
		}
		for j, wf := range a.Workflows {
			if (j > 0 && a.Workflows[j-1] >= wf) || held[wf] {
				return bad("module %s set aside: workflow %s listed twice or out of order", a.Module, wf)
			}
			held[wf] = true
		}
	}
	return nil
}
