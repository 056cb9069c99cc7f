package castest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

var gcSeed = flag.Uint64("gc.seed", 0, "run the random-DAG GC test with only this seed")

// Run runs the contract every cas.Store keeps against stores made by open,
// a fresh empty store per subtest.
func Run(t *testing.T, open func(t *testing.T) cas.Store) {
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, open(t)) })
	t.Run("IterateOrder", func(t *testing.T) { iterateOrder(t, open(t)) })
	t.Run("PutAfterDelete", func(t *testing.T) { putAfterDelete(t, open(t)) })
	t.Run("PutMissing", func(t *testing.T) { putMissing(t, open(t)) })
	t.Run("GCKeepsExactlyReachable", func(t *testing.T) { gcKeepsExactlyReachable(t, open) })
	t.Run("GCMissingObjects", func(t *testing.T) { gcMissingObjects(t, open(t)) })
}

// Node is a test object: 8-byte node id, then the 32-byte hashes of its
// children. NodeChildren decodes its references for cas.GC.
func Node(id uint64, kids []schemas.Hash) []byte {
	b := binary.BigEndian.AppendUint64(nil, id)
	for _, k := range kids {
		b = append(b, k[:]...)
	}
	return b
}

func NodeChildren(h schemas.Hash, data []byte) ([]schemas.Hash, error) {
	if len(data) < 8 || (len(data)-8)%32 != 0 {
		return nil, fmt.Errorf("bad test node of %d bytes", len(data))
	}
	var kids []schemas.Hash
	for b := data[8:]; len(b) > 0; b = b[32:] {
		kids = append(kids, schemas.Hash(b[:32]))
	}
	return kids, nil
}

// randomDAG stores n nodes; node i links only to nodes < i, with shared
// children. It returns hashes, the adjacency by index, and picked roots.
func randomDAG(t *testing.T, s cas.Store, rng *rand.Rand, n int) ([]schemas.Hash, [][]int, []int) {
	t.Helper()
	hs := make([]schemas.Hash, n)
	adj := make([][]int, n)
	var batch [][]byte
	for i := range n {
		if i > 0 {
			for range rng.IntN(4) {
				adj[i] = append(adj[i], rng.IntN(i))
			}
		}
		kids := make([]schemas.Hash, len(adj[i]))
		for k, j := range adj[i] {
			kids[k] = hs[j]
		}
		data := Node(uint64(i), kids)
		hs[i] = schemas.HashBytes(data)
		batch = append(batch, data)
	}
	if _, err := s.PutBatch(batch); err != nil {
		t.Fatal(err)
	}
	var roots []int
	for range 1 + rng.IntN(5) {
		roots = append(roots, rng.IntN(n))
	}
	return hs, adj, roots
}

// reachable is the reference: recursive DFS over the generator's adjacency,
// never looking at stored bytes.
func reachable(adj [][]int, roots []int) map[int]bool {
	seen := map[int]bool{}
	var visit func(int)
	visit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, j := range adj[i] {
			visit(j)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return seen
}

func roundTrip(t *testing.T, s cas.Store) {
	a, b := []byte("alpha"), []byte("beta")
	ha, err := s.Put(a)
	if err != nil {
		t.Fatal(err)
	}
	if ha != schemas.HashBytes(a) {
		t.Fatalf("Put returned %s, want %s", ha, schemas.HashBytes(a))
	}
	if _, err := s.Put(a); err != nil { // idempotent
		t.Fatal(err)
	}
	got, err := s.Get(ha)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("Get = %q, %v; want %q", got, err, a)
	}
	hs, err := s.PutBatch([][]byte{b, a, b, {}})
	if err != nil {
		t.Fatal(err)
	}
	want := []schemas.Hash{schemas.HashBytes(b), ha, schemas.HashBytes(b), schemas.HashBytes(nil)}
	if !slices.Equal(hs, want) {
		t.Fatalf("PutBatch hashes = %v, want %v", hs, want)
	}
	for i, o := range [][]byte{b, a, {}} {
		got, err := s.Get(schemas.HashBytes(o))
		if err != nil || !bytes.Equal(got, o) {
			t.Fatalf("object %d: Get = %q, %v; want %q", i, got, err, o)
		}
	}
	missing := schemas.HashBytes([]byte("never stored"))
	if _, err := s.Get(missing); !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), missing.String()) {
		t.Fatalf("Get(missing) error = %v; want ErrNotFound naming %s", err, missing)
	}
	if ok, err := s.Has(missing); ok || err != nil {
		t.Fatalf("Has(missing) = %v, %v", ok, err)
	}
	if ok, err := s.Has(ha); !ok || err != nil {
		t.Fatalf("Has(stored) = %v, %v", ok, err)
	}
	if err := s.Delete([]schemas.Hash{ha, missing}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Has(ha); ok {
		t.Fatal("object still present after Delete")
	}
}

// putAfterDelete: a write that starts after a Delete returned stores the
// object again, by Put and by PutBatch. A cas.Guard's collection relies on it
// (a write racing the deletion of its object lands after it).
func putAfterDelete(t *testing.T, s cas.Store) {
	a, b := []byte("deleted then put"), []byte("deleted then put in a batch")
	ha, _ := s.Put(a)
	hb, _ := s.Put(b)
	if err := s.Delete([]schemas.Hash{ha, hb}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBatch([][]byte{b}); err != nil {
		t.Fatal(err)
	}
	for _, o := range [][]byte{a, b} {
		got, err := s.Get(schemas.HashBytes(o))
		if err != nil || !bytes.Equal(got, o) {
			t.Fatalf("%q after Delete and a new write: Get = %q, %v", o, got, err)
		}
	}
}

// putMissing: cas.PutMissing on the store (its own MissingPutter, or Has
// and PutBatch) writes exactly the objects the store lacks, each once, and
// says how many; an object given with a wrong hash writes nothing; one
// deleted is written again.
func putMissing(t *testing.T, s cas.Store) {
	stored, fresh, fresh2 := []byte("stored before"), []byte("missing, written"), []byte("missing too, given twice")
	if _, err := s.Put(stored); err != nil {
		t.Fatal(err)
	}
	objs := [][]byte{stored, fresh, fresh2, fresh2}
	hs := make([]schemas.Hash, len(objs))
	for i, o := range objs {
		hs[i] = schemas.HashBytes(o)
	}
	bad := []byte("not what the hash says")
	if n, err := cas.PutMissing(s, []schemas.Hash{hs[1], hs[2]}, [][]byte{fresh, bad}); !errors.Is(err, cas.ErrHashMismatch) || n != 0 {
		t.Fatalf("PutMissing of an object under another's hash: %d, %v; want ErrHashMismatch", n, err)
	}
	if ok, err := s.Has(hs[1]); ok || err != nil {
		t.Fatalf("a refused PutMissing stored an object: Has = %v, %v", ok, err)
	}
	if _, err := cas.PutMissing(s, hs[:2], objs[:1]); err == nil {
		t.Fatal("PutMissing with 2 hashes for 1 object: no error")
	}
	n, err := cas.PutMissing(s, hs, objs)
	if err != nil || n != 2 {
		t.Fatalf("PutMissing of one stored object and two missing ones (one given twice): wrote %d, %v; want 2", n, err)
	}
	for _, o := range objs {
		if got, err := s.Get(schemas.HashBytes(o)); err != nil || !bytes.Equal(got, o) {
			t.Fatalf("%q after PutMissing: Get = %q, %v", o, got, err)
		}
	}
	if n, err := cas.PutMissing(s, hs, objs); err != nil || n != 0 {
		t.Fatalf("PutMissing of stored objects: wrote %d, %v; want 0", n, err)
	}
	if err := s.Delete(hs[1:2]); err != nil {
		t.Fatal(err)
	}
	if n, err := cas.PutMissing(s, hs, objs); err != nil || n != 1 {
		t.Fatalf("PutMissing after a Delete: wrote %d, %v; want 1", n, err)
	}
	if got, err := s.Get(hs[1]); err != nil || !bytes.Equal(got, fresh) {
		t.Fatalf("deleted object after PutMissing: Get = %q, %v", got, err)
	}
}

func iterateOrder(t *testing.T, s cas.Store) {
	sizes := map[schemas.Hash]int{}
	var objs [][]byte
	for i := range 300 {
		o := bytes.Repeat([]byte{byte(i)}, i%17+1)
		o = fmt.Appendf(o, "#%d", i)
		objs = append(objs, o)
		sizes[schemas.HashBytes(o)] = len(o)
	}
	if _, err := s.PutBatch(objs[:150]); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs[150:] {
		if _, err := s.Put(o); err != nil {
			t.Fatal(err)
		}
	}
	var seen []schemas.Hash
	err := s.Iterate(func(h schemas.Hash, size int) error {
		if sizes[h] != size {
			t.Errorf("%s: size %d, want %d", h, size, sizes[h])
		}
		seen = append(seen, h)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(sizes) {
		t.Fatalf("Iterate saw %d objects, want %d", len(seen), len(sizes))
	}
	if !slices.IsSortedFunc(seen, func(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) }) {
		t.Fatal("Iterate not in hash order")
	}
	stop := errors.New("stop")
	n := 0
	err = s.Iterate(func(schemas.Hash, int) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Iterate after fn error: n=%d err=%v; want 1, stop", n, err)
	}
}

func gcKeepsExactlyReachable(t *testing.T, open func(t *testing.T) cas.Store) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 42, 1234567}
	if *gcSeed != 0 {
		seeds = []uint64{*gcSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay with: go test <this package> -run %s -gc.seed=%d", t.Name(), seed)
				}
			}()
			rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
			s := open(t)
			n := 50 + rng.IntN(400)
			hs, adj, roots := randomDAG(t, s, rng, n)
			want := reachable(adj, roots)
			rootHashes := make([]schemas.Hash, len(roots))
			for i, r := range roots {
				rootHashes[i] = hs[r]
			}

			stats, err := cas.GC(s, rootHashes, NodeChildren)
			if err != nil {
				t.Fatal(err)
			}
			var keptBytes, freedBytes int64
			for i, h := range hs {
				ok, err := s.Has(h)
				if err != nil {
					t.Fatal(err)
				}
				if ok != want[i] {
					t.Errorf("node %d (%s): present=%v, reachable=%v", i, h, ok, want[i])
				}
				size := int64(8 + 32*len(adj[i]))
				if want[i] {
					keptBytes += size
				} else {
					freedBytes += size
				}
			}
			wantStats := cas.GCStats{KeptObjects: len(want), KeptBytes: keptBytes, FreedObjects: n - len(want), FreedBytes: freedBytes}
			if stats != wantStats {
				t.Errorf("stats = %+v, want %+v", stats, wantStats)
			}
			// A second GC with the same roots frees nothing.
			again, err := cas.GC(s, rootHashes, NodeChildren)
			if err != nil {
				t.Fatal(err)
			}
			if again.FreedObjects != 0 || again.KeptObjects != len(want) {
				t.Errorf("second GC = %+v; want nothing freed", again)
			}
		})
	}
}

func gcMissingObjects(t *testing.T, s cas.Store) {
	leaf := Node(1, nil)
	hLeaf, _ := s.Put(leaf)
	ghost := schemas.HashBytes(Node(99, nil)) // never stored
	hParent, _ := s.Put(Node(2, []schemas.Hash{hLeaf, ghost}))
	hGarbage, _ := s.Put(Node(3, nil))

	_, err := cas.GC(s, []schemas.Hash{hLeaf, ghost}, NodeChildren)
	if !errors.Is(err, cas.ErrMissing) || !strings.Contains(err.Error(), "root "+ghost.String()) {
		t.Fatalf("GC with missing root: %v; want ErrMissing naming root %s", err, ghost)
	}
	_, err = cas.GC(s, []schemas.Hash{hParent}, NodeChildren)
	if !errors.Is(err, cas.ErrMissing) || !strings.Contains(err.Error(), ghost.String()) || !strings.Contains(err.Error(), hParent.String()) {
		t.Fatalf("GC with dangling child: %v; want ErrMissing naming %s and its parent %s", err, ghost, hParent)
	}
	if ok, _ := s.Has(hGarbage); !ok {
		t.Fatal("failed GC deleted an object")
	}
}
