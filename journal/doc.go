// Package journal owns what the world's append-only sequence of records is,
// whatever stores it: domain events, steps, intents, receipts, stream
// frames, manifest changes, snapshots and faults. The kernel defines the
// record bodies (canonical CBOR); this package only orders, frames and
// serves them.
//
// # What it owns
//
//   - Record and Kind, and the errors every backend returns (ErrGap,
//     ErrCorrupt, ErrFailed, ErrTruncated).
//   - ReadAt, the one record at a seq, over any journal (read.go).
//   - Retention's shared rules (retention.go): DropStats, the bound on
//     DropBefore's argument, the ErrTruncated a read below First gets (a
//     *Truncation naming First), and ReadRetained, the read from a point
//     that starts at First when retention dropped what came before.
//   - The archive format (archive.go): a file of dropped frames.
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
//     refused with ErrGap and stores nothing. Retention removes records
//     from the front only, so what a journal holds is always the run
//     First()..Height().
//   - Durable before acknowledged: Height moves, and Wait returns, only after
//     the frame is durable (Tip.Advance is the last step of an Append). Read
//     never returns a record above the Height at the call, so readers never
//     act on a record that was not yet durable.
//   - One frame per Append: a group commit of thousands of records is one
//     frame, the canonical CBOR array of its records, stored under the seq of
//     its first record. Reads check that each frame starts right after the
//     previous one (ErrCorrupt otherwise).
//
// # Retention
//
// A journal grows forever unless something removes its oldest records.
// DropBefore(before, archive) is how: it removes every whole frame whose
// last record's seq is below before, oldest first, with the marks of its
// records. A frame is never split, so the frame holding before is kept and
// First() (the first seq of the oldest frame kept) may stay below before;
// once every frame is dropped, First() is Height()+1. The height, the tip
// and every record from First() on are untouched, and Appends go on at
// Height()+1. before past Height()+1 is an error; before <= First() drops
// nothing.
//
// A dropped record is gone from the journal: Read and ReadKind from below
// First() return ErrTruncated (never ErrCorrupt; a *Truncation that names
// First, so a refusal can say where the journal now starts), and Marks
// never gives a dropped seq. So a truncated journal can no longer be replayed from
// genesis; a world that drops records must be able to start from a later
// point (a snapshot's checkpoint) and keep that point at or after First().
// Choosing what to keep is the caller's job: this package only drops.
//
// When archive is not nil, DropBefore hands it each frame (its first seq
// and its EncodeFrame bytes) before removing it, oldest first; an error
// from archive stops the drop, keeping that frame and every later one
// (the frames archived before it are removed). ArchiveWriter.Frame has
// the callback's shape, so an archive file is one DropBefore away.
//
// # Archive format
//
// An archive keeps frames a journal dropped (ArchiveWriter writes one,
// ReadArchive reads it back). It is the header line
//
//	aos journal archive v1\n
//
// then, for each frame in seq order, one canonical CBOR item: the array
// [first_seq, frame_bytes] of the seq of the frame's first record (an
// unsigned integer) and the frame exactly as stored (a byte string holding
// EncodeFrame's bytes). Items follow each other with nothing between them
// and the file ends after the last one. ReadArchive checks the header,
// that each head is the one expected in its shortest form, each frame
// against its first_seq (DecodeFrame), and that each frame starts right
// after the one before; an archive may start at any seq. It hands records
// out as it goes, so fn may have seen the records before a bad item.
//
// # Concurrency
//
// One writer and many readers: Appends are serialized; Read holds no
// journal lock while calling fn, so fn may even Append. Wait sleeps on a
// channel that Advance closes after each durable frame; there is no polling.
package journal
