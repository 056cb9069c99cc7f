// Package cas owns the world's immutable content-addressed store: SHA-256 of
// canonical bytes -> those bytes.
//
// # What it owns
//
//   - Store, the interface the kernel, cells and snapshots consume: the CAS
//     port. The on-disk Store lives in the package named after Badger, which
//     keeps a world's journal in the same database; this package names no
//     storage engine.
//   - Memory, the in-memory Store for tests.
//   - Guard, a Store wrapper that records every write while a Collection runs,
//     so that its Sweep (delete what is neither marked nor written since
//     Begin) is safe while writers keep writing; the argument is on Guard.
//   - GC, mark-and-sweep from roots the caller supplies, for a store no one
//     writes to meanwhile; its sweep is a Guard collection's.
//   - castest, the contract every Store implementation runs against itself.
//
// It knows nothing about what objects mean: GC is handed a children function
// that decodes references, a Guard's Sweep the set its caller marked. It must not import the kernel, cells, journal or a
// storage engine.
//
// # Invariants
//
//   - Immutable: an object's bytes never change; Put of a stored object and
//     PutBatch of stored or repeated objects write nothing new.
//   - PutMissing (a store's own MissingPutter, or Has then PutBatch) writes
//     exactly the objects the store lacks, each once, after checking each
//     hashes to the hash its caller gave; it leaves stored copies unread.
//     Through a Guard, a running collection records every object it was
//     given, found or written.
//   - Verified reads: Get hashes what it read and returns ErrCorrupt, naming
//     the hash, when the bytes do not match. Nothing unverified leaves Get.
//     A Put of an object whose stored copy is corrupt replaces the copy.
//   - Iterate walks objects in hash order.
//   - GC deletes only what no root reaches, and deletes nothing when a root or
//     a reachable child is missing (ErrMissing) or corrupt. GC must not run
//     concurrently with writers.
//   - A Guard collection never deletes an object written through the Guard
//     after Begin, and deletes nothing on Abort. One runs at a time.
//   - A write that starts after a Delete returned stores its object again
//     (castest's PutAfterDelete); the Guard's argument rests on it.
//   - Durability is the store's and the journal's business together: the
//     objects a journal record names must be durable once the record's append
//     returns, so callers write objects before the records that name them.
package cas
