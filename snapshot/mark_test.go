package snapshot_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// buildIndex stores n cells (keys and states derived from i and version v)
// and an index of them, and returns the index.
func buildIndex(t testing.TB, store cas.Store, n, v int) *cells.CellIndex {
	t.Helper()
	entries := make([]cells.Entry, n)
	states := make([][]byte, n)
	for i := range n {
		states[i] = schemas.MustMarshal(fmt.Sprintf("state %d v%d", i, v))
		entries[i] = cells.Entry{Key: schemas.MustMarshal(fmt.Sprintf("cell %d", i)), StateHash: schemas.HashBytes(states[i]), Size: uint64(len(states[i]))}
	}
	if _, err := store.PutBatch(states); err != nil {
		t.Fatal(err)
	}
	ix, err := cells.BuildIndex(store, entries)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// indexObjects lists an index's nodes and its distinct states, read with
// the index's own Ascend and Verify rather than the walk Mark does.
func indexObjects(t *testing.T, ix *cells.CellIndex) (nodes int, states map[schemas.Hash]bool) {
	t.Helper()
	nodes, err := ix.Verify()
	if err != nil {
		t.Fatal(err)
	}
	states = map[schemas.Hash]bool{}
	err = ix.Ascend(func(e cells.Entry) (bool, error) {
		states[e.StateHash] = true
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes, states
}

// TestMarkReachesIndexesAndObjects: Mark reaches exactly an index's nodes
// and states and the plain objects pinned, nothing the roots do not reach,
// and reports its progress up to the count it returns.
func TestMarkReachesIndexesAndObjects(t *testing.T) {
	store := cas.NewMemory()
	old := buildIndex(t, store, 400, 0) // garbage: only its shared parts are reachable
	ix := buildIndex(t, store, 1000, 1)
	object, _ := store.Put([]byte("a pinned plain object"))
	garbage, _ := store.Put([]byte("garbage"))

	var calls []int
	m, err := snapshot.Mark(store, []snapshot.Pins{{Indexes: []schemas.Hash{ix.Root(), cells.EmptyRoot}, Objects: []schemas.Hash{object}}}, func(n int) { calls = append(calls, n) })
	if err != nil {
		t.Fatal(err)
	}
	nodes, states := indexObjects(t, ix)
	if want := nodes + len(states) + 1; m.Len() != want {
		t.Errorf("marked %d objects, want %d nodes + %d states + 1 object", m.Len(), nodes, len(states))
	}
	for s := range states {
		if !m.Has(s) {
			t.Fatalf("state %s not marked", s)
		}
	}
	if !m.Has(ix.Root()) || !m.Has(object) {
		t.Error("root or pinned object not marked")
	}
	if m.Has(garbage) || m.Has(old.Root()) {
		t.Error("an unreachable object is marked")
	}
	if len(calls) == 0 || calls[len(calls)-1] != m.Len() {
		t.Errorf("progress calls %v; want the last to be %d", calls, m.Len())
	}
}

// countingStore counts Get calls per hash.
type countingStore struct {
	cas.Store
	mu   sync.Mutex
	gets map[schemas.Hash]int
}

func (c *countingStore) Get(h schemas.Hash) ([]byte, error) {
	c.mu.Lock()
	c.gets[h]++
	c.mu.Unlock()
	return c.Store.Get(h)
}

// TestMarkReadsEachNodeOnce: roots sharing most of their nodes (two
// versions of an index, the same root twice, several Pins) are read once
// per node, and their union is marked.
func TestMarkReadsEachNodeOnce(t *testing.T) {
	mem := cas.NewMemory()
	ix := buildIndex(t, mem, 2000, 0)
	states := [][]byte{schemas.MustMarshal("changed")}
	if _, err := mem.PutBatch(states); err != nil {
		t.Fatal(err)
	}
	ix2, err := ix.Apply([]cells.Change{{Entry: cells.Entry{Key: schemas.MustMarshal("cell 7"), StateHash: schemas.HashBytes(states[0]), Size: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: mem, gets: map[schemas.Hash]int{}}
	m, err := snapshot.Mark(store, []snapshot.Pins{
		{Indexes: []schemas.Hash{ix.Root(), ix2.Root()}},
		{Indexes: []schemas.Hash{ix2.Root()}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for h, n := range store.gets {
		if n != 1 {
			t.Errorf("node %s read %d times", h, n)
		}
	}
	n1, s1 := indexObjects(t, ix)
	n2, s2 := indexObjects(t, ix2)
	// ix2 rewrote one path: a leaf and the branches above it.
	newNodes := len(store.gets) - n1
	if newNodes <= 0 || newNodes >= n2 {
		t.Errorf("read %d nodes for indexes of %d and %d nodes sharing all but one path", len(store.gets), n1, n2)
	}
	union := len(s1)
	for s := range s2 {
		if !s1[s] {
			union++
		}
	}
	if m.Len() != len(store.gets)+union {
		t.Errorf("marked %d, want %d nodes + %d states", m.Len(), len(store.gets), union)
	}
}

// aLeafAndState finds, through Refs, a leaf node of ix and one of the
// states it names, and the branch above that leaf.
func aLeafAndState(t *testing.T, store cas.Store, root schemas.Hash) (branch, leaf, state schemas.Hash) {
	t.Helper()
	h := root
	for {
		data, err := store.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		nodes, states, err := cells.Refs(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(states) > 0 {
			return branch, h, states[0]
		}
		branch, h = h, nodes[0]
	}
}

// TestMarkMissingOrCorruptObjects: a missing root, child node, state or
// pinned object, and a corrupt node, each fail Mark with an error naming
// the object and what referred to it.
func TestMarkMissingOrCorruptObjects(t *testing.T) {
	ghost := schemas.HashBytes([]byte("never stored"))
	for _, tc := range []struct {
		name string
		// damage damages the store and returns the pins to mark and what the
		// error must say.
		damage  func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string)
		missing bool
	}{
		{"missing root", func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string) {
			return snapshot.Pins{Indexes: []schemas.Hash{root, ghost}}, []string{"index root " + ghost.String()}
		}, true},
		{"missing child node", func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string) {
			branch, leaf, _ := aLeafAndState(t, s, root)
			if err := s.Delete([]schemas.Hash{leaf}); err != nil {
				t.Fatal(err)
			}
			return snapshot.Pins{Indexes: []schemas.Hash{root}}, []string{"index node " + leaf.String() + " (named by index node " + branch.String()}
		}, true},
		{"missing state", func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string) {
			_, leaf, state := aLeafAndState(t, s, root)
			if err := s.Delete([]schemas.Hash{state}); err != nil {
				t.Fatal(err)
			}
			return snapshot.Pins{Indexes: []schemas.Hash{root}}, []string{"cell state " + state.String() + " (named by index node " + leaf.String()}
		}, true},
		{"missing pinned object", func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string) {
			return snapshot.Pins{Indexes: []schemas.Hash{root}, Objects: []schemas.Hash{ghost}}, []string{"pinned object " + ghost.String()}
		}, true},
		{"corrupt node", func(t *testing.T, s *cas.Memory, root schemas.Hash) (snapshot.Pins, []string) {
			branch, leaf, _ := aLeafAndState(t, s, root)
			s.Corrupt(leaf, []byte("not this"))
			return snapshot.Pins{Indexes: []schemas.Hash{root}}, []string{"index node " + leaf.String() + " (named by index node " + branch.String(), "do not match"}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cas.NewMemory()
			ix := buildIndex(t, s, 300, 0)
			pins, want := tc.damage(t, s, ix.Root())
			m, err := snapshot.Mark(s, []snapshot.Pins{pins}, nil)
			if err == nil {
				t.Fatalf("Mark succeeded with %d objects", m.Len())
			}
			if errors.Is(err, cas.ErrMissing) != tc.missing {
				t.Errorf("errors.Is(err, cas.ErrMissing) = %v, want %v", !tc.missing, tc.missing)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestMarkStatePins: marking a State's Pins reaches its workflows' indexes,
// its manifest's source and its artifacts.
func TestMarkStatePins(t *testing.T) {
	store := cas.NewMemory()
	a := buildIndex(t, store, 50, 0)
	b := buildIndex(t, store, 60, 1)
	source, _ := store.Put([]byte("manifest source"))
	art1, _ := store.Put([]byte("wasm 1"))
	art2, _ := store.Put([]byte("wasm 2"))
	st := &snapshot.State{
		Version:   snapshot.Version,
		Manifest:  &snapshot.Manifest{Hash: schemas.HashBytes([]byte("m")), Source: source, Artifacts: []schemas.Hash{art1, art2}},
		Workflows: []snapshot.Workflow{{Name: "a", Root: a.Root(), Cells: 50}, {Name: "b", Root: b.Root(), Cells: 60}, {Name: "c"}},
	}
	m, err := snapshot.Mark(store, []snapshot.Pins{st.Pins()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	na, sa := indexObjects(t, a)
	nb, sb := indexObjects(t, b)
	if want := na + len(sa) + nb + len(sb) + 3; m.Len() != want {
		t.Errorf("marked %d, want %d", m.Len(), want)
	}
	for _, h := range []schemas.Hash{a.Root(), b.Root(), source, art1, art2} {
		if !m.Has(h) {
			t.Errorf("%s not marked", h)
		}
	}
}

// BenchmarkMark marks a 100,000-cell index and reports the memory Mark
// allocates and the Marked set keeps, per marked object.
func BenchmarkMark(b *testing.B) {
	store := cas.NewMemory()
	ix := buildIndex(b, store, 100_000, 0)
	roots := []snapshot.Pins{{Indexes: []schemas.Hash{ix.Root()}}}
	var m *snapshot.Marked
	var alloc uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var err error
		m, err = snapshot.Mark(store, roots, nil)
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc = after.TotalAlloc - before.TotalAlloc
	}
	b.StopTimer()
	// What the set keeps: the heap with it minus the heap without it.
	runtime.GC()
	var with, without runtime.MemStats
	runtime.ReadMemStats(&with)
	n := m.Len()
	m = nil
	runtime.GC()
	runtime.ReadMemStats(&without)
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(float64(alloc)/float64(n), "alloc-B/object")
	b.ReportMetric(float64(int64(with.HeapAlloc)-int64(without.HeapAlloc))/float64(n), "kept-B/object")
}
