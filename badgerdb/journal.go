package badgerdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
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

	dropMu    sync.Mutex // serializes DropBefore; held while archive runs
	dropChunk int        // frames deleted per chunk (defaultDropChunk)
}

// openJournal opens the journal kept in db under "j/" and recovers Height
// from the last frame.
func openJournal(db *badger.DB) (*Journal, error) {
	j := &Journal{db: db, dropChunk: defaultDropChunk}
	err := db.View(func(txn *badger.Txn) error {
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
		return nil, fmt.Errorf("journal: open: recover height: %w", err)
	}
	if err := j.loadFirst(); err != nil {
		return nil, err
	}
	if err := j.backfillMarks(); err != nil {
		return nil, err
	}
	return j, nil
}

// Height is the last durable sequence number, 0 when the journal is empty.
func (j *Journal) Height() uint64 { return j.tip.Height() }

// Wait blocks until Height() > after, returning the new height, or until ctx
// is done, returning ctx.Err().
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	return j.tip.Wait(ctx, after)
}

// Append writes recs as one frame in one Badger transaction and fsyncs it
// before returning; only then do Height and waiters see it. recs[0].Seq must
// be Height()+1 and the seqs consecutive, or Append returns journal.ErrGap
// and writes nothing. Appending no records is a no-op. recs is not retained.
func (j *Journal) Append(recs []journal.Record) error {
	if len(recs) == 0 {
		return nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
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
	if err := txn.Commit(); err != nil {
		j.failed = err
		return fmt.Errorf("journal: append %d..%d: commit: %w", first, last, err)
	}
	if err := j.db.Sync(); err != nil {
		j.failed = err
		return fmt.Errorf("journal: append %d..%d: sync: %w", first, last, err)
	}
	j.tip.Advance(last)
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
		for it.Seek(frameKey(start)); it.Valid(); it.Next() {
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
