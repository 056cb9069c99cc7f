// Package badgerdb opens a world's one Badger (dgraph-io/badger/v4) directory
// and implements on it both storage ports the kernel consumes: the CAS
// (cas.Store) and the journal (kernel.Log). It is the one package named
// after the dependency; nothing else in the deterministic core names Badger.
//
// # What it owns
//
//   - Open / OpenInMemory and DB: the Badger options of a world, the
//     directory lock (ErrLocked), Badger's logging routed to slog.
//   - CAS: objects under "c/".
//   - Journal: frames under "j/", its height recovered at Open.
//
// It must not import the kernel, and it must not decide what records or
// objects mean: the frame codec, the gap check and the read walk come from
// package journal, verification and GC from package cas.
//
// # Key space
//
// A world has one Badger directory. Prefixes divide it:
//
//	c/<32 raw hash bytes>      CAS object
//	j/<8-byte big-endian seq>  journal frame: the canonical CBOR array of the
//	                           records of one Append, keyed by its first seq
//
// Raw hash bytes make Badger's key order the hash order that Iterate
// promises; big-endian seqs make it the seq order. Open finds the journal's
// height with one reverse seek to the last frame. Read finds the frame
// holding seq s with a reverse seek to the greatest key <= "j/"+s, then
// iterates forward. A group commit of thousands of records costs one key, one
// transaction and one fsync.
//
// A frame must fit in one Badger transaction (about 15% of the 64 MiB
// memtable by default, so roughly 9 MiB); a bigger Append fails with Badger's
// ErrTxnTooBig and writes nothing, and the caller should split it.
//
// # Durability
//
// Open sets SyncWrites to false. With it true, Badger msyncs its memtable
// write-ahead log after every write request, which would make every CAS
// write pay an fsync. Instead the journal, which is the commit point of the
// world, commits each frame in one transaction and then calls DB.Sync. In
// badger v4 DB.Sync syncs both the active memtable's WAL and the current
// value-log file (since dgraph-io/badger#1953, which fixed #1847 where Sync
// only synced the value log). Sync covers everything committed before it, so
// CAS objects are durable once a later journal Append returns: callers must
// commit the objects a journal record refers to before appending that
// record. The journal's height moves, and its waiters wake, only after the
// sync succeeded.
//
// A failed commit or sync is sticky (journal.ErrFailed): what reached the
// disk is unknown, so the journal refuses further appends until the
// database is reopened, and Open recovers the height from whatever is
// actually stored.
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
// with %w, so Open recognises it by Badger's message.
//
// # Concurrency
//
// Journal Appends are serialized by a mutex; a Read runs in its own Badger
// read transaction (a consistent snapshot) and holds no journal lock while
// calling fn. CAS operations are Badger transactions or write batches; a Put
// racing another Put of the same object retries on Badger's conflict and then
// finds the object stored.
package badgerdb
