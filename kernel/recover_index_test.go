package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestFailedIndexMatchesSortedSet: random inserts (new and repeated) and
// removes (present and absent) keep the index
// equal to a sorted set, and ascend from any point visits exactly the ids
// at or after it, in order.
func TestFailedIndexMatchesSortedSet(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var x failedIndex
	ref := map[string]*instance{}
	inst := func() *instance {
		wf := fmt.Sprintf("wf%d", r.IntN(3))
		key := []byte(fmt.Sprintf("%06d", r.IntN(5000)))
		return &instance{id: instanceID(wf, key), wf: wf, key: key}
	}
	check := func(step int) {
		ids := make([]string, 0, len(ref))
		for id := range ref {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if x.len() != len(ids) {
			t.Fatalf("step %d: index holds %d, want %d", step, x.len(), len(ids))
		}
		for _, from := range []string{"", "wf1\x00", "wf1\x00002500", "wf2\x00999999", "zz"} {
			var got []string
			x.ascend(from, func(in *instance) bool { got = append(got, in.id); return true })
			i := sort.SearchStrings(ids, from)
			if !slices.Equal(got, ids[i:]) {
				t.Fatalf("step %d: ascend(%q) gave %d ids, want %d", step, from, len(got), len(ids)-i)
			}
		}
	}
	for step := range 20000 {
		in := inst()
		if r.IntN(3) == 0 {
			x.remove(in)
			delete(ref, in.id)
		} else {
			x.insert(in)
			ref[in.id] = in
		}
		if step%2000 == 0 {
			check(step)
		}
	}
	check(20000)
	if !x.hasPrefix("wf1\x00") || x.hasPrefix("wf9\x00") || x.hasPrefix("wf\x00") {
		t.Fatal("hasPrefix")
	}
	for id, in := range ref {
		x.remove(in)
		delete(ref, id)
	}
	check(-1)
	if x.len() != 0 {
		t.Fatalf("%d left after removing everything", x.len())
	}
}

// BenchmarkFailedIndexPage: with a million failed instances, inserting one,
// removing one and reading a 100-row page from the middle stay cheap (no
// work proportional to the number of failed instances).
func BenchmarkFailedIndexPage(b *testing.B) {
	var x failedIndex
	const n = 1_000_000
	for i := range n {
		key := []byte(fmt.Sprintf("%08d", i))
		x.insert(&instance{id: instanceID("wf", key), wf: "wf", key: key})
	}
	mid := instanceID("wf", []byte(fmt.Sprintf("%08d", n/2)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := []byte(fmt.Sprintf("%08dx", i%n))
		in := &instance{id: instanceID("wf", key), wf: "wf", key: key}
		x.insert(in)
		rows := 0
		x.ascend(mid, func(*instance) bool { rows++; return rows < 100 })
		x.remove(in)
	}
}
