package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

// markProgressEvery is how many objects Mark proves present between two
// calls of its progress function.
const markProgressEvery = 1 << 14

// Marked is the set of CAS objects a Mark reached: their hashes, sorted and
// unique, 32 bytes each.
type Marked struct {
	hs []schemas.Hash
}

// Has reports whether Mark reached h (a binary search).
func (m *Marked) Has(h schemas.Hash) bool {
	_, ok := slices.BinarySearchFunc(m.hs, h, compareHash)
	return ok
}

// Len is the number of objects marked.
func (m *Marked) Len() int { return len(m.hs) }

func compareHash(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) }

// pending is an index node still to read and the node that named it (zero
// for a root), kept so that an error can say where a dangling reference is.
type pending struct {
	h, parent schemas.Hash
}

// Mark finds every CAS object reachable from roots and proves each present,
// or returns an error and no set; a caller sweeping with the set must sweep
// nothing then. Index roots are walked as CellIndex nodes (cells.Refs: a
// branch names child nodes, a leaf names cell states); cell states and plain
// objects are leaves of the graph. A node is read with Get (verified against
// its hash, then decoded), a leaf is only asked for with Has. A missing
// object is an error wrapping cas.ErrMissing that names it, what kind of
// reference reached it and the node that holds that reference; a corrupt or
// malformed node is an error naming it and its parent. Zero index roots
// (cells.EmptyRoot) name no object and are skipped.
//
// The walk is iterative (an explicit stack) and reads each node once, however
// many roots share it. progress, if not nil, is called with the count of
// objects proven present, every 16,384 and once at the end.
//
// Memory: every hash reached is collected (in chunks, then copied into one
// slice), sorted and made unique (so each leaf is asked for once, in hash
// order), and that slice is the result: 32 bytes per object kept, about
// twice that at the peak (chunks and slice during the copy), plus a map of
// the nodes read (a node holds up to 32 cells, so nodes are a few percent
// of the objects) and, per node read, its decoding, which is garbage at
// once. Measured over a 100,000-cell index (BenchmarkMark): 32 bytes kept
// and about 220 allocated per marked object, most of it the node decoding;
// so a million-cell world (about 1.1 million objects) keeps about 35 MB of
// marks and peaks near twice that.
//
// The node naming a missing leaf is not remembered during the walk (that
// would cost every leaf 4 more bytes); the error path reads the nodes once
// more to find it.
func Mark(store cas.Store, roots []Pins, progress func(marked int)) (*Marked, error) {
	var (
		nodes = map[schemas.Hash]struct{}{}
		stack []pending
		all   hashChunks // nodes read and leaves named, repeats included
	)
	for _, p := range roots {
		for _, r := range p.Indexes {
			if !r.IsZero() {
				stack = append(stack, pending{h: r})
			}
		}
		all.add(p.Objects...)
	}
	done := 0
	report := func() {
		done++
		if progress != nil && done%markProgressEvery == 0 {
			progress(done)
		}
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := nodes[p.h]; ok {
			continue
		}
		data, err := store.Get(p.h)
		switch {
		case errors.Is(err, cas.ErrNotFound):
			return nil, fmt.Errorf("snapshot: mark: %w: %s", cas.ErrMissing, describeNode(p))
		case err != nil:
			return nil, fmt.Errorf("snapshot: mark: %s: %w", describeNode(p), err)
		}
		kids, states, err := cells.Refs(data)
		if err != nil {
			return nil, fmt.Errorf("snapshot: mark: %s: %w", describeNode(p), err)
		}
		nodes[p.h] = struct{}{}
		all.add(p.h)
		report()
		for _, k := range kids {
			if _, ok := nodes[k]; !ok {
				stack = append(stack, pending{h: k, parent: p.h})
			}
		}
		all.add(states...)
	}
	hs := all.flatten()

	// Sorting makes repeats adjacent (one Has each) and the checks run in
	// key order, which a sorted store reads fastest.
	slices.SortFunc(hs, compareHash)
	hs = slices.Compact(hs)
	for _, h := range hs {
		if _, ok := nodes[h]; ok {
			continue // read already
		}
		ok, err := store.Has(h)
		if err != nil {
			return nil, fmt.Errorf("snapshot: mark: %s: %w", describeLeaf(store, roots, nodes, h), err)
		}
		if !ok {
			return nil, fmt.Errorf("snapshot: mark: %w: %s", cas.ErrMissing, describeLeaf(store, roots, nodes, h))
		}
		report()
	}
	if progress != nil {
		progress(len(hs))
	}
	return &Marked{hs: hs}, nil
}

// chunkLen is the length of one of hashChunks' chunks (128 KiB).
const chunkLen = 4096

// hashChunks collects hashes in fixed chunks, so that collecting n costs
// n x 32 bytes and no copying, where append's growth would allocate about
// five times that over the walk; flatten then copies them into one slice of
// exactly n.
type hashChunks struct {
	full [][]schemas.Hash
	cur  []schemas.Hash
	n    int
}

func (c *hashChunks) add(hs ...schemas.Hash) {
	c.n += len(hs)
	for len(hs) > 0 {
		if len(c.cur) == cap(c.cur) {
			if c.cur != nil {
				c.full = append(c.full, c.cur)
			}
			c.cur = make([]schemas.Hash, 0, chunkLen)
		}
		k := min(len(hs), cap(c.cur)-len(c.cur))
		c.cur = append(c.cur, hs[:k]...)
		hs = hs[k:]
	}
}

// flatten returns every hash added, in order, and empties c.
func (c *hashChunks) flatten() []schemas.Hash {
	out := make([]schemas.Hash, 0, c.n)
	for i, ch := range c.full {
		out = append(out, ch...)
		c.full[i] = nil // let the chunk go while the rest is copied
	}
	out = append(out, c.cur...)
	*c = hashChunks{}
	return out
}

func describeNode(p pending) string {
	if p.parent.IsZero() {
		return fmt.Sprintf("index root %s", p.h)
	}
	return fmt.Sprintf("index node %s (named by index node %s)", p.h, p.parent)
}

// describeLeaf names leaf h and a node that names it, which it reads the
// nodes again to find: it runs only on the way to an error.
func describeLeaf(store cas.Store, roots []Pins, nodes map[schemas.Hash]struct{}, h schemas.Hash) string {
	for _, p := range roots {
		if slices.Contains(p.Objects, h) {
			return fmt.Sprintf("pinned object %s", h)
		}
	}
	for n := range nodes {
		data, err := store.Get(n)
		if err != nil {
			continue
		}
		if _, states, err := cells.Refs(data); err == nil && slices.Contains(states, h) {
			return fmt.Sprintf("cell state %s (named by index node %s)", h, n)
		}
	}
	return fmt.Sprintf("cell state %s", h)
}
