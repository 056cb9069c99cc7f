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
//     the kind index under "m/" (marks.go); retention (retention.go); the
//     tail, the file that makes an append durable with one flush (tail.go).
//   - The free-space guard (space.go): every write asks it first, and a
//     write that would leave the disk too full is refused (ErrDiskFull).
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
// transaction and one fdatasync (of the journal's tail, see Durability).
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
// write pay a device flush. Badger's own DB.Sync is no cheaper for the
// journal: in badger v4 it msyncs both the active memtable's WAL and the
// current value-log file (since dgraph-io/badger#1953, which fixed #1847),
// two device flushes per commit even when the commit wrote nothing to the
// value log (measured in docs/PERFORMANCE.md). So the journal keeps its own
// commit log, the tail (tail.go): a file aos-journal.tail in the Badger
// directory, a header naming a base seq, then one record per frame (length,
// CRC-32C, first seq, the frame's bytes).
//
// An Append commits its frame (and its marks) to Badger in one transaction,
// unsynced, and meanwhile appends the frame to the tail and fdatasyncs the
// tail: one device flush, with Badger's commit (a hand-off to its writer
// goroutine and back) run during it rather than before it. Only once both
// have succeeded do the height and its waiters move; either failing fails
// the journal (a frame the tail made durable is then back at the next
// Open, though its Append returned an error). Badger serves
// every read as before; the tail is read only at Open. The invariant: Badger
// is durable through the tail's base, and every frame above the base is in
// the tail, durably, before its Append returns.
//
// Badger is synced (syncBadger: DB.Sync, then an fsync of every memtable
// WAL and of the value-log files written since the last sync, which DB.Sync
// leaves out when Badger has rotated them; Linux writes back pages dirtied
// through Badger's mmap on an fsync of the file) in four places:
//
//   - Before an Append, when the CAS was written since the last Badger sync.
//     CAS objects are not in the tail: they are durable once a Badger sync
//     after their Put returned has returned. The CAS counts its Puts and
//     PutBatches (a Put that finds its object already stored counts too:
//     another Put may have committed it a moment before), and an Append that
//     sees the count moved syncs Badger before its frame. So callers must
//     commit the objects a journal record refers to before appending that
//     record, and then the objects are durable before it. Appends with no CAS
//     write before them (an event's turn whose cells stay in the delta layer)
//     pay the one flush of the tail.
//   - At a checkpoint, when the tail has grown past 16 MiB: Badger is synced,
//     then the tail starts afresh: its header is rewritten with the height as
//     its base and fsynced, and the records after it, all at or below that
//     base, are stale. This bounds what Open replays. The file is written over
//     in place and grows ahead of its records in 1 MiB steps of zeros, so an
//     append's fdatasync writes data and no inode update.
//   - At Open (below), and by retention and the kind index's backfill, which
//     sync what they write before they go on.
//   - Badger's Close flushes everything, and DB.Close then starts the tail
//     afresh, so a cleanly closed world opens with nothing to replay.
//
// Besides these, a background syncer (bgsync.go) syncs Badger off the append
// path each time the tail has taken 1 MiB, so the syncs above that an Append
// waits for find about that much left to write instead of up to 16 MiB. Its
// syncs promise nothing the tail does not already keep; one that covered
// the CAS writes counted before it started spares the next Append its own
// sync; one that fails fails the journal at the next Append, and Close stops
// it before closing Badger.
//
// At Open the tail is read up to its first record that is cut short, fails
// its CRC (a torn write, or the zeros ahead) or does not start past the one
// before (stale); the next append writes over what follows. Its frames are written into
// Badger again, marks included: a machine crash may have lost them from
// Badger, which was not synced; a frame below the First that retention
// recorded (meta/first) was dropped after it was tailed and stays dropped.
// Then the height is recovered from Badger as before, Badger is synced, and
// any frame Badger holds above the tail's last seq (an Append whose tail
// write the crash cut, never acknowledged, but now part of the journal) is
// copied into the tail, so every frame the journal holds is durable before
// anything follows it. A tail with no valid header (a world written before
// the tail, or a crash while a checkpoint started the tail afresh, when
// Badger was durable through its height) is started afresh at the height.
//
// A failed commit, tail write or sync is sticky (journal.ErrFailed): what
// reached the disk is unknown, so the journal refuses further appends until
// the database is reopened, and Open recovers the height from whatever is
// actually stored, as above. A failed checkpoint after a successful tail
// write still acknowledges that Append (its frame is durable) and fails the
// ones after it.
//
// What this closes that DB.Sync alone did not: a frame is never in only an
// unsynced memtable WAL or value-log file. Earlier, when another writer's
// request rotated the memtable (or the value log) right after a journal
// frame was written, DB.Sync synced only the new active file and the frame
// sat unsynced until Badger flushed the memtable (or forever, for the value
// log). What remains, for power loss or a kernel crash only (a killed
// process loses nothing: the tail is written with write(2), Badger through
// mmap, both in the page cache): Badger's files are synced by name, so a
// future Badger that renames them (memFileExt ".mem", value logs ".vlog")
// would leave rotated files to its own flushes again; and the tail doubles
// the bytes a frame writes (once to the value log, once to the tail).
//
// A directory already open by another process (Badger's flock on the
// directory) is reported as ErrLocked. Badger does not wrap the flock error
// with %w, so Open recognises it by Badger's message.
//
// # Free space
//
// Badger makes its value-log files, memtable write-ahead logs and tables
// at full size with ftruncate, maps them, and writes through the mapping.
// On a full filesystem such a write faults (SIGBUS) instead of failing, in
// a Badger goroutine, and the Go runtime kills the process: an open
// Badger issue (dgraph-io/badger#1682, #1801), and what a full disk did to
// aosd. Recovering from the signal is not possible in a goroutine we do
// not own, and preallocating with fallocate cannot cover the tables and
// memtable logs Badger creates and writes within one call. So the store
// refuses, before it starts, any write of ours that would leave the
// filesystem with less free (statfs, the blocks an unprivileged process may
// take) than
//
//	the reserve (Options.DiskReserve, DefaultDiskReserve: 52 MiB, derived
//	from numMemtables and memTableSize: the level-0 tables Badger flushes
//	its memtables into on its own, and its small mapped files)
//	+ the tables: what compactions may write before deleting their inputs
//	  (the LSM's tables, measured from Badger's levels every memTableSize
//	  of LSM writes, plus the memtables' logs and the LSM bytes admitted
//	  since: an upper bound)
//	+ the writes under way, each counted as its entries in the value log
//	  and the write-ahead log, and for the journal its tail record and the
//	  step the tail may grow by.
//
// Open checks the same before Badger writes anything, and a restore
// (backup.go) asks in chunks of 8 MiB as it writes. A refused write
// writes nothing and leaves the journal usable; the kernel stops the world
// on it as on any storage failure, so nothing follows that could fault,
// and nothing acknowledged is lost. A write the operating system refuses
// with ENOSPC (the tail is written with write(2)) is ErrDiskFull too.
// Recovery is freeing space and reopening (docs/limits.md, "A full disk").
// The guard costs one statfs per write (about 2 µs; an append pays an
// fdatasync besides). Off Linux the free space is not read and the guard
// admits every write.
//
// # Concurrency
//
// Journal Appends are serialized by a mutex; a Read runs in its own Badger
// read transaction (a consistent snapshot) and holds no journal lock while
// calling fn. CAS operations are Badger transactions or write batches; a Put
// racing another Put of the same object retries on Badger's conflict and then
// finds the object stored.
package badgerdb
