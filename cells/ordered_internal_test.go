package cells

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// checkOrdered checks the chunk invariants of o and that it holds exactly
// ref: every chunk non-empty and at most orderedChunkMax, items strictly
// increasing across chunk boundaries, the count right, Get agreeing.
func checkOrdered(t *testing.T, o *Ordered[int], ref map[schemas.Hash]int) {
	t.Helper()
	var prev *schemas.Hash
	n := 0
	for ci, c := range o.chunks {
		if len(c.items) == 0 || len(c.items) > orderedChunkMax {
			t.Fatalf("chunk %d holds %d items", ci, len(c.items))
		}
		if len(o.firsts) != len(o.chunks) || o.firsts[ci] != c.items[0].kh {
			t.Fatalf("chunk %d: first key hash not recorded (%d firsts, %d chunks)", ci, len(o.firsts), len(o.chunks))
		}
		for i := range c.items {
			kh := &c.items[i].kh
			if prev != nil && bytes.Compare(prev[:], kh[:]) >= 0 {
				t.Fatalf("chunk %d item %d: %x does not follow %x", ci, i, kh[:4], prev[:4])
			}
			prev = kh
			if want, ok := ref[*kh]; !ok || want != c.items[i].v {
				t.Fatalf("item %x = %d, reference %d (present %v)", kh[:4], c.items[i].v, want, ok)
			}
			n++
		}
	}
	if n != len(ref) || o.Len() != len(ref) {
		t.Fatalf("%d items, Len %d, reference %d", n, o.Len(), len(ref))
	}
	// Deletions merge small chunks: no two neighbours fit in a quarter
	// chunk, so chunks stay a quarter full on average whatever was deleted.
	for ci := 1; ci < len(o.chunks); ci++ {
		if a, b := len(o.chunks[ci-1].items), len(o.chunks[ci].items); a+b <= orderedChunkMax/4 {
			t.Fatalf("chunks %d and %d hold %d and %d items", ci-1, ci, a, b)
		}
	}
	for kh, want := range ref {
		if v, ok := o.Get(kh); !ok || v != want {
			t.Fatalf("Get(%x) = %d %v, want %d", kh[:4], v, ok, want)
		}
	}
}

// TestOrderedMatchesReference drives an Ordered through growth past many
// chunk splits, shrinkage through merges and removals, and mixed phases,
// against a map; after each phase it checks the structure and that Ascend
// from a random cursor (present, absent, before all, after all) yields
// exactly the reference's items greater than the cursor, in order.
func TestOrderedMatchesReference(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 5))
	var o Ordered[int]
	ref := map[schemas.Hash]int{}
	keyOf := func(i int) schemas.Hash { return schemas.HashBytes([]byte{byte(i), byte(i >> 8), byte(i >> 16)}) }
	const keyspace = 6000
	for phase, insertPct := range []int{100, 90, 50, 10, 0, 70, 30, 95, 5} {
		for range 4000 {
			k := keyOf(r.IntN(keyspace))
			if r.IntN(100) < insertPct {
				v := r.Int()
				_, had := ref[k]
				if replaced := o.Set(k, v); replaced != had {
					t.Fatalf("phase %d: Set replaced=%v, reference had=%v", phase, replaced, had)
				}
				ref[k] = v
			} else {
				want, had := ref[k]
				v, ok := o.Delete(k)
				if ok != had || v != want {
					t.Fatalf("phase %d: Delete = %d %v, want %d %v", phase, v, ok, want, had)
				}
				delete(ref, k)
			}
		}
		checkOrdered(t, &o, ref)
		sorted := make([]schemas.Hash, 0, len(ref))
		for k := range ref {
			sorted = append(sorted, k)
		}
		slices.SortFunc(sorted, func(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) })
		var low, high schemas.Hash
		for i := range high {
			high[i] = 0xff
		}
		cursors := []*schemas.Hash{nil, &low, &high}
		for range 20 {
			c := keyOf(r.IntN(keyspace))
			cursors = append(cursors, &c)
		}
		for _, after := range cursors {
			var want []schemas.Hash
			for _, k := range sorted {
				if after == nil || bytes.Compare(k[:], after[:]) > 0 {
					want = append(want, k)
				}
			}
			var got []schemas.Hash
			o.Ascend(after, func(kh schemas.Hash, v int) bool {
				if v != ref[kh] {
					t.Fatalf("Ascend: %x = %d, reference %d", kh[:4], v, ref[kh])
				}
				got = append(got, kh)
				return true
			})
			if !slices.Equal(got, want) {
				t.Fatalf("phase %d: Ascend from %v: %d items, want %d", phase, after, len(got), len(want))
			}
			// Stopping early stops.
			calls := 0
			o.Ascend(after, func(schemas.Hash, int) bool { calls++; return calls < 3 })
			if calls != min(3, len(want)) {
				t.Fatalf("early stop: %d calls, want %d", calls, min(3, len(want)))
			}
		}
	}
	// Emptied by deletes, the structure is empty; Clear empties it too.
	for k := range ref {
		o.Delete(k)
		delete(ref, k)
	}
	checkOrdered(t, &o, ref)
	if len(o.chunks) != 0 {
		t.Fatalf("%d chunks left in an empty Ordered", len(o.chunks))
	}
	o.Set(keyOf(1), 1)
	o.Clear()
	checkOrdered(t, &o, ref)
}

// BenchmarkOrderedSet inserts key hashes into an Ordered of up to 65,536
// items (the kernel's default delta threshold), starting over when full; and
// deletes them again in insertion order.
//
//	go test ./cells -run '^$' -bench Ordered
func BenchmarkOrderedSet(b *testing.B) {
	const n = 1 << 16
	khs := make([]schemas.Hash, n)
	for i := range khs {
		khs[i] = schemas.HashBytes([]byte{byte(i), byte(i >> 8), byte(i >> 16)})
	}
	var o Ordered[struct{}] // as a Head keeps its delta
	var d struct{}
	b.Run("set", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if i%n == 0 {
				o.Clear()
			}
			o.Set(khs[i%n], d)
		}
	})
	b.Run("delete", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if i%n == 0 {
				b.StopTimer()
				for _, kh := range khs {
					o.Set(kh, d)
				}
				b.StartTimer()
			}
			o.Delete(khs[i%n])
		}
	})
}

// An Ordered that keeps filling with one item and emptying again (the
// kernel's instance table between events) allocates nothing once warm.
func TestOrderedReusesLastChunk(t *testing.T) {
	var o Ordered[int]
	kh := schemas.HashBytes([]byte("k"))
	o.Set(kh, 1)
	o.Delete(kh)
	if n := testing.AllocsPerRun(100, func() {
		o.Set(kh, 1)
		o.Delete(kh)
	}); n != 0 {
		t.Fatalf("%v allocations per set and delete", n)
	}
}
