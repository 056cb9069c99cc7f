// Package cas owns the world's immutable content-addressed store: SHA-256 of
// canonical bytes -> those bytes.
//
// # What it owns
//
//   - Store, the interface the kernel, cells and snapshots consume.
//   - Badger, the on-disk Store, and Memory, the in-memory Store for tests.
//   - OpenBadger / OpenBadgerInMemory, the opener for a world's one Badger
//     directory. The journal package shares the same *badger.DB.
//   - GC, mark-and-sweep from roots the caller supplies (snapshot-pinned roots).
//
// It knows nothing about what objects mean: GC is handed a children function
// that decodes references. It must not import the kernel, cells or journal.
//
// # Key space
//
// A world has one Badger directory. Prefixes divide it:
//
//	c/<32 raw hash bytes>      CAS object (this package)
//	j/<8-byte big-endian seq>  journal frame (package journal)
//
// Raw hash bytes make Badger's key order the hash order that Iterate promises.
//
// # Invariants
//
//   - Immutable: an object's bytes never change; Put of a stored object and
//     PutBatch of stored or repeated objects write nothing.
//   - Verified reads: Get hashes what it read and returns ErrCorrupt, naming
//     the hash, when the bytes do not match. Nothing unverified leaves Get.
//   - GC deletes only what no root reaches, and deletes nothing when a root or
//     a reachable child is missing (ErrMissing) or corrupt. GC must not run
//     concurrently with writers.
//
// # Durability and Badger options
//
// OpenBadger sets SyncWrites to false. With it true, Badger msyncs its
// memtable write-ahead log after every write request, which would make every
// CAS write pay an fsync. Instead the journal, which is the commit point of the
// world, calls DB.Sync after committing each frame. In badger v4 DB.Sync
// syncs both the active memtable's WAL and the current value-log file (since
// dgraph-io/badger#1953, which fixed #1847 where Sync only synced the value
// log). Sync covers everything committed before it, so CAS objects are durable
// once a later journal Append returns: callers must commit the objects a
// journal record refers to before appending that record.
//
// Residual risk, for power loss or kernel crash only (a killed process loses
// nothing, since Badger writes through mmap): when the memtable fills, Badger
// rotates to a new one without syncing the old one's WAL, and DB.Sync syncs
// only the active memtable. If another writer's request in the same Badger
// write batch fills the memtable right after a journal frame was written, the
// frame sits in the old WAL until the memtable is flushed to a (synced) SST.
// Closing this fully needs SyncWrites=true (an fsync per write request).
//
// A directory already open by another process (Badger's flock on the
// directory) is reported as ErrLocked. Badger does not wrap the flock error
// with %w, so OpenBadger recognises it by Badger's message.
package cas
