package cells

import (
	"strconv"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// TestUnknownsListStaysBounded: cells written over a non-empty index, whose
// presence there is unknown until Len asks, are remembered in a list so Len
// resolves them without a walk of the whole delta; drains that remove them
// from the delta while nobody asks Len must not let the list grow with every
// cell ever written. Len is right at the end.
func TestUnknownsListStaysBounded(t *testing.T) {
	h, err := NewHead(cas.NewMemory(), EmptyRoot, Config{CacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return schemas.MustMarshal("k" + strconv.Itoa(i)) }
	for i := range 100 {
		if err := h.Put(key(i), schemas.MustMarshal(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Materialize(); err != nil {
		t.Fatal(err)
	}
	const total = 20_000
	for i := 100; i < total; i++ {
		if err := h.Put(key(i), schemas.MustMarshal(i), 2); err != nil {
			t.Fatal(err)
		}
		if len(h.unknowns) > 2*len(h.delta)+64 {
			t.Fatalf("after %d puts: %d remembered unknowns, delta %d", i, len(h.unknowns), len(h.delta))
		}
		if i%50 == 0 {
			if _, err := h.MaterializeSome(40); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := h.Len(); n != total {
		t.Fatalf("Len %d, want %d", n, total)
	}
}
