package badgerdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// ErrLocked reports a world directory whose Badger lock is held by another
// process (or by another open handle in this process).
var ErrLocked = errors.New("badgerdb: world directory is locked")

// badgerLockMsg is the text Badger puts in its directory-lock error. Badger
// formats the underlying flock error with %+v rather than %w, so errors.Is
// cannot see EWOULDBLOCK; the message is the only stable signal.
const badgerLockMsg = "Cannot acquire directory lock"

// valueThreshold: values larger than this live in Badger's value log and the
// LSM keeps a pointer. CAS nodes (a few KB) and journal frames (up to MBs) are
// then appended once instead of being copied through the memtable skiplist and
// every compaction; measured on materializing 100,000 cells (docs/PERFORMANCE.md).
const valueThreshold = 1 << 10

// blockCacheSize bounds Badger's block cache (its default is 256 MiB). Cell
// states are cached by the cells LRU above it and the OS page cache below it,
// so 64 MiB keeps a world's heap bounded at no measured cost.
const blockCacheSize = 64 << 20

// numMemtables bounds the memtables Badger keeps while earlier ones flush;
// its default of 5 let a million-cell world's heap reach 429 MiB. Values
// over valueThreshold go to the value log, so memtables fill slowly and
// three are enough to absorb flushes.
const numMemtables = 3

// numCompactors is how many compaction goroutines Badger runs (its default
// is 4). Each wakes on a 50 ms ticker of its own to look for work, busy or
// idle: with two, an idle daemon made about 40 % fewer wake-up system calls
// and spent 0.9-1.05 % of a core against 1.25-1.45 % with four
// (docs/PERFORMANCE.md, issue 33), which matters to whoever runs many quiet
// worlds on one host. Two is Badger's least (one gives L0 priority, the
// other the rest); frames over valueThreshold go to the value log, so the
// LSM and its compactions stay small.
const numCompactors = 2

// memTableSize is 16 MiB, not Badger's 64: after a crash Badger replays the
// unflushed memtables' write-ahead log into skiplists before Open returns,
// and that was most of reopening a killed world (a 1M-record world: Badger's
// open 0.33 -> 0.16 s, the whole reopen 0.82 -> 0.60 s, medians of 5; live
// ingest unchanged within noise; docs/PERFORMANCE.md). Transactions stay far
// below the smaller batch limit (15% of it): the journal's frames and every
// CAS object over valueThreshold go to the value log, and the CAS writes in
// batches that Badger splits itself.
const memTableSize = 16 << 20

// valueLogFileSize is 256 MiB, not Badger's 1 GiB: after a crash Badger reads
// the newest value log file from its start, checking every entry, to find
// where the last complete write ends; on a 10M-record world that scan was
// half of Badger's open (0.4 s of a 1 GiB file). It bounds one value too:
// the largest the kernel writes is a journal frame, at most two loop turns
// of 32 MiB plus one input's records (Limits.MaxBytesPerInput, 64 MiB by
// default), and a manifest's artifacts, bounded by the daemon's 64 MiB apply
// body.
const valueLogFileSize = 256 << 20

// Block compression is off (Badger's default is Snappy). What the LSM holds —
// CAS keys, small states and index nodes, all hashes or hash-laden CBOR —
// barely compresses, and with compression Badger decompresses every block it
// reads into a heap buffer and gives each table it builds a second buffer;
// without it, blocks are read straight from the mmap. TestMillionCells, heap
// after GC: 179 -> 107 MiB at 500,000 cells, 453 -> 240 MiB at 1,000,000 (a
// compaction in flight at both). Tables written with compression earlier
// still read: Badger records each table's compression in its manifest.

// DB is a world's one Badger database and the two ports it serves: the CAS
// (keys "c/...") and the journal (keys "j/...", made durable by its tail).
// An Append syncs Badger first when the CAS was written since the last
// sync, so every CAS object written before it is durable (see doc.go).
type DB struct {
	db      *badger.DB
	cas     *CAS
	journal *Journal
	space   *space // nil in memory
}

// Options are what a caller may choose about a store on disk; the zero
// value is the default.
type Options struct {
	// DiskReserve is the free space, in bytes, the store keeps beyond its
	// tables and the writes under way (space.go): a write that would leave
	// less is refused with ErrDiskFull, and Open refuses to open a store
	// with less. 0 is DefaultDiskReserve, derived from the Badger options
	// Open sets; less than that risks the SIGBUS the reserve is there to
	// prevent. Negative is an error.
	DiskReserve int64
}

// Open opens (creating if needed) the one Badger directory of a world and
// recovers the journal's height from it.
//
// Options: SyncWrites is false because the journal makes its own commits
// durable with DB.Sync (see doc.go); Badger's own logging goes to slog.Default
// at warn level and above. A directory held by another process gives ErrLocked.
func Open(dir string) (*DB, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options. Before Badger writes anything it checks
// that the filesystem holding dir keeps the reserve and the store's tables
// free, or fails with ErrDiskFull (space.go).
func OpenWith(dir string, o Options) (*DB, error) { return openWith(dir, o, nil) }

// openWith is OpenWith with free as the free bytes of a filesystem; nil
// reads the filesystem's: statfs(2) before Badger opens (the directory may
// not exist yet), then fstatfs(2) on the directory, open while the store is.
func openWith(dir string, o Options, free func(string) (int64, error)) (*DB, error) {
	if o.DiskReserve < 0 {
		return nil, fmt.Errorf("badgerdb: open %s: disk reserve %d bytes is negative", dir, o.DiskReserve)
	}
	sp := &space{dir: dir, reserve: o.DiskReserve, free: free}
	if free == nil {
		sp.free = freeSpace
	}
	if sp.reserve == 0 {
		sp.reserve = DefaultDiskReserve
	}
	if err := sp.openCheck(); err != nil {
		return nil, fmt.Errorf("badgerdb: open %s: %w", dir, err)
	}
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithValueThreshold(valueThreshold).
		WithBlockCacheSize(blockCacheSize).
		WithNumMemtables(numMemtables).
		WithNumCompactors(numCompactors).
		WithMemTableSize(memTableSize).
		WithValueLogFileSize(valueLogFileSize).
		WithCompression(options.None).
		WithLogger(slogLogger{slog.Default()})
	db, err := badger.Open(opts)
	if err != nil {
		if strings.Contains(err.Error(), badgerLockMsg) {
			return nil, fmt.Errorf("%w: %s: another process has the world open (%v)", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("badgerdb: open %s: %w", dir, err)
	}
	if free == nil {
		if sp.free, sp.closeDir, err = dirFreeSpace(dir); err != nil {
			db.Close()
			return nil, fmt.Errorf("badgerdb: open %s: %w", dir, err)
		}
	}
	sp.tables = func() int64 { return tableBytes(db) }
	sp.measure()
	return wrap(db, dir, sp)
}

// OpenInMemory opens a database that lives in memory only, for unit tests.
// DB.Sync is a no-op on it, so it proves nothing about durability.
func OpenInMemory() (*DB, error) {
	opts := badger.DefaultOptions("").
		WithInMemory(true).
		WithMemTableSize(8 << 20).
		WithBlockCacheSize(8 << 20).
		WithLogger(slogLogger{slog.Default()})
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("badgerdb: open in memory: %w", err)
	}
	return wrap(db, "", nil)
}

// wrap builds the ports over an open database, closing it if the journal
// cannot be recovered. dir is Badger's directory, "" in memory.
// sp guards its free space (nil in memory).
func wrap(db *badger.DB, dir string, sp *space) (*DB, error) {
	writes := new(atomic.Uint64)
	j, err := openJournal(db, dir, writes, sp)
	if err != nil {
		db.Close()
		sp.close()
		return nil, err
	}
	return &DB{db: db, cas: &CAS{db: db, writes: writes, space: sp}, journal: j, space: sp}, nil
}

// tableBytes is the size of the LSM's tables, every level.
func tableBytes(db *badger.DB) int64 {
	var n int64
	for _, l := range db.Levels() {
		n += l.Size
	}
	return n
}

// CAS is the content-addressed store kept under "c/".
func (d *DB) CAS() *CAS { return d.cas }

// Journal is the journal kept under "j/", its height recovered at Open.
func (d *DB) Journal() *Journal { return d.journal }

// Close closes the database and the journal's tail. Whatever runs on the
// ports (a world) must be closed first.
func (d *DB) Close() error {
	err := d.journal.settle()
	err = errors.Join(err, d.db.Close())
	d.journal.closeTail()
	d.space.close()
	return err
}

// slogLogger adapts badger.Logger to log/slog, dropping info and debug
// chatter (compaction and flush notices) that would drown the daemon's logs.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Errorf(f string, args ...any) { s.log(slog.LevelError, f, args) }
func (s slogLogger) Warningf(f string, args ...any) {
	s.log(slog.LevelWarn, f, args)
}
func (s slogLogger) Infof(string, ...any)  {}
func (s slogLogger) Debugf(string, ...any) {}

func (s slogLogger) log(level slog.Level, f string, args []any) {
	msg := strings.TrimRight(fmt.Sprintf(f, args...), "\n")
	s.l.Log(context.Background(), level, msg, "component", "badger")
}
