package cells

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// selectFirst puts exactly the k smallest key hashes first, whatever the
// input order, for every k.
func TestSelectFirst(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	for _, n := range []int{1, 2, 3, 5, 17, 100, 1000} {
		all := make([]*dirty, n)
		for i := range all {
			all[i] = &dirty{e: entry{kh: schemas.HashBytes([]byte{byte(i), byte(i >> 8), byte(r.Uint32())})}}
		}
		sorted := slices.Clone(all)
		slices.SortFunc(sorted, compareDirty)
		for k := 0; k <= n; k++ {
			ds := slices.Clone(all)
			r.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
			selectFirst(ds, k)
			first := slices.Clone(ds[:k])
			slices.SortFunc(first, compareDirty)
			for i := range first {
				if first[i] != sorted[i] {
					t.Fatalf("n=%d k=%d: position %d holds %x, want %x", n, k, i, first[i].e.kh[:4], sorted[i].e.kh[:4])
				}
			}
		}
	}
}
