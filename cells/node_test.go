package cells

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// Wire shapes for schemas.Marshal: the hand encoder must produce the same bytes.
type wireEntry struct {
	_         struct{} `cbor:",toarray"`
	KeyHash   []byte
	Key       []byte
	StateHash []byte
	Size      uint64
	Last      uint64
}

type wireLeaf struct {
	_       struct{} `cbor:",toarray"`
	Kind    uint64
	Entries []wireEntry
}

type wireChild struct {
	_     struct{} `cbor:",toarray"`
	Hash  []byte
	Count uint64
}

type wireBranch struct {
	_        struct{} `cbor:",toarray"`
	Kind     uint64
	Bitmap   uint64
	Children []wireChild
}

var interestingUints = []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<64 - 1}

func randUint(r *rand.Rand) uint64 {
	if r.IntN(2) == 0 {
		return interestingUints[r.IntN(len(interestingUints))]
	}
	return r.Uint64() >> r.IntN(64)
}

func randLeaf(r *rand.Rand) []entry {
	n := 1 + r.IntN(LeafMax)
	es := make([]entry, n)
	for i := range es {
		key := make([]byte, r.IntN(40))
		for j := range key {
			key[j] = byte(r.Uint32())
		}
		if r.IntN(10) == 0 {
			key = make([]byte, 300) // two-byte length head
		}
		es[i] = entry{kh: KeyHash(append(key, byte(i))), key: key, size: randUint(r), last: randUint(r)}
		es[i].state = schemas.HashBytes(key)
	}
	sortEntries(es)
	return es
}

func sortEntries(es []entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && bytes.Compare(es[j-1].kh[:], es[j].kh[:]) > 0; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
}

func TestNodeEncodingIsSchemasCanonical(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		es := randLeaf(r)
		w := wireLeaf{Kind: kindLeaf}
		for _, e := range es {
			w.Entries = append(w.Entries, wireEntry{KeyHash: bytes.Clone(e.kh[:]), Key: append([]byte{}, e.key...),
				StateHash: bytes.Clone(e.state[:]), Size: e.size, Last: e.last})
		}
		want := schemas.MustMarshal(w)
		got := encodeLeaf(es)
		if !bytes.Equal(got, want) {
			t.Fatalf("leaf encoding differs from schemas.Marshal:\n got %x\nwant %x", got, want)
		}
		if err := schemas.CheckCanonical(got); err != nil {
			t.Fatalf("leaf not canonical: %v", err)
		}
		n, err := decodeNode(got)
		if err != nil {
			t.Fatalf("decode leaf: %v", err)
		}
		if !bytes.Equal(encodeLeaf(n.entries), got) {
			t.Fatal("leaf does not round-trip")
		}

		var bm uint16
		var cs []child
		var total uint64
		wb := wireBranch{Kind: kindBranch}
		for nb := range FanOut {
			if r.IntN(3) == 0 {
				continue
			}
			bm |= 1 << nb
			c := child{hash: schemas.HashBytes([]byte{byte(nb)}), count: LeafMax + randUint(r)>>2}
			cs = append(cs, c)
			total += c.count
			wb.Children = append(wb.Children, wireChild{Hash: bytes.Clone(c.hash[:]), Count: c.count})
		}
		if bm == 0 {
			continue
		}
		wb.Bitmap = uint64(bm)
		want = schemas.MustMarshal(wb)
		got = encodeBranch(bm, cs)
		if !bytes.Equal(got, want) {
			t.Fatalf("branch encoding differs from schemas.Marshal:\n got %x\nwant %x", got, want)
		}
		n, err = decodeNode(got)
		if err != nil {
			if total < LeafMax { // overflowed counts
				continue
			}
			t.Fatalf("decode branch: %v", err)
		}
		if n.count != total || !bytes.Equal(encodeBranch(n.bitmap, n.children), got) {
			t.Fatal("branch does not round-trip")
		}
	}
}

func TestDecodeNodeRejects(t *testing.T) {
	es := []entry{{kh: KeyHash([]byte("a")), key: []byte("a")}, {kh: KeyHash([]byte("b")), key: []byte("b")}}
	sortEntries(es)
	leaf := encodeLeaf(es)
	swapped := encodeLeaf([]entry{es[1], es[0]})
	dup := encodeLeaf([]entry{es[0], es[0]})
	small := encodeBranch(1, []child{{hash: schemas.HashBytes(nil), count: LeafMax}})
	tests := map[string][]byte{
		"empty":            {},
		"trailing":         append(bytes.Clone(leaf), 0),
		"truncated":        leaf[:len(leaf)-1],
		"non-shortest":     {0x82, 0x18, 0x00, 0x80},
		"empty leaf":       schemas.MustMarshal([]any{0, []any{}}),
		"unknown kind":     schemas.MustMarshal([]any{2, []any{}}),
		"map":              schemas.MustMarshal(map[string]int{"a": 1}),
		"unsorted":         swapped,
		"duplicate":        dup,
		"small branch":     small,
		"bitmap mismatch":  encodeBranch(3, []child{{hash: schemas.HashBytes(nil), count: 100}}),
		"indefinite array": {0x9f, 0x00, 0xff},
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeNode(data); !errors.Is(err, ErrBadNode) {
				t.Fatalf("decodeNode(%x) = %v, want ErrBadNode", data, err)
			}
			if _, err := Children(data); err == nil {
				t.Fatal("Children accepted a malformed node")
			}
		})
	}
}

// FuzzDecodeNode: decoding never panics, and whatever decodes re-encodes to the
// same bytes, so each node has exactly one accepted encoding.
func FuzzDecodeNode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	f.Add(encodeLeaf(randLeaf(r)))
	f.Add(encodeBranch(0x8001, []child{{hash: schemas.HashBytes(nil), count: 20}, {hash: schemas.HashBytes([]byte{1}), count: 20}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := decodeNode(data)
		if err != nil {
			return
		}
		var again []byte
		if n.leaf {
			again = encodeLeaf(n.entries)
		} else {
			again = encodeBranch(n.bitmap, n.children)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted non-canonical node %x (canonical %x)", data, again)
		}
	})
}
