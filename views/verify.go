package views

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Re-verification of a journal's signed records (`aosd journal verify`):
// every receipt and drop record's receipt signature, every signed stream
// frame's signature, each against a trust set, and every intent record's
// hash against the fields it binds. It reads records as the export gives
// them back (ParseRecord), so a world's journal and an export file are
// checked the same way.
//
// The trust set is not journaled (receipts.Keyring): the kernel consults it
// to admit a receipt or frame, and replay trusts what the journal admitted.
// So what verify can prove is that each signed record was signed by a key
// of the trust set it is given, allowed the record's effect, under the name
// the record carries — not that the key was trusted at the moment the
// record was admitted (a key added later would pass, a key removed since
// fails as unknown), and nothing about unsigned records (events, steps and
// the rest) beyond what an intent's hash binds. docs/CLI.md says so.

// MaxVerifyFailures bounds the failures a verification lists; the rest are
// counted.
const MaxVerifyFailures = 1000

// JournalVerify is the report of a verification (`aosd journal verify
// --json`).
type JournalVerify struct {
	// Source is what was read: "journal" (the world's) or the export file.
	Source string `json:"source"`
	// Keys are the ids of the trusted keys verified against, sorted.
	Keys []string `json:"keys"`
	// Records is how many records were read (lines, for a file).
	Records uint64 `json:"records"`
	// First, when set, is the seq the world's journal started at: what
	// retention (aosd gc --drop-journal) dropped before it was not read.
	First uint64 `json:"first,omitempty"`
	// Receipts, Drops, Frames and Intents count the records checked of
	// each kind; UnsignedFrames the frames journaled before frames were
	// signed, which carry nothing to check.
	Receipts       uint64 `json:"receipts"`
	Drops          uint64 `json:"drops"`
	Frames         uint64 `json:"frames"`
	UnsignedFrames uint64 `json:"unsigned_frames"`
	Intents        uint64 `json:"intents"`
	// Unreadable counts the lines that did not read back as a record
	// (ParseRecord): each is a failure.
	Unreadable uint64 `json:"unreadable"`
	// Verified is how many of the records checked passed.
	Verified uint64 `json:"verified"`
	// Failures lists the records that did not pass (and lines that could
	// not be read), in order, at most MaxVerifyFailures; Omitted counts
	// the rest.
	Failures []VerifyFailure `json:"failures"`
	Omitted  uint64          `json:"omitted,omitempty"`
	OK       bool            `json:"ok"`
}

// VerifyFailure is one record that failed verification.
type VerifyFailure struct {
	Seq    uint64        `json:"seq"`            // 0 when the line gave none
	Line   uint64        `json:"line,omitempty"` // the export file's line, when reading one
	Kind   string        `json:"kind"`           // "" when the line gave none
	Intent *schemas.Hash `json:"intent"`         // the intent the record is about; null when unreadable
	KeyID  string        `json:"key_id,omitempty"`
	Reason string        `json:"reason"`
}

// JournalVerifier checks records one at a time and keeps the report.
type JournalVerifier struct {
	kr  *receipts.Keyring
	rep JournalVerify
}

// NewJournalVerifier verifies against kr, reading from source.
func NewJournalVerifier(kr *receipts.Keyring, source string) *JournalVerifier {
	v := &JournalVerifier{kr: kr, rep: JournalVerify{Source: source, Keys: []string{}, Failures: []VerifyFailure{}}}
	for _, k := range kr.List() {
		v.rep.Keys = append(v.rep.Keys, k.ID)
	}
	slices.Sort(v.rep.Keys)
	return v
}

// Line checks one line of an export: line is its number in the file (0
// for a world's journal, whose lines the daemon wrote).
func (v *JournalVerifier) Line(line uint64, text []byte) {
	v.rep.Records++
	r, err := ParseRecord(text)
	if err != nil {
		v.rep.Unreadable++
		seq, kind := lineSeqKind(text)
		v.fail(VerifyFailure{Seq: seq, Line: line, Kind: kind, Reason: err.Error()})
		return
	}
	v.record(line, r)
}

// lineSeqKind is what an unreadable line says of its seq and kind, if
// anything, so its failure can name them.
func lineSeqKind(text []byte) (uint64, string) {
	var top struct {
		Seq  uint64 `json:"seq"`
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(text, &top)
	return top.Seq, top.Kind
}

func (v *JournalVerifier) record(line uint64, r journal.Record) {
	rec, err := records.Decode(r)
	if err != nil {
		v.fail(VerifyFailure{Seq: r.Seq, Line: line, Kind: string(r.Kind), Reason: fmt.Sprintf("record does not decode: %v", err)})
		return
	}
	fail := func(h schemas.Hash, keyID string, err error) {
		v.fail(VerifyFailure{Seq: r.Seq, Line: line, Kind: string(r.Kind), Intent: &h, KeyID: keyID, Reason: err.Error()})
	}
	switch rec := rec.(type) {
	case *records.ReceiptRec:
		v.rep.Receipts++
		if _, err := v.kr.Verify(rec.Receipt); err != nil {
			fail(rec.Receipt.Intent, rec.Receipt.KeyID, err)
			return
		}
	case *records.DropRec:
		v.rep.Drops++
		if _, err := v.kr.Verify(rec.Receipt); err != nil {
			fail(rec.Receipt.Intent, rec.Receipt.KeyID, err)
			return
		}
	case *records.FrameRec:
		if rec.Effect == "" && rec.KeyID == "" && rec.Signature == nil {
			v.rep.UnsignedFrames++
			return
		}
		v.rep.Frames++
		if _, err := v.kr.VerifyFrame(*rec.Signed()); err != nil {
			fail(rec.Intent, rec.KeyID, err)
			return
		}
	case *records.IntentRec:
		v.rep.Intents++
		if got := schemas.HashBytes(records.EncodeIntentID(nil, &rec.IntentID)); got != rec.Hash {
			fail(rec.Hash, "", fmt.Errorf("intent hash %s is not the hash of the intent's fields (%s): a field was changed", rec.Hash, got))
			return
		}
	default:
		return
	}
	v.rep.Verified++
}

func (v *JournalVerifier) fail(f VerifyFailure) {
	if len(v.rep.Failures) < MaxVerifyFailures {
		v.rep.Failures = append(v.rep.Failures, f)
	} else {
		v.rep.Omitted++
	}
}

// Report is what was found so far.
func (v *JournalVerifier) Report() *JournalVerify {
	rep := v.rep
	rep.OK = len(rep.Failures) == 0 && rep.Omitted == 0
	return &rep
}

// VerifyKinds are the record kinds verification reads; the others carry no
// signature or hash to check.
func VerifyKinds() []string {
	return []string{string(journal.KindIntent), string(journal.KindReceipt), string(journal.KindDrop), string(journal.KindFrame)}
}
