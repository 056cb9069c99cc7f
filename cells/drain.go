package cells

import (
	"fmt"

	"github.com/aos-kernel/aos/schemas"
)

// Drain is MaterializeSome split in three so the costly middle runs off the
// caller's goroutine and outside the head's lock:
//
//	dr := h.PrepareDrain(limit) // under the lock: choose and snapshot entries
//	go dr.Run()                 // no lock: write states and index nodes
//	<-dr.Done(); h.Install(dr)  // under the lock: adopt the new index
//
// Between Prepare and Install the head keeps serving reads and writes: the
// chosen entries stay in the delta (which overrides the index) until Install
// removes those not changed since Prepare. An entry changed meanwhile stays
// dirty, re-based on the new index. Reads therefore see the same cells
// whenever Install happens; only the split between index and delta depends
// on timing, and the index root after the whole delta is drained is the
// same as Materialize's (the index is history-independent).
type Drain struct {
	base  *CellIndex
	items []drainItem
	ix    *CellIndex // the result of Run
	// missingOnly: Run writes only the states and nodes the store lacks
	// (Head.WriteMissingOnly when the drain was prepared).
	missingOnly bool
	err         error
	done        chan struct{}
}

type drainItem struct {
	d     *dirty
	ver   uint64
	del   bool
	e     entry
	state []byte // resident state to write; nil when spilled (already in the CAS) or deleted
}

// PrepareDrain chooses the first limit delta entries in key-hash order, as
// MaterializeSome does, and snapshots them. It returns nil when the delta is
// empty, limit is not positive, or a drain is already prepared.
func (h *Head) PrepareDrain(limit int) *Drain {
	dr, _ := h.prepareDrain(limit)
	return dr
}

// prepareDrain is PrepareDrain saying why there is no drain when one is in
// flight (ErrDrainInFlight); nil, nil means nothing to drain.
func (h *Head) prepareDrain(limit int) (*Drain, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain != nil {
		return nil, ErrDrainInFlight
	}
	if len(h.delta) == 0 || limit <= 0 {
		return nil, nil
	}
	ds := h.firstDelta(limit)
	dr := &Drain{base: h.ix, items: make([]drainItem, len(ds)), done: make(chan struct{}), missingOnly: h.missingOnly}
	for i, d := range ds {
		it := drainItem{d: d, ver: d.ver, del: d.del, e: d.e}
		if d.listed {
			it.state = d.state // never modified in place: Put replaces the slice
		}
		dr.items[i] = it
	}
	h.drain = dr
	return dr, nil
}

// Run writes the drain's states and index nodes and computes the new index.
// It takes no lock; call it once, from any goroutine.
func (dr *Drain) Run() {
	defer close(dr.done)
	var objs [][]byte
	var hs []schemas.Hash
	n := 0
	for i, it := range dr.items {
		if it.state != nil {
			objs = append(objs, it.state)
			hs = append(hs, it.e.state)
			n += len(it.state)
		}
		if len(objs) > 0 && (n >= flushBytes || i == len(dr.items)-1) {
			if err := putObjects(dr.base.r.store, dr.missingOnly, hs, objs); err != nil {
				dr.err = fmt.Errorf("cells: write %d dirty states: %w", len(objs), err)
				return
			}
			clear(objs)
			objs, hs, n = objs[:0], hs[:0], 0
		}
	}
	chs := make([]change, len(dr.items))
	for i, it := range dr.items {
		chs[i] = change{del: it.del, e: it.e}
	}
	dr.ix, dr.err = dr.base.applyWith(&writer{r: dr.base.r, missingOnly: dr.missingOnly}, chs)
}

// Index is the index Run built (nil before Run finished or when it failed):
// the base index with the drained entries applied. A drain of the whole
// delta gives the index Materialize would, without touching the head.
func (dr *Drain) Index() *CellIndex {
	select {
	case <-dr.done:
		if dr.err == nil {
			return dr.ix
		}
	default:
	}
	return nil
}

// Err is Run's error, once it has finished.
func (dr *Drain) Err() error {
	<-dr.done
	return dr.err
}

// Done is closed when Run has finished.
func (dr *Drain) Done() <-chan struct{} { return dr.done }

// Install adopts the index Run built and removes from the delta the entries
// unchanged since PrepareDrain (moving upserts to the hot cache); entries
// changed meanwhile stay dirty over the new index. It returns how many
// entries left the delta. Run must have finished. If Run failed, nothing
// changes, the head can be drained again, and the error is returned.
func (h *Head) Install(dr *Drain) (int, error) {
	n, err := h.install(dr)
	if err == nil {
		h.mu.Lock()
		h.drainsTotal++
		h.mu.Unlock()
	}
	return n, err
}

// install is Install without counting a background drain (MaterializeSome
// uses it for its own slices).
func (h *Head) install(dr *Drain) (int, error) {
	<-dr.done
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drain != dr {
		return 0, fmt.Errorf("cells: install of a drain this head did not prepare")
	}
	h.drain = nil
	if dr.err != nil {
		return 0, dr.err
	}
	h.ix = dr.ix
	n := 0
	// Only the last CacheSize drained cells can stay in the hot cache:
	// adding more would only evict them again, ~0.3 us each.
	cacheFrom := len(dr.items) - h.cfg.CacheSize
	for i, it := range dr.items {
		kh := it.e.kh
		cur := h.delta[kh]
		switch {
		case cur == it.d && cur.ver == it.ver:
			// Unchanged: the index now says what the delta said.
			h.track(cur, -1)
			if !cur.del && cur.listed && i >= cacheFrom {
				h.cache.Add(kh, &cached{e: cur.e, state: cur.state})
			}
			h.unstage(cur)
			h.dropDirty(kh)
			n++
		case cur == nil:
			// Removed from the delta meanwhile: a Delete of a cell the old
			// index did not hold. If the drain wrote it into the new index,
			// hide it again with a tombstone.
			if !it.del {
				d := &dirty{e: entry{kh: kh, key: it.e.key}, del: true, base: basePresent}
				h.addDirty(d)
				h.track(d, +1)
			}
		default:
			// Changed meanwhile (or removed and re-added): it stays dirty,
			// and what the new index holds for it is what the drain wrote.
			h.track(cur, -1)
			cur.base = basePresent
			if it.del {
				cur.base = baseAbsent
			}
			if cur.del && cur.base == baseAbsent {
				h.unstage(cur)
				h.dropDirty(kh) // deleting a cell the index does not hold
				continue
			}
			h.track(cur, +1)
		}
	}
	return n, nil
}
