package cells

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// EmptyRoot is the root of an index with no cells. It is the zero hash and names
// no CAS object: garbage collection must not try to read it.
var EmptyRoot schemas.Hash

// Entry is the index record of one cell.
type Entry struct {
	Key        []byte
	StateHash  schemas.Hash
	Size       uint64 // state bytes
	LastActive uint64 // logical ns from the ingress stamp (deterministic)
}

// KeyHash is the SHA-256 of the key bytes: the cell's position in the index.
func (e Entry) KeyHash() schemas.Hash { return KeyHash(e.Key) }

// KeyHash is the SHA-256 of key bytes: the index orders and finds cells by it.
func KeyHash(key []byte) schemas.Hash { return schemas.HashBytes(key) }

// Change is one update for CellIndex.Apply: an upsert of Entry, or, with Delete
// set, the removal of Entry.Key (the other fields are ignored).
type Change struct {
	Entry  Entry
	Delete bool
}

// ErrDuplicateChange reports a batch that changes one key twice.
var ErrDuplicateChange = errors.New("cells: batch changes the same key twice")

// branchCacheSize bounds the decoded branch nodes kept per index family. Branches
// are ~0.7 KiB decoded; a million-cell index has about 4,400 of them.
const branchCacheSize = 4096

// flushBytes is how many bytes of new nodes Apply buffers before a PutBatch.
const flushBytes = 16 << 20

// reader loads nodes from the CAS. Branch nodes are immutable, so a decoded
// branch is cached by hash and shared by every index version built from it.
type reader struct {
	store    cas.Store
	branches *lru.Cache[schemas.Hash, *node]
}

func newReader(store cas.Store) *reader {
	c, err := lru.New[schemas.Hash, *node](branchCacheSize)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &reader{store: store, branches: c}
}

func (r *reader) load(h schemas.Hash) (*node, error) {
	if n, ok := r.branches.Get(h); ok {
		return n, nil
	}
	data, err := r.store.Get(h)
	if err != nil {
		return nil, fmt.Errorf("cells: read index node %s: %w", h, err)
	}
	n, err := decodeNode(data)
	if err != nil {
		return nil, fmt.Errorf("index node %s: %w", h, err)
	}
	if !n.leaf {
		r.branches.Add(h, n)
	}
	return n, nil
}

// CellIndex is a persistent, content-addressed map key_hash -> Entry: a radix
// trie over key-hash nibbles whose nodes are canonical CBOR objects in the CAS.
// A CellIndex value is immutable; Apply returns a new one sharing unchanged
// nodes. It is safe for concurrent use.
type CellIndex struct {
	r     *reader
	root  schemas.Hash
	count uint64
}

// LoadIndex opens the index rooted at root (EmptyRoot for an empty index). It
// reads the root node to check it exists and learn the cell count.
func LoadIndex(store cas.Store, root schemas.Hash) (*CellIndex, error) {
	return loadIndex(newReader(store), root)
}

func loadIndex(r *reader, root schemas.Hash) (*CellIndex, error) {
	ix := &CellIndex{r: r, root: root}
	if root.IsZero() {
		return ix, nil
	}
	n, err := r.load(root)
	if err != nil {
		return nil, err
	}
	ix.count = n.count
	return ix, nil
}

// BuildIndex writes an index holding exactly entries (in any order).
func BuildIndex(store cas.Store, entries []Entry) (*CellIndex, error) {
	chs := make([]Change, len(entries))
	for i, e := range entries {
		chs[i] = Change{Entry: e}
	}
	ix, _ := LoadIndex(store, EmptyRoot)
	return ix.Apply(chs)
}

// Root is the root hash; EmptyRoot when the index is empty.
func (ix *CellIndex) Root() schemas.Hash { return ix.root }

// Len is the number of cells.
func (ix *CellIndex) Len() int { return int(ix.count) }

// Lookup finds the entry for key. The returned Key is the caller's to keep.
func (ix *CellIndex) Lookup(key []byte) (Entry, bool, error) {
	kh := KeyHash(key)
	e, ok, err := ix.lookup(&kh)
	if !ok || err != nil {
		return Entry{}, ok, err
	}
	return e.public(true), true, nil
}

// lookup returns the entry for kh. Its key aliases node bytes.
func (ix *CellIndex) lookup(kh *schemas.Hash) (*entry, bool, error) {
	h := ix.root
	for depth := 0; !h.IsZero(); depth++ {
		n, err := ix.r.load(h)
		if err != nil {
			return nil, false, err
		}
		if n.leaf {
			i, found := slices.BinarySearchFunc(n.entries, kh, func(e entry, t *schemas.Hash) int {
				return bytes.Compare(e.kh[:], t[:])
			})
			if !found {
				return nil, false, nil
			}
			return &n.entries[i], true, nil
		}
		if depth >= maxDepth {
			return nil, false, fmt.Errorf("%w: index %s deeper than %d", ErrBadNode, ix.root, maxDepth)
		}
		c, ok := n.slot(nibble(kh, depth))
		if !ok {
			return nil, false, nil
		}
		h = c.hash
	}
	return nil, false, nil
}

// Ascend calls fn for every entry in key-hash order until fn returns false or an
// error. Keys are the caller's to keep.
func (ix *CellIndex) Ascend(fn func(Entry) (bool, error)) error {
	_, err := ix.walk(ix.root, func(e *entry) (bool, error) { return fn(e.public(true)) })
	return err
}

// walkFrom is walk of the subtree h at depth restricted to the entries whose
// key hashes are greater than after (all of them when after is nil): it
// descends along after's path, skipping every subtree that lies before it,
// so reaching the first entry reads depth+1 nodes.
func (ix *CellIndex) walkFrom(h schemas.Hash, depth int, after *schemas.Hash, fn func(*entry) (bool, error)) (bool, error) {
	if after == nil {
		return ix.walk(h, fn)
	}
	if h.IsZero() {
		return true, nil
	}
	n, err := ix.r.load(h)
	if err != nil {
		return false, err
	}
	if n.leaf {
		i := sort.Search(len(n.entries), func(i int) bool { return bytes.Compare(n.entries[i].kh[:], after[:]) > 0 })
		for ; i < len(n.entries); i++ {
			if more, err := fn(&n.entries[i]); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	if depth >= maxDepth {
		return false, fmt.Errorf("%w: index %s deeper than %d", ErrBadNode, ix.root, maxDepth)
	}
	first := nibble(after, depth)
	for nb := first; nb < FanOut; nb++ {
		c, ok := n.slot(nb)
		if !ok {
			continue
		}
		var more bool
		if nb == first {
			more, err = ix.walkFrom(c.hash, depth+1, after, fn)
		} else {
			more, err = ix.walk(c.hash, fn)
		}
		if !more || err != nil {
			return false, err
		}
	}
	return true, nil
}

func (ix *CellIndex) walk(h schemas.Hash, fn func(*entry) (bool, error)) (bool, error) {
	if h.IsZero() {
		return true, nil
	}
	n, err := ix.r.load(h)
	if err != nil {
		return false, err
	}
	if n.leaf {
		for i := range n.entries {
			if more, err := fn(&n.entries[i]); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	for _, c := range n.children {
		if more, err := ix.walk(c.hash, fn); !more || err != nil {
			return false, err
		}
	}
	return true, nil
}

// change is a Change with its key hash, sorted by it for applySorted.
type change struct {
	del bool
	e   entry
}

func cmpChange(a, b change) int { return bytes.Compare(a.e.kh[:], b.e.kh[:]) }

// Apply returns the index with changes applied, writing only the nodes on
// changed paths to the CAS. Deleting an absent key is a no-op; changing one key
// twice in a batch is ErrDuplicateChange. On error nothing is applied (some new
// nodes may already be in the CAS, unreferenced, for garbage collection).
func (ix *CellIndex) Apply(changes []Change) (*CellIndex, error) {
	chs := make([]change, len(changes))
	for i, c := range changes {
		key := bytes.Clone(c.Entry.Key)
		if key == nil {
			key = []byte{}
		}
		chs[i] = change{del: c.Delete, e: entry{kh: KeyHash(key), key: key,
			state: c.Entry.StateHash, size: c.Entry.Size, last: c.Entry.LastActive}}
	}
	slices.SortFunc(chs, cmpChange)
	for i := 1; i < len(chs); i++ {
		if chs[i-1].e.kh == chs[i].e.kh {
			return nil, fmt.Errorf("%w: key %x", ErrDuplicateChange, chs[i].e.key)
		}
	}
	return ix.applySorted(chs)
}

// applySorted applies changes sorted by strictly increasing key hash.
func (ix *CellIndex) applySorted(chs []change) (*CellIndex, error) {
	return ix.applyWith(&writer{r: ix.r}, chs)
}

// applyWith is applySorted writing through w (missingOnly: see Head.WriteMissingOnly).
func (ix *CellIndex) applyWith(w *writer, chs []change) (*CellIndex, error) {
	if len(chs) == 0 {
		return ix, nil
	}
	res, err := w.apply(child{hash: ix.root, count: ix.count}, 0, chs)
	if err != nil {
		return nil, err
	}
	if err := w.flush(); err != nil {
		return nil, err
	}
	return &CellIndex{r: ix.r, root: res.hash, count: res.count}, nil
}

// result is a rewritten subtree. leaf holds its entries when it is a leaf, so a
// parent that collapses need not read it back; count 0 is the empty subtree.
type result struct {
	child
	leaf []entry
}

type writer struct {
	r       *reader
	pending [][]byte
	hashes  []schemas.Hash // of pending
	bytes   int
	// missingOnly writes only the nodes the store lacks (cas.PutMissing).
	missingOnly bool
}

func (w *writer) emit(data []byte) (schemas.Hash, error) {
	h := schemas.HashBytes(data)
	w.pending = append(w.pending, data)
	w.hashes = append(w.hashes, h)
	w.bytes += len(data)
	if w.bytes >= flushBytes {
		return h, w.flush()
	}
	return h, nil
}

func (w *writer) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	if err := putObjects(w.r.store, w.missingOnly, w.hashes, w.pending); err != nil {
		return fmt.Errorf("cells: write %d index nodes: %w", len(w.pending), err)
	}
	clear(w.pending)
	w.pending, w.hashes = w.pending[:0], w.hashes[:0]
	w.bytes = 0
	return nil
}

// putObjects writes objs (whose hashes are hs) with one PutBatch, or, when
// missingOnly, only those the store lacks.
func putObjects(store cas.Store, missingOnly bool, hs []schemas.Hash, objs [][]byte) error {
	if missingOnly {
		_, err := cas.PutMissing(store, hs, objs)
		return err
	}
	_, err := store.PutBatch(objs)
	return err
}

// apply rewrites the subtree c at depth with chs, which all share its prefix.
func (w *writer) apply(c child, depth int, chs []change) (result, error) {
	var base []entry
	if !c.hash.IsZero() {
		n, err := w.r.load(c.hash)
		if err != nil {
			return result{}, err
		}
		if !n.leaf {
			return w.applyBranch(c, n, depth, chs)
		}
		base = n.entries
	}
	merged, changed := merge(base, chs)
	if !changed {
		return result{child: c, leaf: base}, nil
	}
	return w.build(depth, merged)
}

func (w *writer) applyBranch(c child, n *node, depth int, chs []change) (result, error) {
	if depth >= maxDepth {
		return result{}, fmt.Errorf("%w: branch below depth %d", ErrBadNode, maxDepth)
	}
	var kids [FanOut]result
	for nb := range FanOut {
		if k, ok := n.slot(nb); ok {
			kids[nb].child = k
		}
	}
	changed := false
	for len(chs) > 0 {
		nb := nibble(&chs[0].e.kh, depth)
		end := 1
		for end < len(chs) && nibble(&chs[end].e.kh, depth) == nb {
			end++
		}
		r, err := w.apply(kids[nb].child, depth+1, chs[:end])
		if err != nil {
			return result{}, err
		}
		if r.hash != kids[nb].hash {
			changed = true
		}
		kids[nb] = r
		chs = chs[end:]
	}
	if !changed {
		return result{child: c}, nil
	}
	var total uint64
	for i := range kids {
		total += kids[i].count
	}
	if total <= LeafMax {
		return w.collapse(kids[:], total)
	}
	return w.branch(kids[:], total)
}

// collapse turns a subtree that shrank to LeafMax entries or fewer back into
// the single leaf that canonical form requires.
func (w *writer) collapse(kids []result, total uint64) (result, error) {
	es := make([]entry, 0, total)
	for i := range kids {
		k := &kids[i]
		switch {
		case k.count == 0:
		case k.leaf != nil:
			es = append(es, k.leaf...)
		default:
			n, err := w.r.load(k.hash)
			if err != nil {
				return result{}, err
			}
			if !n.leaf {
				return result{}, fmt.Errorf("%w: branch %s holds only %d entries", ErrBadNode, k.hash, k.count)
			}
			es = append(es, n.entries...)
		}
	}
	return w.build(0, es)
}

func (w *writer) branch(kids []result, total uint64) (result, error) {
	var bitmap uint16
	cs := make([]child, 0, FanOut)
	for nb := range kids {
		if kids[nb].count > 0 {
			bitmap |= 1 << nb
			cs = append(cs, kids[nb].child)
		}
	}
	h, err := w.emit(encodeBranch(bitmap, cs))
	if err != nil {
		return result{}, err
	}
	return result{child: child{hash: h, count: total}}, nil
}

// build writes the canonical subtree at depth for sorted entries es.
func (w *writer) build(depth int, es []entry) (result, error) {
	switch {
	case len(es) == 0:
		return result{}, nil
	case len(es) <= LeafMax:
		h, err := w.emit(encodeLeaf(es))
		if err != nil {
			return result{}, err
		}
		return result{child: child{hash: h, count: uint64(len(es))}, leaf: es}, nil
	case depth >= maxDepth:
		return result{}, fmt.Errorf("cells: %d entries share a full key hash", len(es))
	}
	var kids [FanOut]result
	for len(es) > 0 {
		nb := nibble(&es[0].kh, depth)
		end := 1
		for end < len(es) && nibble(&es[end].kh, depth) == nb {
			end++
		}
		r, err := w.build(depth+1, es[:end])
		if err != nil {
			return result{}, err
		}
		kids[nb] = r
		es = es[end:]
	}
	var total uint64
	for i := range kids {
		total += kids[i].count
	}
	return w.branch(kids[:], total)
}

// merge applies sorted changes to sorted entries. It reports whether anything
// changed, so an unchanged subtree keeps its hash without a write.
func merge(base []entry, chs []change) ([]entry, bool) {
	out := make([]entry, 0, len(base)+len(chs))
	changed := false
	i := 0
	for _, c := range chs {
		for i < len(base) && bytes.Compare(base[i].kh[:], c.e.kh[:]) < 0 {
			out = append(out, base[i])
			i++
		}
		exists := i < len(base) && base[i].kh == c.e.kh
		switch {
		case c.del && exists:
			changed = true
			i++
		case c.del:
		case exists && base[i].equal(&c.e):
			out = append(out, base[i])
			i++
		case exists:
			changed = true
			out = append(out, c.e)
			i++
		default:
			changed = true
			out = append(out, c.e)
		}
	}
	out = append(out, base[i:]...)
	return out, changed
}

// contains sets present[i] when khs[i] (sorted, distinct) is in the index,
// reading each node on the way at most once.
func (ix *CellIndex) contains(khs []schemas.Hash, present []bool) error {
	return ix.containsIn(ix.root, 0, khs, present)
}

func (ix *CellIndex) containsIn(h schemas.Hash, depth int, khs []schemas.Hash, present []bool) error {
	if h.IsZero() || len(khs) == 0 {
		return nil
	}
	n, err := ix.r.load(h)
	if err != nil {
		return err
	}
	if n.leaf {
		j := 0
		for i := range khs {
			for j < len(n.entries) && bytes.Compare(n.entries[j].kh[:], khs[i][:]) < 0 {
				j++
			}
			present[i] = j < len(n.entries) && n.entries[j].kh == khs[i]
		}
		return nil
	}
	if depth >= maxDepth {
		return fmt.Errorf("%w: branch below depth %d", ErrBadNode, maxDepth)
	}
	for len(khs) > 0 {
		nb := nibble(&khs[0], depth)
		end := 1
		for end < len(khs) && nibble(&khs[end], depth) == nb {
			end++
		}
		if c, ok := n.slot(nb); ok {
			if err := ix.containsIn(c.hash, depth+1, khs[:end], present[:end]); err != nil {
				return err
			}
		}
		khs, present = khs[end:], present[end:]
	}
	return nil
}

// Verify reads the whole index and checks what decoding a single node cannot:
// every entry sits under the path its key hash spells, every key hashes to its
// key hash, and every branch's recorded child counts are true. It returns the
// number of nodes read. Tests and fsck-style tools use it; it costs O(index).
func (ix *CellIndex) Verify() (nodes int, err error) {
	var prefix schemas.Hash
	count, err := ix.verify(ix.root, 0, &prefix, &nodes)
	if err != nil {
		return nodes, err
	}
	if count != ix.count {
		return nodes, fmt.Errorf("%w: index %s holds %d entries, root says %d", ErrBadNode, ix.root, count, ix.count)
	}
	return nodes, nil
}

func (ix *CellIndex) verify(h schemas.Hash, depth int, prefix *schemas.Hash, nodes *int) (uint64, error) {
	if h.IsZero() {
		return 0, nil
	}
	*nodes++
	n, err := ix.r.load(h)
	if err != nil {
		return 0, err
	}
	if n.leaf {
		for i := range n.entries {
			e := &n.entries[i]
			if KeyHash(e.key) != e.kh {
				return 0, fmt.Errorf("%w: leaf %s: key %x does not hash to %s", ErrBadNode, h, e.key, e.kh)
			}
			for d := range depth {
				if nibble(&e.kh, d) != nibble(prefix, d) {
					return 0, fmt.Errorf("%w: leaf %s at depth %d: key hash %s off its path", ErrBadNode, h, depth, e.kh)
				}
			}
		}
		return n.count, nil
	}
	if depth >= maxDepth {
		return 0, fmt.Errorf("%w: branch below depth %d", ErrBadNode, maxDepth)
	}
	var total uint64
	for nb := range FanOut {
		c, ok := n.slot(nb)
		if !ok {
			continue
		}
		b := prefix[depth>>1]
		if depth&1 == 0 {
			prefix[depth>>1] = byte(nb)<<4 | b&0x0f
		} else {
			prefix[depth>>1] = b&0xf0 | byte(nb)
		}
		got, err := ix.verify(c.hash, depth+1, prefix, nodes)
		if err != nil {
			return 0, err
		}
		if got != c.count {
			return 0, fmt.Errorf("%w: branch %s: child %x holds %d entries, recorded %d", ErrBadNode, h, nb, got, c.count)
		}
		total += got
	}
	return total, nil
}
