package cells

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
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

// CacheSizeEnv names the environment variable that sets the default hot-cache size.
const CacheSizeEnv = "AOS_CELL_CACHE_SIZE"

// ErrBadConfig reports an unusable Config or AOS_CELL_CACHE_SIZE.
var ErrBadConfig = errors.New("cells: bad config")

// ErrDrainInFlight: a Drain is prepared and not installed, so the index
// cannot be changed another way until it is.
var ErrDrainInFlight = errors.New("cells: a drain is in flight")

// Config sizes a Head. Zero fields take the defaults above.
type Config struct {
	CacheSize      int   // clean cells in the hot LRU; 0 -> CacheSizeFromEnv() (AOS_CELL_CACHE_SIZE, default 4096)
	SpillThreshold int   // a dirty state larger than this goes to CAS at once (default 64 KiB)
	ResidentBudget int64 // resident dirty bytes beyond this spill, oldest first (default 64 MiB)
}

// CacheSizeFromEnv returns AOS_CELL_CACHE_SIZE, or DefaultCacheSize when unset.
// A value that is not a positive integer is an error naming the variable.
func CacheSizeFromEnv() (int, error) {
	s, ok := os.LookupEnv(CacheSizeEnv)
	if !ok || s == "" {
		return DefaultCacheSize, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %s=%q: want a positive integer", ErrBadConfig, CacheSizeEnv, s)
	}
	return n, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.CacheSize == 0 {
		n, err := CacheSizeFromEnv()
		if err != nil {
			return c, err
		}
		c.CacheSize = n
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
}

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
	first, last   *dirty // age list of resident upserts
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

	drain *Drain // prepared and not yet installed; blocks other materialization
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
	return &Head{store: store, cfg: cfg, ix: ix, cache: cache, delta: map[schemas.Hash]*dirty{}}, nil
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
	d := h.delta[kh]
	if d == nil {
		d = h.newDirty(kh, key)
		h.delta[kh] = d
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
		h.delta[kh] = d
	} else {
		h.track(d, -1)
		h.unstage(d)
		if d.base == baseAbsent {
			delete(h.delta, kh)
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
	ds := make([]*dirty, 0, h.unknown)
	for _, d := range h.delta {
		if d.base == baseUnknown {
			ds = append(ds, d)
		}
	}
	slices.SortFunc(ds, func(a, b *dirty) int { return bytes.Compare(a.e.kh[:], b.e.kh[:]) })
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
	return nil
}

// sortedDelta returns the delta entries in key-hash order.
func (h *Head) sortedDelta() []*dirty {
	ds := make([]*dirty, 0, len(h.delta))
	for _, d := range h.delta {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, compareDirty)
	return ds
}

// firstDelta returns the limit delta entries with the smallest key hashes,
// sorted: a selection, then a sort of only what is selected, so draining a
// large delta a slice at a time does not sort all of it for every slice.
func (h *Head) firstDelta(limit int) []*dirty {
	if limit >= len(h.delta) {
		return h.sortedDelta()
	}
	ds := make([]*dirty, 0, len(h.delta))
	for _, d := range h.delta {
		ds = append(ds, d)
	}
	selectFirst(ds, limit)
	ds = ds[:limit]
	slices.SortFunc(ds, compareDirty)
	return ds
}

func compareDirty(a, b *dirty) int { return bytes.Compare(a.e.kh[:], b.e.kh[:]) }

// selectFirst reorders ds so that its k smallest entries (by key hash) come
// first, in no particular order: quickselect (Hoare partition), expected
// O(len(ds)). Key hashes are SHA-256 and distinct, so the middle element is
// as good a pivot as any and the result does not depend on the map order ds
// was filled in.
func selectFirst(ds []*dirty, k int) {
	lo, hi := 0, len(ds)-1
	for lo < hi && lo < k && k <= hi {
		p := ds[lo+(hi-lo)/2].e.kh
		i, j := lo, hi
		for i <= j {
			for bytes.Compare(ds[i].e.kh[:], p[:]) < 0 {
				i++
			}
			for bytes.Compare(ds[j].e.kh[:], p[:]) > 0 {
				j--
			}
			if i <= j {
				ds[i], ds[j] = ds[j], ds[i]
				i++
				j--
			}
		}
		// ds[lo..j] <= p <= ds[i..hi]; entries between j and i equal p.
		// The boundary k is settled unless it falls inside one side.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

// Ascend calls fn for every live cell in key-hash order, merging the index with
// the delta (a dirty upsert replaces the indexed entry, a delete hides it), until
// fn returns false or an error. It holds the read lock throughout: fn must not
// call methods of h. Cost: O(index + delta log delta).
func (h *Head) Ascend(fn func(Entry) (bool, error)) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	ds := h.sortedDelta()
	i := 0
	// emitDelta yields delta entries ordered before kh (all of them for nil).
	emitDelta := func(kh *schemas.Hash) (bool, error) {
		for ; i < len(ds); i++ {
			d := ds[i]
			if kh != nil && bytes.Compare(d.e.kh[:], kh[:]) >= 0 {
				return true, nil
			}
			if d.del {
				continue
			}
			if more, err := fn(d.e.public(true)); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	more, err := h.ix.walk(h.ix.root, func(e *entry) (bool, error) {
		if more, err := emitDelta(&e.kh); !more || err != nil {
			return false, err
		}
		if i < len(ds) && ds[i].e.kh == e.kh {
			d := ds[i] // the delta's version replaces or hides the indexed one
			i++
			if d.del {
				return true, nil
			}
			return fn(d.e.public(true))
		}
		return fn(e.public(true))
	})
	if !more || err != nil {
		return err
	}
	_, err = emitDelta(nil)
	return err
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
	ix, err := h.ix.applySorted(chs)
	if err != nil {
		return schemas.Hash{}, err
	}
	h.ix = ix
	h.promote()
	h.delta = map[schemas.Hash]*dirty{}
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
	n := 0
	for d := h.first; d != nil; d = d.next {
		objs = append(objs, d.state)
		n += len(d.state)
		if n >= flushBytes || d.next == nil {
			if _, err := h.store.PutBatch(objs); err != nil {
				return fmt.Errorf("cells: write %d dirty states: %w", len(objs), err)
			}
			clear(objs)
			objs, n = objs[:0], 0
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
	}
}
