package badgerdb

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// casPrefix is the CAS's share of the world's Badger key space.
const casPrefix = "c/"

const objectKeyLen = len(casPrefix) + len(schemas.Hash{})

// maxConflictRetries bounds retries of Put when two writers race on the same
// key. The retry sees the other writer's object and is a no-op.
const maxConflictRetries = 8

// CAS is a cas.Store over the Badger database shared with the journal.
// Objects live under "c/" + 32 raw hash bytes, so Badger's key order is hash
// order.
type CAS struct {
	db *badger.DB
	// writes counts the Puts and PutBatches that returned, whether or not
	// they wrote (a Put may find an object another Put has just
	// committed): the journal syncs Badger before an Append when it moved
	// (doc.go, "Durability").
	writes *atomic.Uint64
	// space refuses a write that would leave the disk too full for
	// Badger's mapped writes (space.go); nil in memory.
	space *space
}

var (
	_ cas.Store         = (*CAS)(nil)
	_ cas.MissingPutter = (*CAS)(nil)
)

func objectKey(h schemas.Hash) []byte {
	k := make([]byte, objectKeyLen)
	copy(k, casPrefix)
	copy(k[len(casPrefix):], h[:])
	return k
}

func hashFromKey(k []byte) (schemas.Hash, error) {
	var h schemas.Hash
	if len(k) != objectKeyLen || string(k[:len(casPrefix)]) != casPrefix {
		return h, fmt.Errorf("cas: malformed key %q under %q", k, casPrefix)
	}
	copy(h[:], k[len(casPrefix):])
	return h, nil
}

// Put stores data under its hash. An object already present is not
// rewritten when its stored bytes still hash to h; when they do not (the
// disk or someone corrupted them), they are replaced: a write heals a
// corrupt object rather than trusting it.
func (b *CAS) Put(data []byte) (schemas.Hash, error) {
	h := schemas.HashBytes(data)
	key := objectKey(h)
	var c cost
	c.add(objectKeyLen, len(data))
	if err := b.space.admit(c); err != nil {
		return h, fmt.Errorf("cas: put %s: %w", h, err)
	}
	defer b.space.release(c)
	var err error
	for range maxConflictRetries {
		err = b.db.Update(func(txn *badger.Txn) error {
			switch item, err := txn.Get(key); {
			case err == nil:
				intact := false
				if err := item.Value(func(v []byte) error { intact = schemas.HashBytes(v) == h; return nil }); err != nil {
					return err
				}
				if intact {
					return nil
				}
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
			return txn.Set(key, data)
		})
		if !errors.Is(err, badger.ErrConflict) {
			break
		}
	}
	if err != nil {
		return h, fmt.Errorf("cas: put %s: %w", h, err)
	}
	b.writes.Add(1)
	return h, nil
}

// PutBatch stores objs with one Badger write batch, skipping objects repeated
// within objs. Hashes are returned in input order. It does not look up which
// objects are already stored: a point read per object cost more than the
// write it saves (it was 60% of materializing 100,000 cells), and rewriting
// an immutable object with its own bytes is harmless. A write batch splits
// itself when it outgrows one transaction, so a batch is not atomic; that is
// harmless for immutable content-addressed objects too.
func (b *CAS) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	hs := make([]schemas.Hash, len(objs))
	for i, o := range objs {
		hs[i] = schemas.HashBytes(o)
	}
	if err := b.writeBatch(hs, objs); err != nil {
		return nil, err
	}
	return hs, nil
}

// writeBatch writes objs under their hashes hs with one Badger write batch,
// skipping repeated hashes.
func (b *CAS) writeBatch(hs []schemas.Hash, objs [][]byte) error {
	// The guard is asked for the whole batch before it writes anything: a
	// write batch commits parts of itself as it grows.
	seen := make(map[schemas.Hash]struct{}, len(objs))
	var c cost
	for i, h := range hs {
		if _, dup := seen[h]; !dup {
			seen[h] = struct{}{}
			c.add(objectKeyLen, len(objs[i]))
		}
	}
	if err := b.space.admit(c); err != nil {
		return fmt.Errorf("cas: put batch of %d objects: %w", len(seen), err)
	}
	defer b.space.release(c)
	clear(seen)
	wb := b.db.NewWriteBatch()
	for i, h := range hs {
		if _, dup := seen[h]; dup {
			continue
		}
		seen[h] = struct{}{}
		if err := wb.Set(objectKey(h), objs[i]); err != nil {
			wb.Cancel()
			return fmt.Errorf("cas: put batch: %s: %w", h, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("cas: put batch of %d objects: %w", len(seen), err)
	}
	b.writes.Add(1)
	return nil
}

// PutMissing implements cas.MissingPutter: one read transaction finds which
// objects are stored (a key lookup each, no value read), then one write
// batch stores the others. A replay re-creating index nodes the live world
// wrote finds nearly all of them stored, and writing them again cost more
// than the lookups: each rewrite is a memtable entry, and then a compaction
// that merges it with the copy already in the tree.
func (b *CAS) PutMissing(hs []schemas.Hash, objs [][]byte) (int, error) {
	if len(hs) != len(objs) {
		return 0, fmt.Errorf("cas: put missing: %d hashes for %d objects", len(hs), len(objs))
	}
	var missing []int
	key := make([]byte, objectKeyLen)
	copy(key, casPrefix)
	seen := make(map[schemas.Hash]struct{}, len(hs))
	err := b.db.View(func(txn *badger.Txn) error {
		for i, h := range hs {
			if _, dup := seen[h]; dup {
				continue // many cells share a state
			}
			seen[h] = struct{}{}
			copy(key[len(casPrefix):], h[:])
			switch _, err := txn.Get(key); {
			case errors.Is(err, badger.ErrKeyNotFound):
				missing = append(missing, i)
			case err != nil:
				return fmt.Errorf("%s: %w", h, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cas: put missing: %w", err)
	}
	if len(missing) == 0 {
		return 0, nil
	}
	whs, write, err := cas.MissingObjects(hs, objs, missing)
	if err != nil {
		return 0, err
	}
	if err := b.writeBatch(whs, write); err != nil {
		return 0, err
	}
	return len(write), nil
}

// Get returns the bytes stored under h after checking they hash to h.
func (b *CAS) Get(h schemas.Hash) ([]byte, error) {
	var data []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(objectKey(h))
		if err != nil {
			return err
		}
		data, err = item.ValueCopy(nil)
		return err
	})
	if err != nil && !errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("cas: get %s: %w", h, err)
	}
	return cas.Verified(h, data, err == nil)
}

// Has reports whether h is stored, without reading its value.
func (b *CAS) Has(h schemas.Hash) (bool, error) {
	err := b.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(objectKey(h))
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("cas: has %s: %w", h, err)
	}
}

// Iterate calls fn for each object in hash order from one consistent snapshot.
// It reads keys only; sizes of values kept in the value log (over the value
// threshold, 1 MiB by default) are read from the value to be exact.
func (b *CAS) Iterate(fn func(h schemas.Hash, size int) error) error {
	threshold := b.db.Opts().ValueThreshold
	return b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(casPrefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			h, err := hashFromKey(item.Key())
			if err != nil {
				return err
			}
			size := int(item.ValueSize())
			if int64(size) >= threshold {
				// ValueSize is an estimate for values in the value log.
				if err := item.Value(func(v []byte) error { size = len(v); return nil }); err != nil {
					return fmt.Errorf("cas: iterate: size of %s: %w", h, err)
				}
			}
			if err := fn(h, size); err != nil {
				return err
			}
		}
		return nil
	})
}

// Delete removes objects with one write batch. Missing objects are ignored.
func (b *CAS) Delete(hs []schemas.Hash) error {
	if len(hs) == 0 {
		return nil
	}
	// A delete writes too: a tombstone per key, until compaction drops it.
	n := int64(len(hs)) * int64(objectKeyLen+entryOverhead)
	c := cost{disk: n, lsm: n}
	if err := b.space.admit(c); err != nil {
		return fmt.Errorf("cas: delete %d objects: %w", len(hs), err)
	}
	defer b.space.release(c)
	wb := b.db.NewWriteBatch()
	for _, h := range hs {
		if err := wb.Delete(objectKey(h)); err != nil {
			wb.Cancel()
			return fmt.Errorf("cas: delete %s: %w", h, err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("cas: delete %d objects: %w", len(hs), err)
	}
	return nil
}
