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
//   - Journal: frames under "j/", its height and First recovered at Open;
//     the kind index under "m/" (marks.go); retention (retention.go).
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
//	m/<kind>/<8-byte BE seq>   mark: an empty value per record of an indexed
//	                           kind (manifest, checkpoint, snapshot), written
//	                           in its frame's transaction
//	meta/marks-v1              the marks cover the whole journal (a world
//	                           written before them gets them built at Open)
//	meta/first                 the First the last DropBefore set (8 bytes,
//	                           big-endian)
//
// Raw hash bytes make Badger's key order the hash order that Iterate
// promises; big-endian seqs make it the seq order. Open finds the journal's
// height with one reverse seek to the last frame. Read finds the frame
// holding seq s with a reverse seek to the greatest key <= "j/"+s, then
// iterates forward. A group commit of thousands of records costs one key, one
// transaction and one fsync.
//
// A frame is one value. Values over valueThreshold (1 KiB) live in
// Badger's value log and count only a pointer toward a transaction's size,
// so on disk a frame is bounded by the value-log file size (1 GiB - 1 by
// default); OpenInMemory has no value log and refuses a frame over its
// value threshold (1 MiB). A bigger Append fails with Badger's size error
// and writes nothing, and the caller should split it.
//
// # Retention
//
// DropBefore (the rules are package journal's) finds the frames to drop by
// their keys alone: a frame ends right before the next frame's key, and
// the frame holding the height ends at the height. Frames appended after
// the drop began are past that height and never considered. It works in
// chunks of up to 4096 frames; for each chunk it
//
//  1. reads the frames' values in one read transaction (to count their
//     bytes, and, when archiving, to check each with journal.DecodeFrame
//     and hand it to archive, which may stop the drop);
//  2. writes the chunk's new First under meta/first, syncs, and only then
//     moves First in memory;
//  3. deletes the chunk's frame keys and every mark below the new First
//     with one WriteBatch, and syncs.
//
// Moving First before deleting is what readers rely on: Read loads First
// after taking its snapshot, so either it sees the new First (and reads
// only frames that stay) or its snapshot predates the deletes; a reader
// never meets a hole, only all its records or journal.ErrTruncated. Marks
// skips any mark below First for the same reason. Open takes First from
// the first frame's key, so a drop interrupted by a crash leaves a journal
// that still reads from wherever its deletes stopped (a later DropBefore
// finishes them). When every frame was dropped, no frame is left to
// recover the height from: Open takes First from meta/first and the height
// as First - 1, so the journal continues where it ended rather than at
// seq 1. The dropped records are gone from this database; replaying the
// world from genesis needs the archive (journal.ReadArchive), if one was
// kept.
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
