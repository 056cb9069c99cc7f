// Package journal owns what the world's append-only sequence of records is,
// whatever stores it: domain events, steps, intents, receipts, stream
// frames, manifest changes, snapshots and faults. The kernel defines the
// record bodies (canonical CBOR); this package only orders, frames and
// serves them.
//
// # What it owns
//
//   - Record and Kind, and the errors every backend returns (ErrGap,
//     ErrCorrupt, ErrFailed).
//   - The frame codec: EncodeFrame, and DecodeFrame, which checks a stored
//     frame against the seq it was stored under (frame.go, codec.go).
//   - What every backend shares so none writes it twice: the continuity
//     check of an Append (CheckContinues), the walk of a range read across
//     frames (Scan), and the durable height with its waiters (Tip).
//   - Memory, an in-memory journal for unit tests, and journaltest, the
//     contract every backend runs against itself.
//
// The on-disk journal lives in the package named after Badger, beside the
// CAS in the same database; its durability reasoning is in that package's
// doc. This package must not import the kernel or a storage engine.
//
// # Invariants every backend keeps
//
//   - Gap-free and strictly increasing: the first record is seq 1 and every
//     Append must start at Height()+1 with consecutive seqs. Anything else is
//     refused with ErrGap and stores nothing.
//   - Durable before acknowledged: Height moves, and Wait returns, only after
//     the frame is durable (Tip.Advance is the last step of an Append). Read
//     never returns a record above the Height at the call, so readers never
//     act on a record that was not yet durable.
//   - One frame per Append: a group commit of thousands of records is one
//     frame, the canonical CBOR array of its records, stored under the seq of
//     its first record. Reads check that each frame starts right after the
//     previous one (ErrCorrupt otherwise).
//
// # Concurrency
//
// One writer and many readers: Appends are serialized; Read holds no
// journal lock while calling fn, so fn may even Append. Wait sleeps on a
// channel that Advance closes after each durable frame; there is no polling.
package journal
