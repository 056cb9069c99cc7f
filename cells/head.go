package cells

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// Defaults for Config fields left zero.
const (
	DefaultCacheSize      = 4096
	DefaultSpillThreshold = 64 << 10
	DefaultResidentBudget = 64 << 20
)

// ErrBadConfig reports an unusable Config.
var ErrBadConfig = errors.New("cells: bad config")

// ErrDrainInFlight: a Drain is prepared and not installed, so the index
// cannot be changed another way until it is.
var ErrDrainInFlight = errors.New("cells: a drain is in flight")

// Config sizes a Head. Zero fields take the defaults above.
type Config struct {
	CacheSize      int   // clean cells in the hot LRU (default 4096; aosd reads AOS_CELL_CACHE_SIZE into it)
	SpillThreshold int   // a dirty state larger than this goes to CAS at once (default 64 KiB)
	ResidentBudget int64 // resident dirty bytes beyond this spill, oldest first (default 64 MiB)
}

func (c Config) withDefaults() (Config, error) {
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.SpillThreshold == 0 {
		c.SpillThreshold = DefaultSpillThreshold
	}
	if c.ResidentBudget == 0 {
		c.ResidentBudget = DefaultResidentBudget
	}
	if c.CacheSize < 0 || c.SpillThreshold < 0 || c.ResidentBudget < 0 {
		return c, fmt.Errorf("%w: negative size in %+v", ErrBadConfig, c)
	}
	return c, nil
}

// Stats is a point-in-time view of a Head's layers.
type Stats struct {
	Dirty         int    // delta entries: upserts and deletes since the last Materialize
	Deletes       int    // of which deletes
	Resident      int    // dirty upserts whose state bytes are in memory
	ResidentBytes int64  // their total size
	Spilled       int    // dirty upserts whose state is in the CAS (still dirty)
	SpillsTotal   uint64 // states spilled since NewHead
	DrainsTotal   uint64 // drains (background materialization slices) installed since NewHead
	CacheLen      int    // clean cells in the hot cache
	CacheSize     int    // its capacity
	CacheHits     uint64 // Get/Lookup answered by the hot cache
	CacheMisses   uint64 // Get/Lookup that went to the index
	Prefetched    uint64 // cells Prefetch put in the hot cache or noted missing
}

// absentMax bounds Head.absent, the cells Prefetch found missing: 32-byte
// key hashes, so at most ~200 KiB a head.
const absentMax = 4096

// presence of a dirty cell's key in the base index, learned lazily (see Len).
const (
	baseUnknown int8 = iota
	baseAbsent
	basePresent
)

// dirty is a delta entry. A resident upsert is on the Head's age list.
type dirty struct {
	e       entry  // key and metadata; e.state is the state hash
	state   []byte // resident state bytes; nil when spilled or deleted
	del     bool
	spilled bool
	base    int8

	prev, next *dirty // age list of resident upserts, oldest at head.first
	listed     bool

	ver uint64 // bumped by every Put or Delete of this entry (see Drain)
}

// live reports the cell's contribution to Len relative to the base index.
func (d *dirty) adj() int {
	switch {
	case d.base == baseUnknown:
		return 0
	case !d.del && d.base == baseAbsent:
		return 1
	case d.del && d.base == basePresent:
		return -1
	}
	return 0
}

type cached struct {
	e     entry
	state []byte
}

// Head is the live view of one keyed workflow's cells: a delta of dirty upserts
// and deletes over a hot LRU of clean cells over the CellIndex in the CAS.
//
// Concurrency: all methods are safe for concurrent use. Writers (Put, Delete,
// Materialize) take an exclusive lock; readers (Get, Lookup, Ascend, Root, Stats)
// share a read lock, so the CLI can read cells while the kernel goroutine steps.
// The kernel is the only writer. Ascend holds the read lock while it calls fn, so
// fn must not call methods of the same Head.
//
// Ownership: Put copies key and state. Get returns state bytes that may be shared
// with the Head or the CAS; callers must not modify them.
type Head struct {
	mu    sync.RWMutex
	store cas.Store
	cfg   Config
	ix    *CellIndex

	delta         map[schemas.Hash]*dirty
	order         Ordered[struct{}] // the delta's key hashes in order (no pointers: no GC scan, no write barriers)
	unknowns      []*dirty          // entries created with base unknown, for resolveBase; may hold stale ones
	first, last   *dirty            // age list of resident upserts
	residentBytes int64
	resident      int
	spilled       int
	deletes       int
	unknown       int // delta entries with base == baseUnknown
	adjust        int // sum of dirty.adj()
	spillsTotal   uint64
	drainsTotal   uint64

	cache        *lru.Cache[schemas.Hash, *cached]
	hits, misses atomic.Uint64
	prefetched   atomic.Uint64
	// absent holds cells Prefetch found missing from the index. None is in
	// the delta (Put takes a cell out; Delete of a missing cell adds
	// nothing to the delta), and an index change drains only delta cells,
	// so each stays missing from the index.
	absent map[schemas.Hash]struct{}

	drain *Drain // prepared and not yet installed; blocks other materialization

	// missingOnly: materialization writes only the states and index nodes
	// the store lacks (WriteMissingOnly).
	missingOnly bool
}

// NewHead opens the head view over the index at root (zero for an empty index).
func NewHead(store cas.Store, root schemas.Hash, cfg Config) (*Head, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ix, err := LoadIndex(store, root)
	if err != nil {
		return nil, err
	}
	cache, err := lru.New[schemas.Hash, *cached](max(cfg.CacheSize, 1))
	if err != nil {
		return nil, fmt.Errorf("%w: cache: %v", ErrBadConfig, err)
	}
	return &Head{store: store, cfg: cfg, ix: ix, cache: cache, delta: map[schemas.Hash]*dirty{}, absent: map[schemas.Hash]struct{}{}}, nil
}

// WriteMissingOnly sets whether materializing (Materialize, MaterializeSome,
// and the drains prepared from now on) writes only the dirty states and
// index nodes the store does not hold yet (cas.PutMissing), instead of
// writing every one. It is for a replay, which re-creates the index
// versions the live world wrote: nearly every object it would write is
// stored already, and rewriting it costs the store a write and a
// compaction, where a presence check is one key lookup. An object found
// stored counts as written (a cas.Guard records it during a collection).
// Spilled states (SpillThreshold, ResidentBudget) are always written.
func (h *Head) WriteMissingOnly(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.missingOnly = on
}

// Config returns the effective configuration, defaults filled in.
func (h *Head) Config() Config { return h.cfg }

// Root is the index root as of the last Materialize (or NewHead).
func (h *Head) Root() schemas.Hash {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.ix.Root()
}

// Index is the CellIndex as of the last Materialize; it does not see the delta.
func (h *Head) Index() *CellIndex {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.ix
}

// Get returns the state of the cell with key, reading delta, then hot cache,
// then index and CAS. A clean cell read from the CAS enters the hot cache.
func (h *Head) Get(key []byte) (state []byte, ok bool, err error) {
	kh := KeyHash(key)
	h.mu.RLock()
	defer h.mu.RUnlock()
	if d, ok := h.delta[kh]; ok {
		switch {
		case d.del:
			return nil, false, nil
		case d.spilled:
			b, err := h.store.Get(d.e.state)
			if err != nil {
				return nil, false, fmt.Errorf("cells: read spilled state of key %x: %w", key, err)
			}
			return b, true, nil
		}
		return d.state, true, nil
	}
	if c, ok := h.cache.Get(kh); ok {
		h.hits.Add(1)
		return c.state, true, nil
	}
	if _, ok := h.absent[kh]; ok {
		h.hits.Add(1)
		return nil, false, nil
	}
	h.misses.Add(1)
	e, ok, err := h.ix.lookup(&kh)
	if !ok || err != nil {
		return nil, false, err
	}
	b, err := h.store.Get(e.state)
	if err != nil {
		return nil, false, fmt.Errorf("cells: read state of key %x: %w", key, err)
	}
	c := &cached{e: *e, state: b}
	c.e.key = bytes.Clone(e.key)
	h.cache.Add(kh, c)
	return b, true, nil
}

// Prefetch reads ahead what a Get of key will need, for a caller that
// knows which cells come next (the kernel's replay, reading ahead in the
// journal on another goroutine): a cell the index holds enters the hot
// cache, its state read from the CAS; a cell it does not hold is noted as
// absent (at most absentMax such notes; a full set is emptied), so that
// the Get reads no CAS either. A cell in the
// delta or the hot cache is left alone. The CAS is read with the lock
// released, and what was read is kept only if the index is still the one
// it was read from and the cell has not become dirty meanwhile, so the hot
// cache stays clean. Prefetch changes what is in memory, never what a read
// returns; an error (a CAS read) is returned and changes nothing.
func (h *Head) Prefetch(key []byte) error {
	kh := KeyHash(key)
	h.mu.RLock()
	_, dirty := h.delta[kh]
	_, noted := h.absent[kh]
	skip := dirty || noted || h.cache.Contains(kh)
	ix := h.ix
	h.mu.RUnlock()
	if skip {
		return nil
	}
	e, ok, err := ix.lookup(&kh)
	if err != nil {
		return err
	}
	if !ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, dirty := h.delta[kh]; !dirty && h.ix == ix {
			if len(h.absent) >= absentMax {
				clear(h.absent)
			}
			h.absent[kh] = struct{}{}
			h.prefetched.Add(1)
		}
		return nil
	}
	b, err := h.store.Get(e.state)
	if err != nil {
		return fmt.Errorf("cells: prefetch state of key %x: %w", key, err)
	}
	c := &cached{e: *e, state: b}
	c.e.key = bytes.Clone(e.key)
	// The read lock suffices, as for Get: writers, which change the delta
	// and the index, hold the lock exclusively.
	h.mu.RLock()
	defer h.mu.RUnlock()
	if _, dirty := h.delta[kh]; !dirty && h.ix == ix {
		h.cache.ContainsOrAdd(kh, c)
		h.prefetched.Add(1)
	}
	return nil
}

// Lookup returns the metadata of the cell with key, through the same layers as
// Get but without reading the state or filling the cache.
func (h *Head) Lookup(key []byte) (Entry, bool, error) {
	kh := KeyHash(key)
	h.mu.RLock()
	defer h.mu.RUnlock()
	if d, ok := h.delta[kh]; ok {
		if d.del {
			return Entry{}, false, nil
		}
		return d.e.public(true), true, nil
	}
	if c, ok := h.cache.Get(kh); ok {
		h.hits.Add(1)
		return c.e.public(true), true, nil
	}
	if _, ok := h.absent[kh]; ok {
		h.hits.Add(1)
		return Entry{}, false, nil
	}
	h.misses.Add(1)
	e, ok, err := h.ix.lookup(&kh)
	if !ok || err != nil {
		return Entry{}, false, err
	}
	return e.public(true), true, nil
}

// Put stages state (canonical CBOR) for key in the delta. A state larger than
// SpillThreshold is written to the CAS at once. If resident dirty bytes then
// exceed ResidentBudget, the oldest resident states spill until they fit; if that
// write fails, Put returns the error but the update itself stays applied (the
// head is consistent, only over budget).
func (h *Head) Put(key, state []byte, lastActive uint64) error {
	return h.PutHashed(key, state, schemas.HashBytes(state), lastActive)
}

// PutHashed is Put for a caller that already holds stateHash, the SHA-256 of
// state (the kernel hashes every new state for its step record).
func (h *Head) PutHashed(key, state []byte, stateHash schemas.Hash, lastActive uint64) error {
	kh := KeyHash(key)
	big := len(state) > h.cfg.SpillThreshold
	if big {
		// Outside the lock: the CAS is safe for concurrent use and the write is idempotent.
		if _, err := h.store.Put(state); err != nil {
			return fmt.Errorf("cells: spill state of key %x: %w", key, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.absent, kh)
	d := h.delta[kh]
	if d == nil {
		d = h.newDirty(kh, key)
		h.addDirty(d)
	} else {
		h.track(d, -1)
		h.unstage(d)
	}
	h.cache.Remove(kh)
	d.e.state, d.e.size, d.e.last, d.del = stateHash, uint64(len(state)), lastActive, false
	d.ver++
	if big {
		d.spilled = true
		h.spilled++
		h.spillsTotal++
	} else {
		d.state = bytes.Clone(state)
		if d.state == nil {
			d.state = []byte{}
		}
		h.pushResident(d)
	}
	h.track(d, +1)
	return h.enforceBudget()
}

// newDirty is a fresh delta entry for key (copied; never nil), its presence
// in the base index as far as memory knows.
func (h *Head) newDirty(kh schemas.Hash, key []byte) *dirty {
	k := bytes.Clone(key)
	if k == nil {
		k = []byte{}
	}
	return &dirty{e: entry{kh: kh, key: k}, base: h.cachedBase(kh)}
}

// Delete stages the removal of key. Deleting an absent cell is a no-op.
func (h *Head) Delete(key []byte) error {
	kh := KeyHash(key)
	h.mu.Lock()
	defer h.mu.Unlock()
	d := h.delta[kh]
	if d == nil {
		d = h.newDirty(kh, key)
		if d.base == baseUnknown {
			// Cheap check before leaving a tombstone for Len to resolve later.
			_, ok, err := h.ix.lookup(&kh)
			if err != nil {
				return err
			}
			d.base = baseAbsent
			if ok {
				d.base = basePresent
			}
		}
		if d.base == baseAbsent {
			return nil
		}
		h.addDirty(d)
	} else {
		h.track(d, -1)
		h.unstage(d)
		if d.base == baseAbsent {
			h.dropDirty(kh)
			return nil
		}
	}
	h.cache.Remove(kh)
	d.del = true
	d.ver++
	d.e.state, d.e.size, d.e.last = schemas.Hash{}, 0, 0
	h.track(d, +1)
	return nil
}

// addDirty enters a new entry into the delta.
func (h *Head) addDirty(d *dirty) {
	h.delta[d.e.kh] = d
	h.order.Set(d.e.kh, struct{}{})
	if d.base == baseUnknown {
		h.unknowns = append(h.unknowns, d)
		if len(h.unknowns) > 2*len(h.delta)+64 {
			h.unknowns = h.pendingUnknowns() // stale ones dropped: the list stays O(delta)
		}
	}
}

// dropDirty removes an entry from the delta.
func (h *Head) dropDirty(kh schemas.Hash) {
	delete(h.delta, kh)
	h.order.Delete(kh)
}

// cachedBase says whether kh is in the base index as far as memory knows: a
// cached clean cell is. Anything else is left for Len to resolve in one batch.
func (h *Head) cachedBase(kh schemas.Hash) int8 {
	if h.cache.Contains(kh) {
		return basePresent
	}
	if h.ix.count == 0 {
		return baseAbsent
	}
	return baseUnknown
}

// track adds (sign +1) or removes (-1) d's share of the counters.
func (h *Head) track(d *dirty, sign int) {
	if d.base == baseUnknown {
		h.unknown += sign
	}
	h.adjust += sign * d.adj()
	if d.del {
		h.deletes += sign
	}
}

// unstage drops d's resident or spilled state before it is overwritten.
func (h *Head) unstage(d *dirty) {
	if d.listed {
		h.unlink(d)
		h.residentBytes -= int64(len(d.state))
		h.resident--
	}
	if d.spilled {
		h.spilled--
	}
	d.state, d.spilled = nil, false
}

func (h *Head) pushResident(d *dirty) {
	d.prev, d.next, d.listed = h.last, nil, true
	if h.last != nil {
		h.last.next = d
	} else {
		h.first = d
	}
	h.last = d
	h.residentBytes += int64(len(d.state))
	h.resident++
}

func (h *Head) unlink(d *dirty) {
	if d.prev != nil {
		d.prev.next = d.next
	} else {
		h.first = d.next
	}
	if d.next != nil {
		d.next.prev = d.prev
	} else {
		h.last = d.prev
	}
	d.prev, d.next, d.listed = nil, nil, false
}

// enforceBudget spills the oldest resident states, in one CAS batch, until the
// resident bytes fit ResidentBudget.
func (h *Head) enforceBudget() error {
	if h.residentBytes <= h.cfg.ResidentBudget {
		return nil
	}
	var victims []*dirty
	var objs [][]byte
	over := h.residentBytes - h.cfg.ResidentBudget
	for d := h.first; d != nil && over > 0; d = d.next {
		victims = append(victims, d)
		objs = append(objs, d.state)
		over -= int64(len(d.state))
	}
	if _, err := h.store.PutBatch(objs); err != nil {
		return fmt.Errorf("cells: spill %d dirty states over the %d-byte budget: %w", len(objs), h.cfg.ResidentBudget, err)
	}
	for _, d := range victims {
		h.unlink(d)
		h.residentBytes -= int64(len(d.state))
		h.resident--
		d.state, d.spilled = nil, true
		h.spilled++
		h.spillsTotal++
	}
	return nil
}

// Len is the number of live cells: the index plus delta upserts of new keys
// minus delta deletes of indexed keys. When some dirty keys were never looked
// up, Len resolves them against the index in one pass (O(unknown x depth)) and
// remembers the answer; on a storage error it returns -1 (see Count).
func (h *Head) Len() int {
	n, err := h.Count()
	if err != nil {
		return -1
	}
	return n
}

// Count is Len with the storage error, if any.
func (h *Head) Count() (int, error) {
	h.mu.RLock()
	if h.unknown == 0 {
		n := h.ix.Len() + h.adjust
		h.mu.RUnlock()
		return n, nil
	}
	h.mu.RUnlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.resolveBase(); err != nil {
		return 0, err
	}
	return h.ix.Len() + h.adjust, nil
}

func (h *Head) resolveBase() error {
	if h.unknown == 0 {
		return nil
	}
	ds := h.pendingUnknowns()
	slices.SortFunc(ds, compareDirty)
	khs := make([]schemas.Hash, len(ds))
	for i, d := range ds {
		khs[i] = d.e.kh
	}
	present := make([]bool, len(ds))
	if err := h.ix.contains(khs, present); err != nil {
		return err
	}
	for i, d := range ds {
		h.track(d, -1)
		d.base = baseAbsent
		if present[i] {
			d.base = basePresent
		}
		h.track(d, +1)
	}
	h.unknowns = nil
	return nil
}

// pendingUnknowns is the list of entries whose base is unknown, without the
// stale ones (resolved, or no longer in the delta): O(list), not O(delta).
func (h *Head) pendingUnknowns() []*dirty {
	var ds []*dirty
	for _, d := range h.unknowns {
		if d.base == baseUnknown && h.delta[d.e.kh] == d {
			ds = append(ds, d)
		}
	}
	return ds
}

// sortedDelta returns the delta entries in key-hash order: O(delta), no sort.
func (h *Head) sortedDelta() []*dirty {
	return h.firstDelta(len(h.delta))
}

// firstDelta returns the limit delta entries with the smallest key hashes, in
// order: O(log delta + limit), so draining a large delta a slice at a time
// does not touch all of it for every slice.
func (h *Head) firstDelta(limit int) []*dirty {
	ds := make([]*dirty, 0, min(limit, len(h.delta)))
	h.order.Ascend(nil, func(kh schemas.Hash, _ struct{}) bool {
		ds = append(ds, h.delta[kh])
		return len(ds) < limit
	})
	return ds
}

func compareDirty(a, b *dirty) int { return bytes.Compare(a.e.kh[:], b.e.kh[:]) }

// Ascend calls fn for every live cell in key-hash order, merging the index with
// the delta (a dirty upsert replaces the indexed entry, a delete hides it), until
// fn returns false or an error. It holds the read lock throughout: fn must not
// call methods of h. Cost: O(index + delta).
func (h *Head) Ascend(fn func(Entry) (bool, error)) error { return h.AscendFrom(nil, fn) }

// AscendFrom is Ascend starting strictly after the key hash after (from the
// first cell when after is nil). Nothing before after is read: the index walk
// descends straight to after's path and the delta is kept in key-hash order,
// so stopping after k cells costs O(depth + k) index entries (about k/LeafMax
// leaves) and O(log delta + k) delta entries. It holds the read lock
// throughout, store reads included; Page does not.
func (h *Head) AscendFrom(after *schemas.Hash, fn func(Entry) (bool, error)) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, err := mergeDelta(h.ix, after, &liveDelta{c: h.order.seek(after), delta: h.delta}, nil, func(e *entry) (bool, error) {
		return fn(e.public(true))
	})
	return err
}

// Page returns up to limit live cells whose key hashes are greater than after
// (from the first cell when after is nil), in key-hash order: what AscendFrom
// would yield first, without holding the lock while it reads the store.
//
// Under the read lock it only copies the index version and the next at most
// limit delta entries (O(log delta + limit), no store reads), then walks that
// index version from after outside the lock, merging the copied entries in.
// Index versions are immutable, so the walk needs no lock; a writer waits for
// the copy, never for the walk. When the copied entries run out before the
// page is full (only deletes in the delta can cause that: every other delta
// entry yields a row), the next round copies again from the last entry
// copied. Each round sees the head as it was at one instant, and rounds move
// strictly forward in key-hash order, so every cell returned was live when
// its round copied, and with no writes in between a page is exactly
// AscendFrom's first limit cells.
func (h *Head) Page(after *schemas.Hash, limit int) ([]Entry, error) {
	var out []Entry
	if limit <= 0 {
		return out, nil
	}
	pos := after
	for {
		ix, ds, more := h.copyDelta(pos, limit-len(out))
		var bound *schemas.Hash
		if more {
			bound = &ds[len(ds)-1].e.kh
		}
		_, err := mergeDelta(ix, pos, &copiedDelta{items: ds}, bound, func(e *entry) (bool, error) {
			out = append(out, e.public(true))
			return len(out) < limit, nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) >= limit || bound == nil {
			return out, nil
		}
		pos = bound
	}
}

// copyDelta returns the index version and copies of at most n delta entries
// after after, in order, and whether the delta holds more beyond them.
func (h *Head) copyDelta(after *schemas.Hash, n int) (*CellIndex, []deltaCopy, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	ds := make([]deltaCopy, 0, min(n, len(h.delta)))
	more := false
	h.order.Ascend(after, func(kh schemas.Hash, _ struct{}) bool {
		if len(ds) == n {
			more = true
			return false
		}
		// The key's bytes are never changed once a delta entry holds them,
		// so the copy may share them; rows clone them on the way out.
		d := h.delta[kh]
		ds = append(ds, deltaCopy{e: d.e, del: d.del})
		return true
	})
	return h.ix, ds, more
}

// deltaSeq is a run of delta entries in key-hash order for mergeDelta.
type deltaSeq interface {
	// peek returns the next entry and whether it is a delete; nil at the end.
	peek() (*entry, bool)
	pop()
}

// liveDelta reads the head's delta in place (under its lock).
type liveDelta struct {
	c     orderedCursor[struct{}]
	delta map[schemas.Hash]*dirty
}

func (l *liveDelta) peek() (*entry, bool) {
	if !l.c.valid() {
		return nil, false
	}
	d := l.delta[l.c.item().kh]
	return &d.e, d.del
}

func (l *liveDelta) pop() { l.c.next() }

// deltaCopy is a delta entry as copyDelta saw it.
type deltaCopy struct {
	e   entry
	del bool
}

type copiedDelta struct {
	items []deltaCopy
	i     int
}

func (c *copiedDelta) peek() (*entry, bool) {
	if c.i >= len(c.items) {
		return nil, false
	}
	return &c.items[c.i].e, c.items[c.i].del
}

func (c *copiedDelta) pop() { c.i++ }

// mergeDelta calls fn for the live cells after after, in key-hash order: the
// entries of ix merged with ds (which holds only entries after after), the
// delta's version replacing or hiding the index's. With a bound, index
// entries past it are not visited (ds ends at the bound). It reports false
// when fn stopped it.
func mergeDelta(ix *CellIndex, after *schemas.Hash, ds deltaSeq, bound *schemas.Hash, fn func(*entry) (bool, error)) (bool, error) {
	// emitDelta yields delta entries ordered before kh (all of them for nil).
	emitDelta := func(kh *schemas.Hash) (bool, error) {
		for {
			d, del := ds.peek()
			if d == nil || (kh != nil && bytes.Compare(d.kh[:], kh[:]) >= 0) {
				return true, nil
			}
			ds.pop()
			if del {
				continue
			}
			if more, err := fn(d); !more || err != nil {
				return false, err
			}
		}
	}
	stopped := false // by fn, not by the bound
	_, err := ix.walkFrom(ix.root, 0, after, func(e *entry) (bool, error) {
		if bound != nil && bytes.Compare(e.kh[:], bound[:]) > 0 {
			return false, nil
		}
		if more, err := emitDelta(&e.kh); !more || err != nil {
			stopped = true
			return false, err
		}
		more, err := true, error(nil)
		if d, del := ds.peek(); d != nil && d.kh == e.kh {
			ds.pop() // the delta's version replaces or hides the indexed one
			if !del {
				more, err = fn(d)
			}
		} else {
			more, err = fn(e)
		}
		stopped = !more
		return more, err
	})
	if stopped || err != nil {
		return false, err
	}
	return emitDelta(nil)
}

// Materialize writes the delta into the index: resident dirty states go to the
// CAS in batches, all upserts and deletes are applied to the CellIndex in one
// pass, the most recently written flushed cells (up to the cache size) enter the
// hot cache, and the delta is cleared. It returns the new root. On error the
// head is unchanged (objects already written stay in the CAS, unreferenced).
// Cost: O(dirty x depth) node writes plus the dirty states.
func (h *Head) Materialize() (schemas.Hash, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain != nil {
		return schemas.Hash{}, ErrDrainInFlight
	}
	if len(h.delta) == 0 {
		return h.ix.Root(), nil
	}
	if err := h.flushResident(); err != nil {
		return schemas.Hash{}, err
	}
	chs := make([]change, 0, len(h.delta))
	for _, d := range h.sortedDelta() {
		chs = append(chs, change{del: d.del, e: d.e})
	}
	ix, err := h.ix.applyWith(&writer{r: h.ix.r, missingOnly: h.missingOnly}, chs)
	if err != nil {
		return schemas.Hash{}, err
	}
	h.ix = ix
	h.promote()
	h.delta = map[schemas.Hash]*dirty{}
	h.order.Clear()
	h.unknowns = nil
	h.first, h.last = nil, nil
	h.residentBytes, h.resident, h.spilled, h.deletes, h.unknown, h.adjust = 0, 0, 0, 0, 0, 0
	return ix.Root(), nil
}

// MaterializeSome writes at most limit delta entries — the first in key-hash
// order — into the index and drops them from the delta; the rest stay dirty
// over the new index. It bounds the pause of one call (cost O(limit x depth)
// node writes plus their states) so a large delta can be drained a slice at
// a time between inputs. The resulting root after the whole delta is drained
// equals Materialize's: the index is history-independent. It returns how
// many entries it wrote. On error the head is unchanged.
func (h *Head) MaterializeSome(limit int) (int, error) {
	dr, err := h.prepareDrain(limit)
	if dr == nil {
		return 0, err
	}
	// The same three steps as a background drain, run here: the head stays
	// readable while the slice is written, and this goroutine, the only
	// writer, changes nothing meanwhile, so every entry leaves the delta.
	dr.Run()
	return h.install(dr)
}

func (h *Head) flushResident() error {
	var objs [][]byte
	var hs []schemas.Hash
	n := 0
	for d := h.first; d != nil; d = d.next {
		objs = append(objs, d.state)
		hs = append(hs, d.e.state)
		n += len(d.state)
		if n >= flushBytes || d.next == nil {
			if err := putObjects(h.store, h.missingOnly, hs, objs); err != nil {
				return fmt.Errorf("cells: write %d dirty states: %w", len(objs), err)
			}
			clear(objs)
			objs, hs, n = objs[:0], hs[:0], 0
		}
	}
	return nil
}

// promote moves the newest flushed resident states into the hot cache, oldest
// of them first so the newest ends most recently used.
func (h *Head) promote() {
	d := h.last
	for k := 1; k < h.cfg.CacheSize && d != nil && d.prev != nil; k++ {
		d = d.prev
	}
	for ; d != nil; d = d.next {
		h.cache.Add(d.e.kh, &cached{e: d.e, state: d.state})
	}
}

// Stats reports the layers' sizes and cache counters.
func (h *Head) Stats() Stats {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return Stats{
		Dirty:         len(h.delta),
		Deletes:       h.deletes,
		Resident:      h.resident,
		ResidentBytes: h.residentBytes,
		Spilled:       h.spilled,
		SpillsTotal:   h.spillsTotal,
		DrainsTotal:   h.drainsTotal,
		CacheLen:      h.cache.Len(),
		CacheSize:     h.cfg.CacheSize,
		CacheHits:     h.hits.Load(),
		CacheMisses:   h.misses.Load(),
		Prefetched:    h.prefetched.Load(),
	}
}

// Spilled lists the state hashes of the dirty cells whose states were
// spilled to the CAS: objects the head will name (at its next Materialize)
// without writing them again, so a garbage collection must keep them.
func (h *Head) Spilled() []schemas.Hash {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var out []schemas.Hash
	for _, d := range h.delta {
		if d.spilled && !d.del {
			out = append(out, d.e.state)
		}
	}
	return out
}
