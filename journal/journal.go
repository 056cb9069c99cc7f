package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/schemas"
)

// Errors callers branch on.
var (
	// ErrGap reports an Append whose records do not continue the journal
	// exactly: first seq not Height()+1, or seqs not consecutive.
	ErrGap = errors.New("journal: records do not continue the sequence")
	// ErrCorrupt reports a stored frame that does not decode or whose
	// sequence numbers disagree with its key or its neighbours.
	ErrCorrupt = errors.New("journal: corrupt frame")
	// ErrFailed is returned by every Append after one whose commit or fsync
	// failed: what reached the disk is then unknown, so the journal refuses
	// to continue until it is reopened.
	ErrFailed = errors.New("journal: an earlier append failed; reopen the journal")
)

// keyPrefix is the journal's share of the world's Badger key space.
const keyPrefix = "j/"

const keyLen = len(keyPrefix) + 8

// Journal is the world's append-only record sequence, stored in frames in a
// Badger database shared with the CAS. One goroutine may Append at a time
// (concurrent Appends are serialized); any number may Read and Wait.
type Journal struct {
	db *badger.DB

	appendMu sync.Mutex // serializes Append
	failed   error      // sticky; guarded by appendMu

	mu      sync.Mutex
	height  uint64        // last durable seq; guarded by mu
	changed chan struct{} // closed and replaced on every height change; guarded by mu
}

// Open opens the journal kept in db under "j/" and recovers Height from the
// last frame. The caller owns db and closes it after the journal is done.
func Open(db *badger.DB) (*Journal, error) {
	j := &Journal{db: db, changed: make(chan struct{})}
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Reverse = true
		opts.Prefix = []byte(keyPrefix)
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
		j.height = recs[len(recs)-1].Seq
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("journal: open: recover height: %w", err)
	}
	return j, nil
}

// Height is the last durable sequence number, 0 when the journal is empty.
func (j *Journal) Height() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.height
}

// Append writes recs as one frame in one Badger transaction and fsyncs it
// before returning; only then do Height and waiters see it. recs[0].Seq must
// be Height()+1 and the seqs consecutive, or Append returns ErrGap and writes
// nothing. Appending no records is a no-op. recs is not retained.
func (j *Journal) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	if j.failed != nil {
		return fmt.Errorf("%w (%v)", ErrFailed, j.failed)
	}
	if err := checkContinues(j.Height(), recs); err != nil {
		return err
	}
	first, last := recs[0].Seq, recs[len(recs)-1].Seq
	val := encodeFrame(recs)
	// A write-only transaction reads no keys, so it cannot hit ErrConflict.
	txn := j.db.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set(frameKey(first), val); err != nil {
		// Nothing was written (e.g. ErrTxnTooBig): the journal stays usable.
		return fmt.Errorf("journal: append %d..%d (%d bytes): %w", first, last, len(val), err)
	}
	if err := txn.Commit(); err != nil {
		j.failed = err
		return fmt.Errorf("journal: append %d..%d: commit: %w", first, last, err)
	}
	if err := j.db.Sync(); err != nil {
		j.failed = err
		return fmt.Errorf("journal: append %d..%d: sync: %w", first, last, err)
	}
	j.mu.Lock()
	j.height = last
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
	return nil
}

func checkContinues(height uint64, recs []Record) error {
	if recs[0].Seq != height+1 {
		return fmt.Errorf("%w: first record has seq %d, want %d (height %d)", ErrGap, recs[0].Seq, height+1, height)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			return fmt.Errorf("%w: record %d has seq %d after seq %d", ErrGap, i, recs[i].Seq, recs[i-1].Seq)
		}
	}
	return nil
}

// Wait blocks until Height() > after, returning the new height, or until ctx
// is done, returning ctx.Err().
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	for {
		j.mu.Lock()
		h, ch := j.height, j.changed
		j.mu.Unlock()
		if h > after {
			return h, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return h, ctx.Err()
		}
	}
}

// Read calls fn for every durable record with seq >= from, in order, until fn
// returns false or an error (which Read returns). It reads one consistent
// snapshot bounded by the Height at the call: records appended meanwhile are
// not seen. from 0 reads from the start.
func (j *Journal) Read(from uint64, fn func(Record) (bool, error)) error {
	height := j.Height()
	from = max(from, 1)
	if from > height {
		return nil
	}
	return j.db.View(func(txn *badger.Txn) error {
		start, err := frameStart(txn, from)
		if err != nil {
			return err
		}
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // a frame can be large; decode one at a time
		opts.Prefix = []byte(keyPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		next := start // the seq the next frame must start with
		for it.Seek(frameKey(start)); it.Valid(); it.Next() {
			recs, err := decodeFrame(it.Item())
			if err != nil {
				return err
			}
			if recs[0].Seq != next {
				return fmt.Errorf("%w: frame at seq %d, want seq %d", ErrCorrupt, recs[0].Seq, next)
			}
			for _, r := range recs {
				if r.Seq > height {
					return nil
				}
				if r.Seq < from {
					continue
				}
				more, err := fn(r)
				if err != nil || !more {
					return err
				}
			}
			next = recs[len(recs)-1].Seq + 1
		}
		if next <= height {
			return fmt.Errorf("%w: journal ends at seq %d, height is %d", ErrCorrupt, next-1, height)
		}
		return nil
	})
}

// ReadKind is Read restricted to records of the given kinds.
func (j *Journal) ReadKind(from uint64, kinds []Kind, fn func(Record) (bool, error)) error {
	return j.Read(from, func(r Record) (bool, error) {
		if !slices.Contains(kinds, r.Kind) {
			return true, nil
		}
		return fn(r)
	})
}

// frameStart returns the first seq of the frame holding seq: the frame with
// the greatest key <= frameKey(seq), found with a reverse seek.
func frameStart(txn *badger.Txn, seq uint64) (uint64, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Reverse = true
	opts.Prefix = []byte(keyPrefix)
	it := txn.NewIterator(opts)
	defer it.Close()
	it.Seek(frameKey(seq))
	if !it.Valid() {
		return 0, fmt.Errorf("%w: no frame holds seq %d", ErrCorrupt, seq)
	}
	return seqFromKey(it.Item().Key())
}

func frameKey(seq uint64) []byte {
	k := make([]byte, keyLen)
	copy(k, keyPrefix)
	binary.BigEndian.PutUint64(k[len(keyPrefix):], seq)
	return k
}

func seqFromKey(k []byte) (uint64, error) {
	if len(k) != keyLen || !bytes.HasPrefix(k, []byte(keyPrefix)) {
		return 0, fmt.Errorf("%w: malformed key %q", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[len(keyPrefix):]), nil
}

// decodeFrame decodes the frame at item and checks it against its key: not
// empty, first seq equal to the key's, seqs consecutive.
func decodeFrame(item *badger.Item) ([]Record, error) {
	first, err := seqFromKey(item.Key())
	if err != nil {
		return nil, err
	}
	var recs []Record
	err = item.Value(func(v []byte) error {
		// Body slices must outlive the transaction: both decoders copy, so
		// decoding straight from Badger's buffer is safe.
		var ok bool
		if recs, ok = decodeFrameFast(v); ok {
			return nil
		}
		return schemas.UnmarshalTrusted(v, &recs)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: frame at seq %d: %v", ErrCorrupt, first, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: frame at seq %d is empty", ErrCorrupt, first)
	}
	if recs[0].Seq != first {
		return nil, fmt.Errorf("%w: frame keyed at seq %d starts at seq %d", ErrCorrupt, first, recs[0].Seq)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			return nil, fmt.Errorf("%w: frame at seq %d: seq %d follows seq %d", ErrCorrupt, first, recs[i].Seq, recs[i-1].Seq)
		}
	}
	return recs, nil
}
