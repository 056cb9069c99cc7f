// Package journal owns the world's append-only sequence of records: domain
// events, steps, intents, receipts, stream frames, manifest changes,
// snapshots and faults. The kernel defines the record bodies (canonical CBOR);
// this package only orders, stores and serves them.
//
// It stores into the world's one Badger database (opened with cas.OpenBadger)
// under the prefix "j/"; it must not touch other prefixes ("c/" is the CAS),
// and it must not import the kernel.
//
// # Invariants
//
//   - Gap-free and strictly increasing: the first record is seq 1 and every
//     Append must start at Height()+1 with consecutive seqs. Anything else is
//     refused with ErrGap and writes nothing.
//   - Durable before acknowledged: Append commits one Badger transaction and
//     then calls DB.Sync (the database runs with SyncWrites=false; see the cas
//     package doc for why and for the one residual power-loss window). Height
//     moves, and Wait returns, only after the sync succeeded. Read never
//     returns a record above Height, so readers never act on a record that
//     was not yet durable.
//   - A failed commit or sync is sticky (ErrFailed): what reached the disk is
//     unknown, so the journal refuses further appends until reopened, and
//     Open recovers Height from whatever is actually stored.
//
// # Frames
//
// Records are group-committed: each Append is one frame stored under one key,
//
//	"j/" + 8-byte big-endian seq of the frame's first record
//	  -> canonical CBOR array of Record
//
// so a group commit of thousands of records costs one key, one transaction
// and one fsync. Big-endian keys make Badger's key order the seq order. Open
// finds Height with one reverse seek to the last frame. Read finds the frame
// holding seq s with a reverse seek to the greatest key <= "j/"+s, then iterates
// forward, checking that each frame starts right after the previous one.
//
// A frame must fit in one Badger transaction (about 15% of the 64 MiB
// memtable by default, so roughly 9 MiB); a bigger Append fails with Badger's
// ErrTxnTooBig and writes nothing, and the caller should split it.
//
// # Concurrency
//
// One writer and many readers: Appends are serialized by a mutex; Read runs
// in its own Badger read transaction (a consistent snapshot) and holds no
// journal lock while calling fn, so fn may even Append. Wait sleeps on a
// channel that Append closes and replaces after each durable frame; there is
// no polling.
package journal
