package badgerdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// journalPrefix is the journal's share of the world's Badger key space.
const journalPrefix = "j/"

const frameKeyLen = len(journalPrefix) + 8

// Journal is the world's append-only record sequence, stored in frames in
// the Badger database it shares with the CAS. One goroutine may Append at a
// time (concurrent Appends are serialized); any number may Read and Wait.
type Journal struct {
	db    *badger.DB
	tip   journal.Tip
	first atomic.Uint64 // the lowest seq held

	appendMu sync.Mutex // serializes Append
	failed   error      // sticky; guarded by appendMu

	// On disk, the tail makes each Append durable with one fdatasync
	// (tail.go); nil in memory, where Append syncs nothing. Guarded by
	// appendMu, as are the fields below.
	tail      *tail
	dir       string
	mapDir    string        // dir as /proc/self/maps names its files (releaseMapped); "" in memory
	tailLimit int64         // checkpoint once the tail is this big (defaultTailLimit)
	nextCheck int64         // the tail size at which the next checkpoint is tried
	vlogFrom  atomic.Uint64 // value-log files numbered below it were synced full

	// casWrites counts the CAS's writes; casSynced is the highest count a
	// finished Badger sync covered (an Append's or the background
	// syncer's). An Append that finds casWrites above it syncs Badger
	// first, so objects are durable before the records naming them.
	casWrites *atomic.Uint64
	casSynced atomic.Uint64

	// The background syncer (bgsync.go) syncs Badger off the append path
	// whenever the tail has taken bgSyncBytes since it was last asked,
	// so the syncs an Append must make itself (a checkpoint's, or one
	// before records naming new objects) find little left to write.
	bg bgSyncer

	// committed receives the result of the Badger commit an Append started
	// (commitDone, its callback); one at a time, under appendMu.
	committed  chan error
	commitDone func(error)

	syncs    syncCounts
	replayed int // frames Open put back from the tail, for tests

	// space refuses a write that would leave the disk too full for
	// Badger's mapped writes (space.go); nil in memory.
	space *space

	dropMu    sync.Mutex // serializes DropBefore; held while archive runs
	dropChunk int        // frames deleted per chunk (defaultDropChunk)
}

// syncCounts counts device flushes by kind, for tests and benchmarks.
type syncCounts struct {
	badger     atomic.Uint64 // DB.Sync calls by Append and checkpoints
	background atomic.Uint64 // Badger syncs by the background syncer
	tail       atomic.Uint64 // fdatasyncs of the tail
}

// openJournal opens the journal kept in db under "j/", puts back from the
// tail in dir whatever frames Badger lost, recovers Height from the last
// frame and makes every frame Badger holds durable: those above the tail's
// base are copied into the tail. dir is "" in memory (no tail).
func openJournal(db *badger.DB, dir string, casWrites *atomic.Uint64, sp *space) (*Journal, error) {
	j := &Journal{db: db, dropChunk: defaultDropChunk, dir: dir, tailLimit: defaultTailLimit, casWrites: casWrites,
		committed: make(chan error, 1), space: sp}
	j.commitDone = func(err error) { j.committed <- err }
	if dir != "" {
		j.mapDir = mappedDir(dir)
	}
	var frames []tailFrame
	tailOK := false
	if dir != "" {
		t, fs, ok, err := openTail(dir)
		if err != nil {
			return nil, err
		}
		j.tail, frames, tailOK = t, fs, ok
		if err := j.replayTail(frames); err != nil {
			j.tail.close()
			return nil, err
		}
	}
	if err := j.recoverHeight(); err != nil {
		j.closeTail()
		return nil, err
	}
	if err := j.loadFirst(); err != nil {
		j.closeTail()
		return nil, err
	}
	if err := j.backfillMarks(); err != nil {
		j.closeTail()
		return nil, err
	}
	if j.tail != nil {
		if err := j.settleTail(tailOK); err != nil {
			j.closeTail()
			return nil, err
		}
		j.startSyncer()
	}
	return j, nil
}

func (j *Journal) closeTail() {
	if j.tail != nil {
		j.tail.close()
	}
}

// recoverHeight sets Height from the last frame.
func (j *Journal) recoverHeight() error {
	err := j.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Reverse = true
		opts.Prefix = []byte(journalPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Seek(frameKey(^uint64(0)))
		if !it.Valid() {
			return nil // empty journal
		}
		recs, err := decodeFrame(it.Item())
		if err != nil {
			return err
		}
		j.tip.Advance(recs[len(recs)-1].Seq)
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: open: recover height: %w", err)
	}
	return nil
}

// replayTail writes the tail's frames (and their marks) into Badger again,
// as Append did: a crash of the machine may have lost them from Badger,
// which was not synced. Frames below the First that retention recorded were
// dropped after they were appended, and stay dropped.
func (j *Journal) replayTail(frames []tailFrame) error {
	if len(frames) == 0 {
		return nil
	}
	dropped, err := j.recordedFirst()
	if err != nil {
		return err
	}
	// Decoded first, so the guard is asked for all of it before the batch
	// writes anything.
	var put []tailFrame
	var decoded [][]journal.Record
	var c cost
	for _, f := range frames {
		if f.first < dropped {
			continue
		}
		recs, err := journal.DecodeFrame(f.first, f.frame)
		if err != nil {
			return fmt.Errorf("journal: open: tail frame at seq %d: %w", f.first, err)
		}
		put, decoded = append(put, f), append(decoded, recs)
		c = c.plus(appendCost(len(f.frame), recs, false))
	}
	if err := j.space.admit(c); err != nil {
		return fmt.Errorf("journal: open: put back the tail's frames: %w", err)
	}
	defer j.space.release(c)
	wb := j.db.NewWriteBatch()
	defer wb.Cancel()
	for i, f := range put {
		j.replayed++
		if err := wb.Set(frameKey(f.first), f.frame); err != nil {
			return fmt.Errorf("journal: open: put back the frame at seq %d: %w", f.first, err)
		}
		for _, r := range decoded[i] {
			if journal.Indexed(r.Kind) {
				if err := wb.Set(markKey(r.Kind, r.Seq), nil); err != nil {
					return fmt.Errorf("journal: open: put back mark %s %d: %w", r.Kind, r.Seq, err)
				}
			}
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("journal: open: put back the tail's frames: %w", err)
	}
	return nil
}

// settleTail makes every frame Badger holds durable before the journal is
// used: Badger is synced, and the frames above the tail's last seq (an
// Append whose tail write a crash cut, so never acknowledged, but now part
// of the journal) are copied into the tail. A tail with no valid header
// starts afresh at the height.
func (j *Journal) settleTail(ok bool) error {
	if err := j.syncBadger(); err != nil {
		return fmt.Errorf("journal: open: sync: %w", err)
	}
	height := j.Height()
	if !ok {
		if err := j.tail.restart(height); err != nil {
			return fmt.Errorf("journal: open: %w", err)
		}
		j.nextCheck = j.tailLimit
		return nil
	}
	if j.tail.last > height {
		return fmt.Errorf("%w: %s covers seqs through %d (durable in Badger through %d, the rest in the tail), but Badger's journal ends at seq %d: Badger lost frames it had synced", journal.ErrCorrupt, j.tail.path, j.tail.last, j.tail.base, height)
	}
	if j.tail.last < height {
		if err := j.copyToTail(j.tail.last+1, height); err != nil {
			return fmt.Errorf("journal: open: copy frames through seq %d to the tail: %w", height, err)
		}
	}
	j.nextCheck = j.tailLimit
	return nil
}

// copyToTail appends to the tail every frame Badger holds from the one
// holding seq from through height.
func (j *Journal) copyToTail(from, height uint64) error {
	from = max(from, j.First())
	if from > height {
		return nil
	}
	return j.db.View(func(txn *badger.Txn) error {
		start, err := frameStart(txn, from)
		if err != nil {
			return err
		}
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(journalPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(frameKey(start)); it.Valid(); it.Next() {
			recs, err := decodeFrame(it.Item())
			if err != nil {
				return err
			}
			first, last := recs[0].Seq, recs[len(recs)-1].Seq
			if first <= j.tail.last {
				continue // already in the tail
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := j.tail.append(first, last, v); err != nil {
				return j.space.noSpace(err)
			}
			j.syncs.tail.Add(1)
		}
		return nil
	})
}

// syncBadger makes everything committed to Badger before it durable:
// DB.Sync, then the files DB.Sync leaves out (syncFiles). It records that
// every CAS write counted before it is durable.
func (j *Journal) syncBadger() error {
	writes := j.casWrites.Load()
	if err := j.syncStore(); err != nil {
		return err
	}
	j.noteSynced(writes)
	j.syncs.badger.Add(1)
	return nil
}

// noteSynced records that every CAS write counted up to writes is durable.
// The background syncer and an Append may finish syncs in either order:
// casSynced only rises.
func (j *Journal) noteSynced(writes uint64) {
	for {
		old := j.casSynced.Load()
		if writes <= old || j.casSynced.CompareAndSwap(old, writes) {
			return
		}
	}
}

// syncStore makes everything committed to Badger before it durable: DB.Sync
// and, on disk, the files DB.Sync leaves out (syncFiles).
func (j *Journal) syncStore() error {
	if err := j.db.Sync(); err != nil {
		return err
	}
	if j.dir == "" {
		return nil
	}
	from := j.vlogFrom.Load()
	maxVlog, err := syncFiles(j.dir, from)
	if err != nil {
		return err
	}
	// The newest file may take more writes: it is synced again next time.
	j.vlogFrom.CompareAndSwap(from, maxVlog)
	return nil
}

// Height is the last durable sequence number, 0 when the journal is empty.
func (j *Journal) Height() uint64 { return j.tip.Height() }

// Wait blocks until Height() > after, returning the new height, or until ctx
// is done, returning ctx.Err().
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	return j.tip.Wait(ctx, after)
}

// Append writes recs as one frame in one Badger transaction and makes it
// durable before returning; only then do Height and waiters see it. On disk
// that is one fdatasync of the tail, preceded by a Badger sync only when the
// CAS was written since the last one (doc.go, "Durability"). recs[0].Seq
// must be Height()+1 and the seqs consecutive, or Append returns
// journal.ErrGap and writes nothing. Appending no records is a no-op. recs
// is not retained.
func (j *Journal) Append(recs []journal.Record) error {
	if len(recs) == 0 {
		return nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	if j.failed == nil {
		j.failed = j.bg.failure()
	}
	if j.failed != nil {
		return fmt.Errorf("%w (%v)", journal.ErrFailed, j.failed)
	}
	if err := journal.CheckContinues(j.Height(), recs); err != nil {
		return err
	}
	first, last := recs[0].Seq, recs[len(recs)-1].Seq
	val := journal.EncodeFrame(recs)
	// A write-only transaction reads no keys, so it cannot hit ErrConflict.
	txn := j.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(frameKey(first), val); err != nil {
		// Nothing was written (e.g. a frame over Badger's value size
		// limit): the journal stays usable.
		return fmt.Errorf("journal: append %d..%d (%d bytes): %w", first, last, len(val), err)
	}
	for _, r := range recs {
		if journal.Indexed(r.Kind) {
			// In the frame's transaction: a mark exists exactly when its
			// record does.
			if err := txn.Set(markKey(r.Kind, r.Seq), nil); err != nil {
				return fmt.Errorf("journal: append %d..%d: mark %s %d: %w", first, last, r.Kind, r.Seq, err)
			}
		}
	}
	c := appendCost(len(val), recs, j.tail != nil)
	if err := j.space.admit(c); err != nil {
		// Nothing was written: the journal stays usable once space is
		// freed, but the world that asked stops (a storage failure).
		return fmt.Errorf("journal: append %d..%d (%d bytes): %w", first, last, len(val), err)
	}
	defer j.space.release(c)
	if j.tail == nil {
		if err := txn.Commit(); err != nil {
			j.failed = err
			return fmt.Errorf("journal: append %d..%d: commit: %w", first, last, err)
		}
		j.tip.Advance(last)
		return nil
	}
	if j.casWrites.Load() > j.casSynced.Load() {
		// The records may name objects written since the last sync: they
		// must be durable first, and only a Badger sync makes them so.
		if err := j.syncBadger(); err != nil {
			j.failed = err
			return fmt.Errorf("journal: append %d..%d: sync the objects before it: %w", first, last, err)
		}
	}
	// Badger's commit (a hand-off to its writer goroutine, the value log
	// and memtable writes, and the hand-off back) runs while the tail is
	// written and flushed, instead of before: the append waits for the
	// longer of the two, not their sum. Either failing fails the journal
	// and the append returns an error with the height unchanged. A frame
	// the tail made durable while Badger's commit failed is recovered by
	// the next Open, as a frame durable at a crash before its answer is:
	// its appender was answered with an error, never with success.
	txn.CommitWith(j.commitDone)
	tailErr := j.tail.append(first, last, val)
	if err := <-j.committed; err != nil {
		j.failed = err
		return fmt.Errorf("journal: append %d..%d: commit: %w", first, last, err)
	}
	if tailErr != nil {
		tailErr = j.space.noSpace(tailErr)
		j.failed = tailErr
		return fmt.Errorf("journal: append %d..%d: %w", first, last, tailErr)
	}
	j.syncs.tail.Add(1)
	j.tip.Advance(last)
	j.bg.appended(int64(tailRecordLen + len(val)))
	if j.tail.size >= j.nextCheck {
		// The frame is durable whatever the checkpoint meets; a failure
		// stops the appends after it.
		if err := j.checkpoint(); err != nil {
			j.failed = err
		}
	}
	return nil
}

// appendCost is what an Append of a frame of n bytes holding recs may
// allocate: the frame and its marks in Badger and, with a tail, the frame's
// tail record and the step of zeros the tail may grow by.
func appendCost(n int, recs []journal.Record, tailed bool) cost {
	var c cost
	c.add(frameKeyLen, n)
	for _, r := range recs {
		if journal.Indexed(r.Kind) {
			c.add(len(markPrefix)+len(r.Kind)+1+8, 0)
		}
	}
	if tailed {
		c.disk += int64(tailRecordLen+n) + tailGrowStep
	}
	return c
}

// checkpoint makes Badger durable and starts the tail afresh at the
// height: every frame the tail held is then durable in Badger.
func (j *Journal) checkpoint() error {
	if err := j.syncBadger(); err != nil {
		return fmt.Errorf("journal: checkpoint: sync: %w", err)
	}
	if err := j.tail.restart(j.Height()); err != nil {
		return fmt.Errorf("journal: checkpoint: %w", err)
	}
	j.nextCheck = j.tailLimit
	return nil
}

// settle makes everything committed to Badger durable and starts the tail
// afresh, so the next Open replays nothing. DB.Close calls it before
// closing Badger, whose Close flushes the memtables but does not sync the
// value log.
func (j *Journal) settle() error {
	if j.tail == nil {
		return nil
	}
	j.stopSyncer()
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	if j.failed == nil {
		j.failed = j.bg.failure()
	}
	if j.failed != nil {
		return nil // Open will recover what is stored
	}
	if err := j.syncBadger(); err != nil {
		return fmt.Errorf("journal: close: sync: %w", err)
	}
	if err := j.tail.restart(j.Height()); err != nil {
		return fmt.Errorf("journal: close: %w", err)
	}
	return nil
}

// Read calls fn for every durable record with seq >= from, in order, until fn
// returns false or an error (which Read returns). It reads one consistent
// snapshot bounded by the Height at the call: records appended meanwhile are
// not seen. from 0 reads from the start. A from below First (the start
// included, once retention dropped it) is journal.ErrTruncated.
func (j *Journal) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	height := j.Height()
	from = max(from, 1)
	if from > height {
		return nil
	}
	return j.db.View(func(txn *badger.Txn) error {
		// First is loaded after the snapshot is taken, and DropBefore moves
		// First before it deletes: a First this old means the snapshot
		// still holds every frame from it on.
		if first := j.First(); from < first {
			return journal.TruncatedError(first, from)
		}
		start, err := frameStart(txn, from)
		if err != nil {
			return err
		}
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // a frame can be large; decode one at a time
		opts.Prefix = []byte(journalPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		s := journal.NewScan(from, height, start, fn)
		var read int64 // frame bytes since the last releaseMapped
		for it.Seek(frameKey(start)); it.Valid(); it.Next() {
			if read += it.Item().ValueSize(); read >= releaseEvery {
				releaseMapped(j.mapDir)
				read = 0
			}
			recs, err := decodeFrame(it.Item())
			if err != nil {
				return err
			}
			if done, err := s.Frame(recs); done {
				return err
			}
		}
		return s.End()
	})
}

// releaseEvery is how many bytes of frames a Read goes through between two
// releases of the store's mapped pages (releaseMapped): a read of the whole
// journal keeps about this much of it resident, not all of it.
var releaseEvery int64 = 64 << 20

// mappedDir is dir as /proc/self/maps names the files in it: absolute,
// symlinks resolved, with a trailing separator.
func mappedDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	return abs + string(filepath.Separator)
}

// ReadKind is Read restricted to records of the given kinds.
func (j *Journal) ReadKind(from uint64, kinds []journal.Kind, fn func(journal.Record) (bool, error)) error {
	return j.Read(from, journal.OnlyKinds(kinds, fn))
}

// frameStart returns the first seq of the frame holding seq: the frame with
// the greatest key <= frameKey(seq), found with a reverse seek.
func frameStart(txn *badger.Txn, seq uint64) (uint64, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Reverse = true
	opts.Prefix = []byte(journalPrefix)
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(frameKey(seq))
	if !it.Valid() {
		return 0, fmt.Errorf("%w: no frame holds seq %d", journal.ErrCorrupt, seq)
	}
	return seqFromKey(it.Item().Key())
}

func frameKey(seq uint64) []byte {
	k := make([]byte, frameKeyLen)
	copy(k, journalPrefix)
	binary.BigEndian.PutUint64(k[len(journalPrefix):], seq)
	return k
}

func seqFromKey(k []byte) (uint64, error) {
	if len(k) != frameKeyLen || !bytes.HasPrefix(k, []byte(journalPrefix)) {
		return 0, fmt.Errorf("%w: malformed key %q", journal.ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[len(journalPrefix):]), nil
}

// decodeFrame decodes the frame at item and checks it against its key
// (journal.DecodeFrame).
func decodeFrame(item *badger.Item) ([]journal.Record, error) {
	first, err := seqFromKey(item.Key())
	if err != nil {
		return nil, err
	}
	var recs []journal.Record
	var decErr error
	err = item.Value(func(v []byte) error {
		// Body slices must outlive the transaction: DecodeFrame copies, so
		// decoding straight from Badger's buffer is safe.
		recs, decErr = journal.DecodeFrame(first, v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: frame at seq %d: %v", journal.ErrCorrupt, first, err)
	}
	return recs, decErr
}
