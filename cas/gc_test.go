package cas_test

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

var gcSeed = flag.Uint64("gc.seed", 0, "run the random-DAG GC test with only this seed")

// Test objects: 8-byte node id, then the 32-byte hashes of its children.
func node(id uint64, kids []schemas.Hash) []byte {
	b := binary.BigEndian.AppendUint64(nil, id)
	for _, k := range kids {
		b = append(b, k[:]...)
	}
	return b
}

func nodeChildren(h schemas.Hash, data []byte) ([]schemas.Hash, error) {
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
		data := node(uint64(i), kids)
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

func TestGCKeepsExactlyReachable(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 42, 1234567}
	if *gcSeed != 0 {
		seeds = []uint64{*gcSeed}
	}
	for name, mk := range stores(t) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				defer func() {
					if t.Failed() {
						t.Logf("replay with: go test ./cas/ -run TestGCKeepsExactlyReachable -gc.seed=%d", seed)
					}
				}()
				rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
				s := mk(t)
				n := 50 + rng.IntN(400)
				hs, adj, roots := randomDAG(t, s, rng, n)
				want := reachable(adj, roots)
				rootHashes := make([]schemas.Hash, len(roots))
				for i, r := range roots {
					rootHashes[i] = hs[r]
				}

				stats, err := cas.GC(s, rootHashes, nodeChildren)
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
				again, err := cas.GC(s, rootHashes, nodeChildren)
				if err != nil {
					t.Fatal(err)
				}
				if again.FreedObjects != 0 || again.KeptObjects != len(want) {
					t.Errorf("second GC = %+v; want nothing freed", again)
				}
			})
		}
	}
}

func TestGCMissingObjects(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			leaf := node(1, nil)
			hLeaf, _ := s.Put(leaf)
			ghost := schemas.HashBytes(node(99, nil)) // never stored
			hParent, _ := s.Put(node(2, []schemas.Hash{hLeaf, ghost}))
			hGarbage, _ := s.Put(node(3, nil))

			_, err := cas.GC(s, []schemas.Hash{hLeaf, ghost}, nodeChildren)
			if !errors.Is(err, cas.ErrMissing) || !strings.Contains(err.Error(), "root "+ghost.String()) {
				t.Fatalf("GC with missing root: %v; want ErrMissing naming root %s", err, ghost)
			}
			_, err = cas.GC(s, []schemas.Hash{hParent}, nodeChildren)
			if !errors.Is(err, cas.ErrMissing) || !strings.Contains(err.Error(), ghost.String()) || !strings.Contains(err.Error(), hParent.String()) {
				t.Fatalf("GC with dangling child: %v; want ErrMissing naming %s and its parent %s", err, ghost, hParent)
			}
			if ok, _ := s.Has(hGarbage); !ok {
				t.Fatal("failed GC deleted an object")
			}
		})
	}
}

func TestGCDeepChainIsIterative(t *testing.T) {
	s := cas.NewMemory()
	var prev []schemas.Hash
	var h schemas.Hash
	const depth = 200_000
	for i := range depth {
		h, _ = s.Put(node(uint64(i), prev))
		prev = []schemas.Hash{h}
	}
	stats, err := cas.GC(s, []schemas.Hash{h}, nodeChildren)
	if err != nil {
		t.Fatal(err)
	}
	if stats.KeptObjects != depth || stats.FreedObjects != 0 {
		t.Fatalf("stats = %+v", stats)
	}
}
