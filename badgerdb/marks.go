package badgerdb

import (
	"encoding/binary"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// The kind index (journal.Indexed): one empty value per landmark record
// under "m/" + kind + "/" + its seq (8 bytes, big-endian), written in the
// transaction of the record's frame. marksDoneKey says the index covers the
// whole journal; a world written before the index existed gets it built
// once, by one pass over the journal, the first time it is opened.
const (
	markPrefix   = "m/"
	marksDoneKey = "meta/marks-v1"
)

func markKindPrefix(k journal.Kind) []byte { return []byte(markPrefix + string(k) + "/") }

func markKey(k journal.Kind, seq uint64) []byte {
	p := markKindPrefix(k)
	return binary.BigEndian.AppendUint64(p, seq)
}

// Marks calls fn with the seq of every record of kind k, newest first,
// until fn returns false or an error (which Marks returns). k must be an
// indexed kind (journal.Indexed); others have no marks.
func (j *Journal) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	prefix := markKindPrefix(k)
	var seqs []uint64
	err := j.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Reverse = true
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(append(append([]byte(nil), prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid(); it.Next() {
			key := it.Item().Key()
			if len(key) != len(prefix)+8 {
				return fmt.Errorf("%w: malformed mark key %q", journal.ErrCorrupt, key)
			}
			seqs = append(seqs, binary.BigEndian.Uint64(key[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("journal: marks of %s: %w", k, err)
	}
	// fn runs outside the read transaction: it may read the journal.
	height, first := j.Height(), j.First()
	for _, seq := range seqs {
		if seq > height {
			continue // appended after the height this call sees
		}
		if seq < first {
			continue // dropped: DropBefore moves First before it deletes marks
		}
		if more, err := fn(seq); err != nil || !more {
			return err
		}
	}
	return nil
}

// First is the lowest seq the journal holds: 1 until DropBefore drops a
// frame, then the first seq of the oldest frame kept (Height()+1 once every
// frame was dropped).
func (j *Journal) First() uint64 { return j.first.Load() }

// loadFirst finds the lowest seq held: the first frame's key or, when
// retention dropped every frame, the seq DropBefore recorded under
// firstKey; the height is then that seq - 1, since no frame is left to
// recover it from.
func (j *Journal) loadFirst() error {
	first, noFrames := uint64(1), true
	err := j.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(journalPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		it.Rewind()
		if it.Valid() {
			s, err := seqFromKey(it.Item().Key())
			first, noFrames = s, false
			return err
		}
		rec, err := readFirstKey(txn)
		if rec != 0 {
			first = rec
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("journal: open: first seq: %w", err)
	}
	j.first.Store(first)
	if noFrames && first > 1 {
		j.tip.Advance(first - 1)
	}
	return nil
}

// backfillMarks builds the kind index of a journal written before it
// existed, once.
func (j *Journal) backfillMarks() error {
	done := false
	err := j.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte(marksDoneKey))
		switch {
		case err == nil:
			done = true
		case err != badger.ErrKeyNotFound:
			return err
		}
		return nil
	})
	if err != nil || done {
		return err
	}
	wb := j.db.NewWriteBatch()
	defer wb.Cancel()
	err = j.Read(j.First(), func(r journal.Record) (bool, error) {
		if journal.Indexed(r.Kind) {
			return true, wb.Set(markKey(r.Kind, r.Seq), nil)
		}
		return true, nil
	})
	if err == nil {
		err = wb.Set([]byte(marksDoneKey), []byte{1})
	}
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		err = j.syncStore()
	}
	if err != nil {
		return fmt.Errorf("journal: open: build the kind index: %w", err)
	}
	return nil
}

// recordedFirst is the First the last DropBefore recorded under firstKey,
// 0 when none did: every frame below it was dropped.
func (j *Journal) recordedFirst() (uint64, error) {
	var first uint64
	err := j.db.View(func(txn *badger.Txn) error {
		var err error
		first, err = readFirstKey(txn)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("journal: open: recorded first seq: %w", err)
	}
	return first, nil
}

// readFirstKey reads the seq DropBefore recorded under firstKey: 0 when
// none is recorded.
func readFirstKey(txn *badger.Txn) (uint64, error) {
	item, err := txn.Get([]byte(firstKey))
	if err == badger.ErrKeyNotFound {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s holds %d bytes, want 8", journal.ErrCorrupt, firstKey, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
