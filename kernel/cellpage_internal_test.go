package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// TestListedMirrorsInstanceTable: the per-workflow lists that cell pages
// read hold exactly the instance table, through any sequence of instances
// entering it (state.instance) and settling out of it; and a listing shows
// an instance without a cell only when it is not at rest.
func TestListedMirrorsInstanceTable(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 9))
	st := &state{instances: map[string]*instance{}}
	for op := range 5000 {
		wf := []string{"a", "b"}[r.IntN(2)]
		key := schemas.MustMarshal(fmt.Sprint("k", r.IntN(300)))
		in := st.instance(wf, key)
		switch r.IntN(4) {
		case 0:
			in.failed = true
		case 1:
			in.failed = false
		}
		if r.IntN(2) == 0 {
			st.settle(in)
		}
		if op%500 != 0 {
			continue
		}
		n := 0
		for wf, l := range st.listed {
			l.Ascend(nil, func(kh schemas.Hash, in *instance) bool {
				if st.instances[in.id] != in || in.wf != wf || kh != schemas.HashBytes(in.key) {
					t.Fatalf("listed %s %x is not in the table as such", wf, in.key)
				}
				n++
				return true
			})
		}
		if n != len(st.instances) {
			t.Fatalf("op %d: %d listed, %d in the table", op, n, len(st.instances))
		}
	}
	// A page of no cells shows the failed instances, and not those at rest
	// that are still in the table (not yet settled).
	for _, wf := range []string{"a", "b"} {
		failed := 0
		for _, in := range st.instances {
			if in.wf == wf && in.failed {
				failed++
			}
		}
		rows := mergeRows(nil, st.pageInstances(wf, nil, nil, 1000), 1000)
		if len(rows) != failed {
			t.Fatalf("%s: %d rows, %d failed instances", wf, len(rows), failed)
		}
		for _, row := range rows {
			if row.status != StatusFailed || row.cell != -1 {
				t.Fatalf("%s: row %x is %s (cell %d)", wf, row.key, row.status, row.cell)
			}
		}
	}
}
