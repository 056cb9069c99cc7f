package cas

import (
	"errors"
	"fmt"
	"sync"

	"github.com/aos-kernel/aos/schemas"
)

// Errors of a collection's life cycle.
var (
	ErrCollecting       = errors.New("cas: a collection is already running")
	ErrCollectionClosed = errors.New("cas: the collection has ended")
)

// Guard is a Store that lets a garbage collection run while writers keep
// writing. Every write the writers make must go through the Guard; while a
// Collection is running, the Guard records the hash of every object written
// (a Put or PutBatch of an object already stored included: the store dedups
// it silently, yet the writer now relies on it), and the Collection's Sweep
// never deletes a recorded object.
//
// # Why nothing a writer relies on is deleted
//
// A collection is Begin, then the caller takes its roots, marks what they
// reach, and calls Sweep with the marked set. Sweep deletes an object only
// if it is neither marked nor recorded. Consider any object X a writer
// names after the roots were taken:
//
//   - If the writer wrote X after Begin, X is recorded (or, see below,
//     written again after its deletion).
//   - If not, the writer must have had X already when the roots were taken,
//     so X must be reachable from them and is marked. This is the caller's
//     part: the roots must cover every object written before Begin that a
//     writer may name again without writing it again. A cells index that
//     Apply rewrites is fine: each new version is built from nodes of the
//     version before (by induction, marked or recorded) and nodes it writes
//     (recorded). A cells.Head's spilled dirty states are not: they were
//     written when spilled and are named again, unwritten, by a later
//     Materialize, so materialize before taking roots (or pin them). For
//     the same reason Begin and the taking of roots belong on the writer's
//     own goroutine (the kernel's loop), where no write operation is half
//     done.
//
// What remains is a write racing the deletion of the same object. A Put or
// PutBatch holds the Guard's read lock across the store call and the
// recording of its hashes; Sweep filters each chunk of candidates against the
// recorded set and deletes it while holding the write lock. So a write either
// finished, recorded, before the chunk was filtered (and its object is kept),
// or starts after the chunk's Delete returned, and then finds the object
// absent and stores it again: Memory checks presence under its own lock, the
// Badger store's Put re-checks inside its transaction and its PutBatch always
// writes. (castest holds every Store to that: a Put after a Delete stores
// the object again.) Begin takes the write lock too, so no write straddles
// it half recorded. A write that fails records nothing: its caller does not
// use the hash, so what it may have stored is garbage like any other.
//
// Reads (Get, Has, Iterate) pass straight through: a reader holding an old
// version of something may find it collected, as it would after a stopped-
// world GC.
//
// # Memory
//
// The recorded set grows with every distinct object written during the
// collection, by about 40 to 75 bytes per hash as its Go map fills and
// doubles (52 bytes measured over 100,000 writes, BenchmarkGuardRecord), and
// is freed when the collection ends. A long collection under heavy writing
// costs memory in proportion to what was written. Sweep also
// holds the list of unmarked objects it found (32 bytes each) until it ends.
type Guard struct {
	store Store

	// mu is the gate between writes and a collection's state changes and
	// deletions: writes hold it shared, Begin, Sweep's deletes and the end of
	// a collection hold it exclusively.
	mu  sync.RWMutex
	col *Collection // the running collection, nil for none; guarded by mu

	// rec guards col.written among concurrent writers (each holds mu shared).
	rec sync.Mutex
}

var (
	_ Store         = (*Guard)(nil)
	_ MissingPutter = (*Guard)(nil)
)

// NewGuard wraps store. Every write to store must go through the Guard for
// a Collection to be safe.
func NewGuard(store Store) *Guard { return &Guard{store: store} }

// Collection is one garbage collection on a Guard, from Begin until Sweep or
// Abort ends it.
type Collection struct {
	g       *Guard
	written map[schemas.Hash]struct{} // guarded by g.rec while writers run
	ended   bool                      // guarded by g.mu
}

// Begin starts recording writes and returns the running collection. Take
// the roots only after Begin returns. Only one collection runs at a time: a
// second Begin before the first ends returns ErrCollecting.
func (g *Guard) Begin() (*Collection, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.col != nil {
		return nil, ErrCollecting
	}
	g.col = &Collection{g: g, written: map[schemas.Hash]struct{}{}}
	return g.col, nil
}

// Put stores data through the wrapped store and, during a collection,
// records its hash.
func (g *Guard) Put(data []byte) (schemas.Hash, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	h, err := g.store.Put(data)
	if err == nil && g.col != nil {
		g.rec.Lock()
		g.col.written[h] = struct{}{}
		g.rec.Unlock()
	}
	return h, err
}

// PutBatch stores objs through the wrapped store and, during a collection,
// records their hashes.
func (g *Guard) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	hs, err := g.store.PutBatch(objs)
	if err == nil {
		g.record(hs)
	}
	return hs, err
}

// PutMissing stores those of objs the wrapped store lacks (PutMissing, the
// function) and, during a collection, records every hash in hs, written or
// found stored: the writer relies on each from now on, exactly as on an
// object a Put deduplicated. The presence reads and the writes happen under
// the read lock, so a sweep's delete cannot fall between finding an object
// stored and recording it.
func (g *Guard) PutMissing(hs []schemas.Hash, objs [][]byte) (int, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n, err := PutMissing(g.store, hs, objs)
	if err == nil {
		g.record(hs)
	}
	return n, err
}

// record notes hs as written during a collection; the caller holds g.mu
// for reading.
func (g *Guard) record(hs []schemas.Hash) {
	if g.col == nil {
		return
	}
	g.rec.Lock()
	for _, h := range hs {
		g.col.written[h] = struct{}{}
	}
	g.rec.Unlock()
}

// Get reads from the wrapped store.
func (g *Guard) Get(h schemas.Hash) ([]byte, error) { return g.store.Get(h) }

// Has asks the wrapped store.
func (g *Guard) Has(h schemas.Hash) (bool, error) { return g.store.Has(h) }

// Iterate walks the wrapped store.
func (g *Guard) Iterate(fn func(h schemas.Hash, size int) error) error {
	return g.store.Iterate(fn)
}

// Delete deletes from the wrapped store. Writers do not delete; it is here
// so a Guard is a Store, and it takes the write lock like a sweep's deletes.
func (g *Guard) Delete(hs []schemas.Hash) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.store.Delete(hs)
}

// garbage is an unmarked object Sweep found, with its size for the stats.
type garbage struct {
	h    schemas.Hash
	size int
}

// Sweep deletes every stored object that marked does not report and that was
// not written since Begin, and ends the collection, whatever it returns.
// progress, if not nil, is called after each chunk with the unmarked objects
// handled so far and their total.
//
// The stats count the objects the store's Iterate reported: KeptObjects
// includes the marked ones and KeptWritten, the unmarked ones kept because
// they were written during the collection. Objects written after Iterate
// passed their place are not counted. On a Delete error the stats say what
// was freed before it.
func (c *Collection) Sweep(marked func(schemas.Hash) bool, progress func(done, total int)) (GCStats, error) {
	defer c.end()
	c.g.mu.RLock()
	ended := c.ended
	c.g.mu.RUnlock()
	if ended {
		return GCStats{}, ErrCollectionClosed
	}
	var stats GCStats
	var candidates []garbage
	err := c.g.store.Iterate(func(h schemas.Hash, size int) error {
		if marked(h) {
			stats.KeptObjects++
			stats.KeptBytes += int64(size)
			return nil
		}
		candidates = append(candidates, garbage{h, size})
		return nil
	})
	if err != nil {
		return GCStats{}, fmt.Errorf("cas: gc: sweep: %w", err)
	}
	batch := make([]schemas.Hash, 0, min(deleteChunk, len(candidates)))
	for start := 0; start < len(candidates); start += deleteChunk {
		chunk := candidates[start:min(start+deleteChunk, len(candidates))]
		if err := c.deleteChunk(chunk, batch[:0], &stats); err != nil {
			return stats, err
		}
		if progress != nil {
			progress(start+len(chunk), len(candidates))
		}
	}
	return stats, nil
}

// deleteChunk filters chunk against the recorded writes and deletes the rest,
// all under the write lock, so no write lands between the filter and the
// Delete.
func (c *Collection) deleteChunk(chunk []garbage, batch []schemas.Hash, stats *GCStats) error {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	var bytes int64
	for _, o := range chunk {
		if _, ok := c.written[o.h]; ok {
			stats.KeptObjects++
			stats.KeptBytes += int64(o.size)
			stats.KeptWritten++
			continue
		}
		batch = append(batch, o.h)
		bytes += int64(o.size)
	}
	if len(batch) == 0 {
		return nil
	}
	if err := c.g.store.Delete(batch); err != nil {
		return fmt.Errorf("cas: gc: delete %d objects from %s: %w", len(batch), batch[0], err)
	}
	stats.FreedObjects += len(batch)
	stats.FreedBytes += bytes
	return nil
}

// Abort ends the collection without deleting anything. Aborting an ended
// collection does nothing.
func (c *Collection) Abort() { c.end() }

func (c *Collection) end() {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.ended {
		return
	}
	c.ended = true
	c.written = nil
	c.g.col = nil
}
