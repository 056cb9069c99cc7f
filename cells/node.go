package cells

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/schemas"
)

// Shape of the trie. Changing any of these changes every root hash.
const (
	// FanOut is the number of children of a branch: one per nibble of the key hash.
	FanOut = 16
	// LeafMax is the most entries a leaf holds. A subtree is a leaf exactly when it
	// has 1..LeafMax entries, and a branch exactly when it has more.
	LeafMax = 32
	// maxDepth is the number of nibbles in a key hash.
	maxDepth = 2 * len(schemas.Hash{})
)

const (
	kindLeaf   = 0
	kindBranch = 1
)

// ErrBadNode reports CAS bytes that are not a well-formed, canonical index node.
var ErrBadNode = errors.New("cells: malformed index node")

// entry is an index entry with its key hash, the trie's sort key.
type entry struct {
	kh    schemas.Hash
	key   []byte
	state schemas.Hash
	size  uint64
	last  uint64
}

func (e *entry) public(copyKey bool) Entry {
	k := e.key
	if copyKey {
		k = bytes.Clone(e.key)
		if k == nil {
			k = []byte{}
		}
	}
	return Entry{Key: k, StateHash: e.state, Size: e.size, LastActive: e.last}
}

func (e *entry) equal(o *entry) bool {
	return e.kh == o.kh && e.state == o.state && e.size == o.size && e.last == o.last &&
		bytes.Equal(e.key, o.key)
}

// child is a branch slot: the child's node hash and the number of entries below it.
type child struct {
	hash  schemas.Hash
	count uint64
}

// node is a decoded index node: a leaf (entries) or a branch (children by nibble).
type node struct {
	leaf     bool
	entries  []entry // leaf: sorted by strictly increasing kh
	bitmap   uint16  // branch: bit i set when nibble i has a child
	children []child // branch: present children in nibble order
	count    uint64  // entries in the subtree
}

// slot returns the child for nibble nb, if present.
func (n *node) slot(nb int) (child, bool) {
	if n.bitmap&(1<<nb) == 0 {
		return child{}, false
	}
	return n.children[bits.OnesCount16(n.bitmap&(1<<nb-1))], true
}

// nibble returns the depth-th 4-bit digit of kh, most significant first.
func nibble(kh *schemas.Hash, depth int) int {
	b := kh[depth>>1]
	if depth&1 == 0 {
		return int(b >> 4)
	}
	return int(b & 0x0f)
}

// The wire form is canonical CBOR (RFC 8949 core deterministic encoding), the same
// bytes schemas.Marshal produces for these shapes (node_test.go pins that):
//
//	leaf   = [0, [[key_hash: bstr32, key: bstr, state_hash: bstr32, size: uint, last_active: uint], ...]]
//	branch = [1, bitmap: uint, [[child_hash: bstr32, count: uint], ...]]
//
// Entries are sorted by key hash; branch children are in nibble order and bit i of
// bitmap marks nibble i. Hand-written because Materialize encodes and decodes tens
// of megabytes per snapshot and reflection would dominate it.

func entryLen(e *entry) int {
	return 1 + 34 + canon.HeadLen(uint64(len(e.key))) + len(e.key) + 34 + canon.HeadLen(e.size) + canon.HeadLen(e.last)
}

func encodeLeaf(es []entry) []byte {
	n := 2 + canon.HeadLen(uint64(len(es)))
	for i := range es {
		n += entryLen(&es[i])
	}
	b := make([]byte, 0, n)
	b = canon.AppendArray(b, 2)
	b = canon.AppendUint(b, kindLeaf)
	b = canon.AppendArray(b, uint64(len(es)))
	for i := range es {
		e := &es[i]
		b = canon.AppendArray(b, 5)
		b = canon.AppendBytes(b, e.kh[:])
		b = canon.AppendBytes(b, e.key)
		b = canon.AppendBytes(b, e.state[:])
		b = canon.AppendUint(b, e.size)
		b = canon.AppendUint(b, e.last)
	}
	return b
}

func encodeBranch(bitmap uint16, cs []child) []byte {
	b := make([]byte, 0, 8+len(cs)*(1+34+9))
	b = canon.AppendArray(b, 3)
	b = canon.AppendUint(b, kindBranch)
	b = canon.AppendUint(b, uint64(bitmap))
	b = canon.AppendArray(b, uint64(len(cs)))
	for i := range cs {
		b = canon.AppendArray(b, 2)
		b = canon.AppendBytes(b, cs[i].hash[:])
		b = canon.AppendUint(b, cs[i].count)
	}
	return b
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) fail(what string) error {
	return fmt.Errorf("%w: %s at byte %d", ErrBadNode, what, d.off)
}

// head reads a data item head of the given major type, insisting on the shortest form.
func (d *decoder) head(major byte) (uint64, error) {
	if d.off >= len(d.b) {
		return 0, d.fail("truncated")
	}
	ib := d.b[d.off]
	if ib>>5 != major {
		return 0, d.fail(fmt.Sprintf("major type %d, want %d", ib>>5, major))
	}
	_, n, next, ok := canon.Head(d.b, d.off)
	if !ok {
		why := canon.Why(d.b, d.off)
		d.off++
		if why == canon.Truncated {
			return 0, d.fail("truncated")
		}
		return 0, d.fail("indefinite or reserved length")
	}
	w := next - d.off
	d.off = next
	if canon.HeadLen(n) != w {
		return 0, d.fail("non-shortest integer")
	}
	return n, nil
}

func (d *decoder) bstr() ([]byte, error) {
	n, err := d.head(canon.MajorBytes)
	if err != nil {
		return nil, err
	}
	if uint64(len(d.b)-d.off) < n {
		return nil, d.fail("truncated byte string")
	}
	p := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return p, nil
}

func (d *decoder) hash(h *schemas.Hash) error {
	p, err := d.bstr()
	if err != nil {
		return err
	}
	if len(p) != len(h) {
		return d.fail("hash is not 32 bytes")
	}
	copy(h[:], p)
	return nil
}

func (d *decoder) arrayOf(n uint64) error {
	got, err := d.head(canon.MajorArray)
	if err != nil {
		return err
	}
	if got != n {
		return d.fail(fmt.Sprintf("array of %d, want %d", got, n))
	}
	return nil
}

// decodeNode parses and checks a node. Keys alias data; callers that hand keys
// out copy them. It checks everything that can be checked locally: shape,
// shortest encodings, sort order, counts and the leaf/branch size rule.
func decodeNode(data []byte) (*node, error) {
	d := &decoder{b: data}
	ln, err := d.head(canon.MajorArray)
	if err != nil {
		return nil, err
	}
	kind, err := d.head(canon.MajorUint)
	if err != nil {
		return nil, err
	}
	var n *node
	switch {
	case kind == kindLeaf && ln == 2:
		n, err = d.leaf()
	case kind == kindBranch && ln == 3:
		n, err = d.branch()
	default:
		return nil, d.fail(fmt.Sprintf("node kind %d with %d fields", kind, ln))
	}
	if err != nil {
		return nil, err
	}
	if d.off != len(d.b) {
		return nil, d.fail("trailing bytes")
	}
	return n, nil
}

func (d *decoder) leaf() (*node, error) {
	cnt, err := d.head(canon.MajorArray)
	if err != nil {
		return nil, err
	}
	if cnt == 0 || cnt > LeafMax {
		return nil, d.fail(fmt.Sprintf("leaf with %d entries", cnt))
	}
	n := &node{leaf: true, entries: make([]entry, cnt), count: cnt}
	for i := range n.entries {
		e := &n.entries[i]
		if err := d.arrayOf(5); err != nil {
			return nil, err
		}
		if err := d.hash(&e.kh); err != nil {
			return nil, err
		}
		if e.key, err = d.bstr(); err != nil {
			return nil, err
		}
		if err := d.hash(&e.state); err != nil {
			return nil, err
		}
		if e.size, err = d.head(canon.MajorUint); err != nil {
			return nil, err
		}
		if e.last, err = d.head(canon.MajorUint); err != nil {
			return nil, err
		}
		if i > 0 && bytes.Compare(n.entries[i-1].kh[:], e.kh[:]) >= 0 {
			return nil, d.fail("leaf entries not in increasing key-hash order")
		}
	}
	return n, nil
}

func (d *decoder) branch() (*node, error) {
	bm, err := d.head(canon.MajorUint)
	if err != nil {
		return nil, err
	}
	if bm == 0 || bm > 0xffff {
		return nil, d.fail(fmt.Sprintf("branch bitmap %#x", bm))
	}
	cnt, err := d.head(canon.MajorArray)
	if err != nil {
		return nil, err
	}
	if cnt != uint64(bits.OnesCount16(uint16(bm))) {
		return nil, d.fail("branch child count does not match bitmap")
	}
	n := &node{bitmap: uint16(bm), children: make([]child, cnt)}
	for i := range n.children {
		c := &n.children[i]
		if err := d.arrayOf(2); err != nil {
			return nil, err
		}
		if err := d.hash(&c.hash); err != nil {
			return nil, err
		}
		if c.count, err = d.head(canon.MajorUint); err != nil {
			return nil, err
		}
		if c.count == 0 || c.hash.IsZero() {
			return nil, d.fail("empty branch child")
		}
		if n.count+c.count < n.count {
			return nil, d.fail("count overflow")
		}
		n.count += c.count
	}
	if n.count <= LeafMax {
		return nil, d.fail(fmt.Sprintf("branch with only %d entries (must be a leaf)", n.count))
	}
	return n, nil
}

// Children returns every CAS object a node refers to: child nodes for a branch,
// state hashes for a leaf. Malformed data is an error, never an empty list, so a
// garbage collector cannot mistake a corrupt node for a childless one and sweep
// what it referred to. A collector that must know which references are nodes
// (to recurse) and which are opaque states uses Refs or WalkRefs.
func Children(data []byte) ([]schemas.Hash, error) {
	nodes, states, err := Refs(data)
	if err != nil {
		return nil, err
	}
	if nodes != nil {
		return nodes, nil
	}
	return states, nil
}

// Refs splits a node's references: nodes are index nodes (decode them with Refs
// again), states are cell states (leaves of the object graph).
func Refs(data []byte) (nodes, states []schemas.Hash, err error) {
	n, err := decodeNode(data)
	if err != nil {
		return nil, nil, err
	}
	if n.leaf {
		states = make([]schemas.Hash, len(n.entries))
		for i := range n.entries {
			states[i] = n.entries[i].state
		}
		return nil, states, nil
	}
	nodes = make([]schemas.Hash, len(n.children))
	for i := range n.children {
		nodes[i] = n.children[i].hash
	}
	return nodes, nil, nil
}

// GCChildren returns a children function for cas.GC over cell-index roots. The
// object graph mixes index nodes and opaque cell states, and only a node's
// parent knows which a hash is, so the function remembers the hashes it has
// seen referenced as states and reports no children for them; anything else
// (a root, a child of a branch) is decoded as a node. Use a fresh function for
// each GC run. A caller whose roots mix other object kinds dispatches to it for
// cell-index roots and the hashes it returns.
//
// A state byte-identical to an index node that is visited first as a state is
// treated as a state; both are the same object, so this can only matter if a
// workflow deliberately reproduces an index node's bytes as its state.
func GCChildren() func(h schemas.Hash, data []byte) ([]schemas.Hash, error) {
	states := map[schemas.Hash]struct{}{}
	nodes := map[schemas.Hash]struct{}{}
	return func(h schemas.Hash, data []byte) ([]schemas.Hash, error) {
		_, isState := states[h]
		_, isNode := nodes[h]
		if isState && !isNode {
			return nil, nil
		}
		ns, ss, err := Refs(data)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			nodes[n] = struct{}{}
		}
		for _, s := range ss {
			states[s] = struct{}{}
		}
		return append(ns, ss...), nil
	}
}
