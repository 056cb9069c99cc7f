package records

import (
	"encoding/base64"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// Decode decodes a record's body into its type: *EventRec, *StepRec,
// *FaultRec, *IntentRec, *ReceiptRec, *DropRec, *FrameRec, *ManifestRec,
// *ConfigRec, *RecoverRec, *ModuleRec, *RetireRec, *CancelRec, *MoveRec, *CheckpointRec, *SnapshotRec or *WorldRec. A kind with no
// type here gives nil and no error. Bodies are trusted: they were canonical when journaled.
func Decode(r journal.Record) (any, error) {
	var v any
	switch r.Kind {
	case journal.KindEvent:
		v = new(EventRec)
	case journal.KindStep:
		v = new(StepRec)
	case journal.KindFault:
		v = new(FaultRec)
	case journal.KindIntent:
		v = new(IntentRec)
	case journal.KindReceipt:
		v = new(ReceiptRec)
	case journal.KindDrop:
		v = new(DropRec)
	case journal.KindFrame:
		v = new(FrameRec)
	case journal.KindManifest:
		v = new(ManifestRec)
	case journal.KindConfig:
		v = new(ConfigRec)
	case journal.KindRecover:
		v = new(RecoverRec)
	case journal.KindModule:
		v = new(ModuleRec)
	case journal.KindCancel:
		v = new(CancelRec)
	case journal.KindCheckpoint:
		v = new(CheckpointRec)
	case journal.KindSnapshot:
		v = new(SnapshotRec)
	case journal.KindWorld:
		v = new(WorldRec)
	case journal.KindRetire:
		v = new(RetireRec)
	case journal.KindMove:
		v = new(MoveRec)
	default:
		return nil, nil
	}
	if err := schemas.UnmarshalTrusted(r.Body, v); err != nil {
		return nil, err
	}
	return v, nil
}

// KeyJSON renders a canonical CBOR key as JSON text: null for no key, the
// key's JSON form, or (for a key with none, such as a map with non-text
// keys) its bytes as a base64 JSON string. Error messages and every JSON
// shape that shows a key use it, so a key reads the same everywhere.
func KeyJSON(key []byte) []byte {
	if len(key) == 0 {
		return []byte("null")
	}
	js, err := schemas.ToJSON(key)
	if err != nil {
		return []byte(`"` + base64.StdEncoding.EncodeToString(key) + `"`)
	}
	return js
}
