package cells

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/aos-kernel/aos/schemas"
)

// orderedChunkMax is the most items one chunk of an Ordered holds; a chunk
// that grows past it splits in two. 128 items of a 32-byte hash and a pointer
// are ~5 KiB: an insert moves half of that, and a million items make ~10,000
// chunks, whose pointer list moves on a split or a removal.
const orderedChunkMax = 128

// Ordered is a map from key hash to V kept in key-hash order, the order of
// the CellIndex. A Head keeps its delta in one, so reading the delta from a
// given key hash on (AscendFrom, Page) or its first entries (drains) costs
// O(log n + what is read) instead of a sort of the whole delta; the kernel
// keeps its table of live instances in one per workflow for the same reason.
//
// It is a sorted list of sorted chunks (a two-level B-tree): the chunk that
// holds a key hash is found by binary search over the chunks' first key
// hashes, then the item by binary search in the chunk. Set and Delete cost
// O(log n) comparisons plus moving at most one chunk's items (and, when a
// chunk splits, merges or empties, the chunk list's pointers). Chunks split
// and merge by count, never by key-hash bits, so keys ground to share a hash
// prefix do not unbalance it. Nothing in it depends on insertion order beyond
// chunk boundaries, and it holds no randomness.
//
// The zero value is empty and ready to use. It is not safe for concurrent
// use; a Head guards its own with its lock.
type Ordered[V any] struct {
	chunks []*orderedChunk[V]
	firsts []schemas.Hash // firsts[i] is chunks[i]'s first key hash: the chunk search reads only this
	n      int
	spare  *orderedChunk[V] // the last chunk, kept when emptied: a set that keeps emptying allocates nothing
}

type orderedItem[V any] struct {
	kh schemas.Hash
	v  V
}

type orderedChunk[V any] struct {
	items []orderedItem[V] // sorted by strictly increasing kh; never empty
}

func newOrderedChunk[V any](items []orderedItem[V]) *orderedChunk[V] {
	c := &orderedChunk[V]{items: make([]orderedItem[V], len(items), orderedChunkMax+1)}
	copy(c.items, items)
	return c
}

// Len is the number of items.
func (o *Ordered[V]) Len() int { return o.n }

// Clear removes every item and lets go of the memory that held them.
func (o *Ordered[V]) Clear() { o.chunks, o.firsts, o.n, o.spare = nil, nil, 0, nil }

// compareHash orders key hashes: by their first 8 bytes as a big-endian
// integer (one load, no call), then by the rest.
func compareHash(a, b *schemas.Hash) int {
	x, y := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return bytes.Compare(a[8:], b[8:])
}

// chunkFor is the chunk that holds kh, or where it would go: the last chunk
// whose first key hash is <= kh, or the first chunk. -1 when o is empty.
func (o *Ordered[V]) chunkFor(kh *schemas.Hash) int {
	if len(o.chunks) == 0 {
		return -1
	}
	// The first chunk whose first key hash is greater than kh, minus one.
	lo, hi := 1, len(o.chunks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compareHash(&o.firsts[m], kh) > 0 {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo - 1
}

// search finds kh in a chunk's items: its index, or where it would go.
func search[V any](items []orderedItem[V], kh *schemas.Hash) (int, bool) {
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := compareHash(&items[m].kh, kh); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// Get returns the value stored for kh.
func (o *Ordered[V]) Get(kh schemas.Hash) (V, bool) {
	var zero V
	ci := o.chunkFor(&kh)
	if ci < 0 {
		return zero, false
	}
	items := o.chunks[ci].items
	if i, ok := search(items, &kh); ok {
		return items[i].v, true
	}
	return zero, false
}

// Set stores v for kh and reports whether it replaced a value.
func (o *Ordered[V]) Set(kh schemas.Hash, v V) (replaced bool) {
	ci := o.chunkFor(&kh)
	if ci < 0 {
		c := o.spare
		if c == nil {
			c = newOrderedChunk[V](nil)
		}
		o.spare = nil
		c.items = append(c.items[:0], orderedItem[V]{kh: kh, v: v})
		o.chunks = append(o.chunks[:0], c)
		o.firsts = append(o.firsts[:0], kh)
		o.n = 1
		return false
	}
	c := o.chunks[ci]
	i, ok := search(c.items, &kh)
	if ok {
		c.items[i].v = v
		return true
	}
	c.items = slices.Insert(c.items, i, orderedItem[V]{kh: kh, v: v})
	if i == 0 {
		o.firsts[ci] = kh
	}
	o.n++
	if len(c.items) > orderedChunkMax {
		half := len(c.items) / 2
		right := newOrderedChunk(c.items[half:])
		clear(c.items[half:]) // drop the moved values' references
		c.items = c.items[:half]
		o.chunks = slices.Insert(o.chunks, ci+1, right)
		o.firsts = slices.Insert(o.firsts, ci+1, right.items[0].kh)
	}
	return false
}

// Delete removes kh and returns the value it held.
func (o *Ordered[V]) Delete(kh schemas.Hash) (V, bool) {
	var zero V
	ci := o.chunkFor(&kh)
	if ci < 0 {
		return zero, false
	}
	c := o.chunks[ci]
	i, ok := search(c.items, &kh)
	if !ok {
		return zero, false
	}
	v := c.items[i].v
	c.items = slices.Delete(c.items, i, i+1) // zeroes the vacated slot
	o.n--
	switch {
	case len(c.items) == 0:
		o.chunks = slices.Delete(o.chunks, ci, ci+1)
		o.firsts = slices.Delete(o.firsts, ci, ci+1)
		if len(o.chunks) == 0 {
			o.spare = c
		}
		return v, true
	case i == 0:
		o.firsts[ci] = c.items[0].kh
	}
	if len(c.items) <= orderedChunkMax/4 {
		o.mergeSmall(ci)
	}
	return v, true
}

// mergeSmall joins the small chunk ci with a neighbour when both fit in one,
// so deletions cannot leave a long list of nearly empty chunks.
func (o *Ordered[V]) mergeSmall(ci int) {
	c := o.chunks[ci]
	if ci+1 < len(o.chunks) && len(c.items)+len(o.chunks[ci+1].items) <= orderedChunkMax {
		c.items = append(c.items, o.chunks[ci+1].items...)
		o.chunks = slices.Delete(o.chunks, ci+1, ci+2)
		o.firsts = slices.Delete(o.firsts, ci+1, ci+2)
		return
	}
	if ci > 0 && len(o.chunks[ci-1].items)+len(c.items) <= orderedChunkMax {
		p := o.chunks[ci-1]
		p.items = append(p.items, c.items...)
		o.chunks = slices.Delete(o.chunks, ci, ci+1)
		o.firsts = slices.Delete(o.firsts, ci, ci+1)
	}
}

// Ascend calls fn with the items whose key hashes are greater than after
// (every item when after is nil) in key-hash order, until fn returns false.
// fn must not change o.
func (o *Ordered[V]) Ascend(after *schemas.Hash, fn func(kh schemas.Hash, v V) bool) {
	for c := o.seek(after); c.valid(); c.next() {
		it := c.item()
		if !fn(it.kh, it.v) {
			return
		}
	}
}

// orderedCursor walks an Ordered in key-hash order. It is invalidated by any
// change to the Ordered.
type orderedCursor[V any] struct {
	o     *Ordered[V]
	ci, i int
}

// seek positions a cursor at the first item with a key hash greater than
// after (the first item when after is nil).
func (o *Ordered[V]) seek(after *schemas.Hash) orderedCursor[V] {
	c := orderedCursor[V]{o: o}
	if after == nil || len(o.chunks) == 0 {
		return c
	}
	c.ci = o.chunkFor(after)
	i, ok := search(o.chunks[c.ci].items, after)
	if ok {
		i++
	}
	c.i = i
	c.skipEnd()
	return c
}

func (c *orderedCursor[V]) valid() bool { return c.ci < len(c.o.chunks) }

func (c *orderedCursor[V]) item() *orderedItem[V] { return &c.o.chunks[c.ci].items[c.i] }

func (c *orderedCursor[V]) next() {
	c.i++
	c.skipEnd()
}

// skipEnd moves past the end of a chunk to the start of the next.
func (c *orderedCursor[V]) skipEnd() {
	if c.ci < len(c.o.chunks) && c.i >= len(c.o.chunks[c.ci].items) {
		c.ci, c.i = c.ci+1, 0
	}
}
