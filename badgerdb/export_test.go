package badgerdb

import (
	"path/filepath"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// Badger exposes the database so tests can forge and count keys.
func (d *DB) Badger() *badger.DB { return d.db }

// NewCAS is a CAS over a database opened with other options (e.g. the
// compression of older worlds).
func NewCAS(db *badger.DB) *CAS { return &CAS{db: db, writes: new(atomic.Uint64)} }

// ForgetMarks deletes the kind index and its done flag: what a world
// written before the index existed holds.
func (d *DB) ForgetMarks() error {
	if err := d.db.DropPrefix([]byte(markPrefix)); err != nil {
		return err
	}
	return d.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(marksDoneKey)) })
}

// SetDropChunk makes DropBefore delete n frames per chunk, so tests cross
// chunk boundaries with few frames.
func (j *Journal) SetDropChunk(n int) { j.dropChunk = n }

// ForgeMark writes a mark for seq, as a drop interrupted between its
// chunk's First and its deletes leaves one behind.
func (d *DB) ForgeMark(k journal.Kind, seq uint64) error {
	return d.db.Update(func(txn *badger.Txn) error { return txn.Set(markKey(k, seq), nil) })
}

// ForgeFrame overwrites the frame stored under seq first.
func (d *DB) ForgeFrame(first uint64, v []byte) error {
	return d.db.Update(func(txn *badger.Txn) error { return txn.Set(frameKey(first), v) })
}

// TailName is the journal tail's file name in the Badger directory.
const TailName = tailName

// TailHeaderLen is the size of a tail holding no records.
const TailHeaderLen = tailHeaderLen

// Syncs counts the Badger syncs (DB.Sync and the files it leaves out) and
// the tail fdatasyncs the journal has made since Open.
func (j *Journal) Syncs() (badgerSyncs, tailSyncs uint64) {
	return j.syncs.badger.Load(), j.syncs.tail.Load()
}

// SetTailLimit makes Append checkpoint once the tail holds n bytes.
func (j *Journal) SetTailLimit(n int64) {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.tailLimit, j.nextCheck = n, n
}

// LoseFrame deletes the frame stored under seq first and the marks of its
// records from Badger, and nothing from the tail: what a machine crash
// leaves of a frame Badger had not synced.
func (d *DB) LoseFrame(first uint64) error {
	return d.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(frameKey(first))
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		recs, err := journal.DecodeFrame(first, v)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if journal.Indexed(r.Kind) {
				if err := txn.Delete(markKey(r.Kind, r.Seq)); err != nil {
					return err
				}
			}
		}
		return txn.Delete(frameKey(first))
	})
}

// CloseKeepTail closes Badger and the tail without starting the tail
// afresh, as a crash leaves it (Badger's own close is clean).
func (d *DB) CloseKeepTail() error {
	d.journal.stopSyncer()
	err := d.db.Close()
	d.journal.closeTail()
	d.space.close()
	return err
}

// TailUsed is the bytes of the tail's header and records: what Open
// replays. The file may be longer (zeros ahead, stale records behind).
func (j *Journal) TailUsed() int64 {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	return j.tail.size
}

// TailReplayed is how many frames Open put back from the tail.
func (j *Journal) TailReplayed() int { return j.replayed }

// TailBase is the seq through which the tail says Badger is durable.
func (j *Journal) TailBase() uint64 {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	return j.tail.base
}

// BreakTail closes the tail's file under the journal, so the next
// Append's write to it fails as a failing disk would.
func (j *Journal) BreakTail() {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.tail.f.Close()
}

// SetBackgroundSync makes every Append that brings the tail's bytes since
// the last ask to n ask the background syncer for a sync, and sets its
// hooks: before runs after it has read the CAS's write count and before it
// syncs, after once a sync succeeded (either may be nil). Call it before
// the Appends it is for: an Append's ask orders it before the syncer reads
// the hooks.
func (j *Journal) SetBackgroundSync(n int64, before, after func()) {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.bg.every, j.bg.pending = n, 0
	j.bg.beforeSync, j.bg.afterSync = before, after
}

// AskBackgroundSync asks the background syncer for a sync, as an Append
// does every so many tail bytes.
func (j *Journal) AskBackgroundSync() { j.bg.ask() }

// BackgroundSyncs counts the background syncer's syncs since Open.
func (j *Journal) BackgroundSyncs() uint64 { return j.syncs.background.Load() }

// BackgroundSyncerDone is closed once the background syncer has returned:
// after a failed sync, or once the journal is closed.
func (j *Journal) BackgroundSyncerDone() <-chan struct{} { return j.bg.done }

// BreakSyncDir points the journal's syncs at a directory that does not
// exist, so the next Badger sync fails as a failing disk's would.
func (j *Journal) BreakSyncDir() {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	j.dir = filepath.Join(j.dir, "gone")
}

// SetFree makes the free-space guard see free(), not statfs, as the bytes
// free on the store's filesystem.
func (d *DB) SetFree(free func() int64) {
	d.space.free = func(string) (int64, error) { return free(), nil }
}

// SetTables makes the guard count n bytes of tables and no LSM bytes
// since, as if it had just measured them.
func (d *DB) SetTables(n int64) {
	d.space.measured.Store(n)
	d.space.pending.Store(0)
	d.space.since.Store(0)
	d.space.tables = func() int64 { return n }
}

// Reserve is the reserve the guard keeps.
func (d *DB) Reserve() int64 { return d.space.reserve }

// OpenWithFree is OpenWith with free() as the bytes free on dir's
// filesystem, from before Badger opens.
func OpenWithFree(dir string, o Options, free func() int64) (*DB, error) {
	return openWith(dir, o, func(string) (int64, error) { return free(), nil })
}

// NoSpace is how the store reports a write the operating system refused.
func (d *DB) NoSpace(err error) error { return d.space.noSpace(err) }

// WithoutGuard turns the free-space guard off, for the benchmarks that
// measure what it costs.
func (d *DB) WithoutGuard() {
	d.journal.space, d.cas.space = nil, nil
}

// SetReleaseEvery sets how many frame bytes a Read goes through between
// two releases of the mapped pages; it returns the old value.
func SetReleaseEvery(n int64) int64 {
	old := releaseEvery
	releaseEvery = n
	return old
}

// ReleaseMapped releases the store's mapped pages now.
func (j *Journal) ReleaseMapped() int64 { return releaseMapped(j.mapDir) }
