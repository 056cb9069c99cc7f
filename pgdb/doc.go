// Package pgdb is the cluster backend: a world's storage ports on
// PostgreSQL (15 or later, through the pure-Go driver jackc/pgx/v5), the
// twin of the package named after Badger. It implements the journal
// (kernel.Log, with ReadKind and retention), the CAS (cas.Store and
// cas.MissingPutter) and the lease of a partition's one owner, and holds
// them to the same contracts (journaltest, castest) and the same fault
// wrappers (storefault) as Badger.
//
// There is no snapshot port of its own: a snapshot is CAS objects named by
// a snapshot record, found through the journal's kind index (Marks), so
// the CAS and the journal carry snapshots here as on Badger.
//
// # What it owns
//
//   - Open and DB: the two connection pools, the checks every connection
//     passes (server version, fsync, synchronous_commit), and the schema's
//     tables, created and migrated by aos itself (schema.go).
//   - The lease (lease.go): Acquire (the next epoch), Renew, Release,
//     Current (epoch, owner, address, and whether it is held).
//   - Journal (journal.go): the owner's journal, every append fenced by its
//     lease's epoch and the expected height; a follower's journal
//     (follow.go), which reads and waits; the kind index (Marks);
//     retention (retention.go).
//   - CAS (cas.go): objects keyed by hash, verified reads, batch writes,
//     deletes fenced like appends.
//
// It must not import the kernel, and it must not decide what records or
// objects mean: the frame codec, the gap check and the read walk come from
// package journal, verification and GC from package cas.
//
// # Schema
//
// A world lives in one PostgreSQL schema (Config.Schema, default "aos"),
// which Open creates if missing; two worlds in one database use two
// schemas. Its tables:
//
//	schema_migrations (version PK, name, applied_at)
//	    one row per migration applied; the highest version is the schema's
//	partitions (part PK, epoch, owner, address, lease_until, height, first)
//	    one row per partition (a world has partition 0; partitions, DESIGN
//	    §13, will add rows): the lease and the journal's head together
//	frames (part, first_seq PK, last_seq, frame)
//	    one row per Append: the journal.EncodeFrame bytes of its records
//	marks (part, kind, seq PK)
//	    the kind index: a row per record of an indexed kind
//	objects (hash PK, data)
//	    the CAS: 32 raw hash bytes (bytea orders byte-wise: hash order)
//	world_files (name PK, data, updated_at)
//	    the world's small files (its API token, executor key, trusted
//	    keys), written by WriteFiles only while the writer's lease epoch
//	    is the partition's (fenced like the CAS's deletes)
//
// frame and data are stored out of line and uncompressed (STORAGE
// EXTERNAL): frames and objects are canonical CBOR full of hashes, and
// compressing them would cost CPU on every commit for little (Badger's blocks are
// uncompressed for the same reason).
//
// Open migrates in one transaction under an advisory lock on the schema's
// name, so processes opening a new world at once create it once. A schema
// whose schema_migrations names a version newer than this aos knows is
// refused (ErrSchemaNewer) and left untouched: an older aos never writes
// tables a newer one laid out. A migration, once released, is never
// edited, only followed by another.
//
// # The fence
//
// A partition has one owner at a time: the holder of its lease, the epoch
// in its partitions row. Acquire sets epoch = epoch + 1 (and the owner,
// its address and when the lease lapses), so each owner has an epoch no
// other had. Every group commit is one statement (appendSQL):
//
//	WITH fence AS (UPDATE partitions SET height = <last seq>
//	               WHERE part = 0 AND epoch = <owner's> AND height = <expected>
//	               RETURNING part),
//	     marked AS (INSERT INTO marks ... FROM fence ...)
//	INSERT INTO frames ... FROM fence
//
// The frame and its marks are inserted only if the fence's update found the
// row with the owner's epoch and the height the owner expects: the epoch
// check and the expected last sequence are checked in the transaction that
// inserts, as issue 28 asks, and as Temporal's SQL persistence checks a
// shard's range_id inside the transaction of each write. The update takes
// the row's lock; an Acquire updates the same row, so the two are ordered.
// An append that commits first is in the journal the new owner reads after
// its Acquire committed (DB.Journal reads the height then). An append that
// comes after waits for the Acquire's lock and, under READ COMMITTED,
// PostgreSQL re-evaluates its WHERE clause against the row's new version:
// the epoch no longer matches, nothing is inserted, and the append fails
// with ErrFenced naming the new owner. Safety rests on this alone, never on
// clocks: a lease that lapsed (lease_until, by the database's clock) only
// lets another node acquire without Force; until one does, the old owner's
// epoch is still the partition's and its appends still land.
//
// A fenced append, a refused one and one whose outcome is unknown (a lost
// connection, Config.Timeout) fail the journal: it returns
// journal.ErrFailed from then on, which the kernel treats as every storage
// failure, fail-stop: the world refuses work and journals nothing for the
// turn that met it. An append whose commit is unknown was never
// acknowledged; if it did commit, the next owner's journal holds it, as a
// Badger journal holds a frame made durable just before a crash. The
// owner's host hears of a fenced append through OnFenced (before the
// Append returns), and fails the journal itself with Fail when it learns
// of the new owner otherwise (a renewal refused): it then stops before its
// next append reaches the database.
//
// The expected-height check refuses (ErrConflict) an append by a second
// handle on the same lease whose view of the journal is stale; the frames'
// primary key and the partitions row's CHECK (first <= height + 1) would
// refuse most such appends too, with a database error instead of one that
// says what happened.
//
// Every other write that could hurt a new owner is fenced the same way:
// DropBefore moves first, and deletes frames and marks, only while its
// epoch is current; the CAS deletes objects only while the epoch of the
// lease it was made with is current (the statement locks the partitions
// row in share mode, so an Acquire waits for it or it finds the new
// epoch). Without that, a fenced node finishing a garbage collection could
// delete objects the new owner had just written, which its Guard never
// saw. CAS writes are not fenced: objects are immutable, and an object
// written by a fenced node is garbage like any other.
//
// Release moves the epoch on too, so nothing written through a released
// lease lands; Acquire by the lease's own owner succeeds at once (a node
// that restarted takes its lease back, fencing its former incarnation).
//
// # Durability
//
// An Append returns once PostgreSQL has reported its commit. The
// synchronous pool's connections are checked as they are made: fsync must
// be on, and synchronous_commit must not be off (Open fails with
// ErrNotDurable otherwise, whether the server, the database, the role or
// the connection string set it). With synchronous_commit on, the commit's
// WAL record is flushed on the primary before the commit returns and, when
// synchronous_standby_names names standbys, on them too (remote_apply also
// waits for them to apply it; local and remote_write wait for less on
// standbys). What aos requires of the database is therefore: fsync on,
// synchronous_commit on, and, for a world that must survive the loss of
// the primary, a synchronous standby.
//
// CAS writes go through the second pool, whose sessions set
// synchronous_commit off: their commits return without waiting for the WAL
// flush. The WAL is one ordered log: a journal append's synchronous commit
// flushes it through its own commit record, so every object committed
// before that append began is durable once the append returns. Callers
// already write the objects a record names before appending the record (the
// kernel does; cas.Store says so), so objects are durable before anything
// naming them is acknowledged, as on Badger, where an append syncs the CAS
// first. An object no record names yet may be lost by a crash of the
// server; nothing refers to it. The background notifier (below) uses the
// second pool too: a notification needs no flush.
//
// TestAcknowledgedSurvivesServerCrash holds this to a crash of the server
// (an immediate shutdown, with the WAL writer held to its slowest so that
// only commits flush): every acknowledged append and every object written
// before it is there after recovery. An object written without an append
// after it was lost in such a crash each of three times we tried: the
// append's flush is what keeps them.
//
// # Reads
//
// A range read takes frames in chunks (4 frames, doubling to 256), each
// chunk one statement starting at the frame holding the next seq, and
// hands fn the records as rows arrive; no snapshot stays open across a long
// read. Config.Timeout bounds how long the database keeps a read waiting,
// with the clock stopped while fn (or DropBefore's archive) works on a
// frame: a replay stepping through a chunk may take longer than the
// timeout without anything being wrong. A DropBefore deletes frames and moves first in one transaction, so
// a chunk sees all of a drop or none of it: a read overtaken by retention
// meets a frame missing below the database's first and returns
// journal.ErrTruncated after the records before it, never a gap. A frame
// missing above first is journal.ErrCorrupt.
//
// # Followers
//
// A standby follows the journal through DB.Follow: reads, Wait, no writes.
// The owner's appends do not NOTIFY in their own transaction: PostgreSQL
// serializes notifying commits cluster-wide behind one lock held through
// the WAL flush, which would serialize every partition's group commits.
// The owner's notifier goroutine instead sends the height reached after
// each append (coalesced) with pg_notify on the asynchronous pool, off the
// append's path; the follower LISTENs on a connection of its own and also
// reads the partitions row every Config.FollowPoll, which bounds how long
// a lost notification (an owner dying between an append and its
// notification) delays it.
//
// # Performance
//
// A group commit is one round trip and one WAL flush: appendSQL carries the
// fence, the frame and the marks, as a statement pgx prepares once per
// connection and then only binds and executes. Storing the frame as one row
// (what Badger stores under one key) was measured against one row per
// record, by a multi-row insert in the fence's statement and by COPY after
// the fence's update (docs/PERFORMANCE.md).
//
// # Concurrency
//
// Appends are serialized by a mutex; DropBefore by another, held while
// archive runs. Reads, Marks and the CAS use the pools from any goroutine;
// fn and Iterate's callbacks may use the stores.
package pgdb
