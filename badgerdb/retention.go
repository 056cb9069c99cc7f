package badgerdb

import (
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// firstKey holds, once DropBefore has run, the First it set (8 bytes,
// big-endian). Open takes First from the first frame's key while any frame
// is left; the key matters when every frame was dropped, for then it is
// all that says where the journal ends.
const firstKey = "meta/first"

// defaultDropChunk is how many frames DropBefore deletes per chunk: it
// bounds the keys held in memory and how long one read transaction stays
// open while archive runs.
const defaultDropChunk = 4096

// DropBefore removes, oldest first, every whole frame whose last record's
// seq is below before, and the marks of their records; a frame holding
// before (or straddling it) is kept, so First() may stay below before.
// When archive is not nil it is called with each frame's first seq and its
// stored bytes (journal.EncodeFrame form, checked with journal.DecodeFrame
// first) before the frame is deleted; frame is valid only during the call.
// An error from archive stops the drop: that frame and the later ones stay,
// the earlier ones (already archived) are deleted, and the error is
// returned with the stats of what was deleted. before past Height()+1 is an
// error and deletes nothing; before <= First() deletes nothing. The height
// is never touched. archive may read the journal and Append to it, but
// must not call DropBefore.
//
// Frames go in chunks: each chunk's new First is written and synced, then
// First moves, then its frames and marks are deleted with a WriteBatch and
// synced. A crash mid-chunk leaves frames below the recorded First, which
// Open finds again (First is the first frame's key) and a later DropBefore
// deletes; marks it leaves below First are never returned by Marks.
func (j *Journal) DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error) {
	j.dropMu.Lock()
	defer j.dropMu.Unlock()
	height := j.Height()
	if err := journal.CheckDropBefore(before, height); err != nil {
		return journal.DropStats{First: j.First()}, err
	}
	var st journal.DropStats
	for {
		c, done, err := j.scanDroppable(before, height, archive)
		if len(c.keys) > 0 {
			if derr := j.deleteChunk(c); derr != nil {
				err = fmt.Errorf("journal: drop before seq %d: %w", before, derr)
				done = true
			} else {
				st.Frames += len(c.keys)
				st.Records += c.records
				st.Bytes += c.bytes
			}
		}
		if err != nil || done {
			st.First = j.First()
			return st, err
		}
	}
}

// dropChunk is one chunk of frames DropBefore deletes.
type dropChunk struct {
	keys     [][]byte // frame keys, in seq order
	newFirst uint64   // the first seq kept once they are gone
	records  int
	bytes    int64
}

// scanDroppable finds, from First on, up to j.dropChunk frames whose last
// record is below before (frames past height, appended since the drop
// began, are never considered) and archives them. done is true when no
// droppable frame follows the chunk; err is an archive or read failure,
// which stops the chunk before the frame it hit.
func (j *Journal) scanDroppable(before, height uint64, archive func(uint64, []byte) error) (c dropChunk, done bool, err error) {
	err = j.db.View(func(txn *badger.Txn) error {
		// The frames' keys first, and one more: frame i ends right before
		// frame i+1 starts, and the frame holding height ends at height.
		var starts []uint64
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(journalPrefix)
		it := txn.NewIterator(opts)
		for it.Seek(frameKey(j.First())); it.Valid() && len(starts) <= j.dropChunk; it.Next() {
			s, err := seqFromKey(it.Item().Key())
			if err != nil {
				it.Close()
				return err
			}
			if s > height {
				break
			}
			starts = append(starts, s)
		}
		it.Close()
		done = len(starts) <= j.dropChunk
		for i, first := range starts[:min(len(starts), j.dropChunk)] {
			next := height + 1
			if i+1 < len(starts) {
				next = starts[i+1]
			}
			if next > before {
				done = true // its last record is at or past before: kept
				return nil
			}
			n, err := j.archiveFrame(txn, first, next, archive)
			if err != nil {
				done = true
				return fmt.Errorf("journal: drop before seq %d: archive the frame at seq %d: %w", before, first, err)
			}
			c.keys = append(c.keys, frameKey(first))
			c.newFirst = next
			c.records += int(next - first)
			c.bytes += n
		}
		return nil
	})
	return c, done, err
}

// archiveFrame hands the frame first..next-1 to archive, when there is one,
// after checking it decodes to exactly those records, and returns its size.
func (j *Journal) archiveFrame(txn *badger.Txn, first, next uint64, archive func(uint64, []byte) error) (int64, error) {
	item, err := txn.Get(frameKey(first))
	if err != nil {
		return 0, err
	}
	var n int64
	err = item.Value(func(v []byte) error {
		n = int64(len(v))
		if archive == nil {
			return nil
		}
		recs, err := journal.DecodeFrame(first, v)
		if err != nil {
			return err
		}
		if last := recs[len(recs)-1].Seq; last != next-1 {
			return fmt.Errorf("%w: frame at seq %d ends at seq %d, the next starts at seq %d", journal.ErrCorrupt, first, last, next)
		}
		return archive(first, v)
	})
	return n, err
}

// deleteChunk deletes a chunk's frames and the marks below its new First.
// The new First is durable, and First() has moved, before anything is
// deleted: a reader never finds a frame missing above First, and a journal
// all of whose frames are gone still knows its height at the next Open.
func (j *Journal) deleteChunk(c dropChunk) error {
	marks, err := j.marksBelow(c.newFirst)
	if err != nil {
		return err
	}
	// The new First and a tombstone per key are writes too (a mark's key
	// is a few bytes longer than a frame's).
	n := int64(1+len(c.keys)+len(marks)) * int64(frameKeyLen+16+entryOverhead)
	cst := cost{disk: n, lsm: n}
	if err := j.space.admit(cst); err != nil {
		return fmt.Errorf("drop frames before seq %d: %w", c.newFirst, err)
	}
	defer j.space.release(cst)
	err = j.db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(firstKey), binary.BigEndian.AppendUint64(nil, c.newFirst))
	})
	if err == nil {
		err = j.syncStore()
	}
	if err != nil {
		return fmt.Errorf("record first seq %d: %w", c.newFirst, err)
	}
	j.first.Store(c.newFirst)
	wb := j.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range append(c.keys, marks...) {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("delete %q: %w", k, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("delete frames before seq %d: %w", c.newFirst, err)
	}
	if err := j.syncStore(); err != nil {
		return fmt.Errorf("delete frames before seq %d: sync: %w", c.newFirst, err)
	}
	return nil
}

// marksBelow lists the mark keys of every indexed kind with a seq below
// first, including any an interrupted drop left behind.
func (j *Journal) marksBelow(first uint64) ([][]byte, error) {
	var keys [][]byte
	err := j.db.View(func(txn *badger.Txn) error {
		for _, k := range journal.IndexedKinds() {
			opts := badger.DefaultIteratorOptions
			opts.PrefetchValues = false
			opts.Prefix = markKindPrefix(k)
			it := txn.NewIterator(opts)
			end := markKey(k, first)
			for it.Rewind(); it.Valid() && string(it.Item().Key()) < string(end); it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find marks below seq %d: %w", first, err)
	}
	return keys, nil
}
