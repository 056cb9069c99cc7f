package cells_test

import (
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

var seedFlag = flag.Uint64("cells.seed", 0, "seed for randomized cells tests (0: AOS_TEST_SEED or time)")

// testSeed picks the seed for a randomized test and logs it so a failure can be
// replayed with -cells.seed=N (or AOS_TEST_SEED=N).
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if seed == 0 {
		if s := os.Getenv("AOS_TEST_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("AOS_TEST_SEED=%q: %v", s, err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -cells.seed=%d)", seed, seed)
	return seed
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// cellKey is a deterministic key for cell i: canonical CBOR of a text string.
func cellKey(i int) []byte { return schemas.MustMarshal("cell-" + strconv.Itoa(i)) }

// cellState is a small canonical CBOR state for cell i at version v.
func cellState(i, v int) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(i))
	binary.BigEndian.PutUint64(b[8:], uint64(v))
	return schemas.MustMarshal(b[:])
}

// reachable marks every CAS object reachable from roots, through Refs.
func reachable(t testing.TB, store cas.Store, roots ...schemas.Hash) (nodes, states map[schemas.Hash]int) {
	t.Helper()
	nodes, states = map[schemas.Hash]int{}, map[schemas.Hash]int{}
	stack := []schemas.Hash{}
	for _, r := range roots {
		if !r.IsZero() {
			stack = append(stack, r)
		}
	}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := nodes[h]; ok {
			continue
		}
		data, err := store.Get(h)
		if err != nil {
			t.Fatalf("gc mark %s: %v", h, err)
		}
		nodes[h] = len(data)
		ns, ss, err := cells.Refs(data)
		if err != nil {
			t.Fatalf("gc refs %s: %v", h, err)
		}
		stack = append(stack, ns...)
		for _, s := range ss {
			states[s]++
		}
	}
	return nodes, states
}

// sweep runs cas.GC from roots with GCChildren: the collection the snapshot
// code will run, exercised here so tests do not hold every old index version.
func sweep(t testing.TB, store cas.Store, roots ...schemas.Hash) (deleted int) {
	t.Helper()
	var rs []schemas.Hash
	for _, r := range roots {
		if !r.IsZero() {
			rs = append(rs, r)
		}
	}
	st, err := cas.GC(store, rs, cells.GCChildren())
	if err != nil {
		t.Fatal(err)
	}
	return st.FreedObjects
}
