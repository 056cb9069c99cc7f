package cas_test

import (
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cas/castest"
	"github.com/aos-kernel/aos/schemas"
)

// TestMemoryStore holds the in-memory store to the contract every Store
// keeps (round trips, hash order, writes after deletes, GC from roots).
func TestMemoryStore(t *testing.T) {
	castest.Run(t, func(*testing.T) cas.Store { return cas.NewMemory() })
}

func TestGCDeepChainIsIterative(t *testing.T) {
	s := cas.NewMemory()
	var prev []schemas.Hash
	var h schemas.Hash
	const depth = 200_000
	for i := range depth {
		h, _ = s.Put(castest.Node(uint64(i), prev))
		prev = []schemas.Hash{h}
	}
	stats, err := cas.GC(s, []schemas.Hash{h}, castest.NodeChildren)
	if err != nil {
		t.Fatal(err)
	}
	if stats.KeptObjects != depth || stats.FreedObjects != 0 {
		t.Fatalf("stats = %+v", stats)
	}
}
