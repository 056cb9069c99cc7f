// Package records holds the journal's record bodies: their types (EventRec,
// StepRec, IntentRec, ReceiptRec, ManifestRec, ...), the limits journaled
// with them, their hand-written canonical CBOR encoders, and the readers'
// typed view of a journal (Decode, Trace, TraceIntent, KeyJSON).
//
// The kernel writes these records; the readers (the daemon's trace and
// journal views, the CLI through the daemon, replay tests, examples) decode
// them from here without going through the kernel, whose loop they do not
// need: a trace is a scan of the journal.
//
// Invariants:
//   - Record bodies are byte-identical to schemas.Marshal of the types: the
//     hand encoders (EncodeEvent, EncodeStep, EncodeIntentID, EncodeReceipt)
//     are held to the library by TestRecordEncodersMatchMarshal on random
//     records. A journal written by an older build must decode and replay,
//     so fields are only ever added, tagged omitempty, and never renamed.
//   - The receipt inside a ReceiptRec is encoded by receipts
//     (AppendSignedReceipt), the one place that knows a receipt's keys.
//   - No JSON is rendered here except KeyJSON, the single rendering of a
//     canonical CBOR key that error messages and the API's shapes share.
//     The JSON shapes of records live in package views; the types here
//     carry cbor tags only (Limits' JSON view is views.Limits, held to
//     LimitNames by the API's tests).
//
// Must not touch: the kernel (records is below it: it may import schemas,
// journal, receipts and manifest, never kernel), storage engines, wall clock.
package records
