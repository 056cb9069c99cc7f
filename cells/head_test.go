package cells_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

type refCell struct {
	state []byte
	last  uint64
}

// checkAgainst compares every observable of h with the reference map.
func checkAgainst(t *testing.T, h *cells.Head, ref map[string]refCell, keyspace int) {
	t.Helper()
	if got := h.Len(); got != len(ref) {
		t.Fatalf("Len %d, reference %d", got, len(ref))
	}
	var want []cells.Entry
	for k, c := range ref {
		want = append(want, cells.Entry{Key: []byte(k), StateHash: schemas.HashBytes(c.state), Size: uint64(len(c.state)), LastActive: c.last})
	}
	khs := make(map[*byte]schemas.Hash, len(want))
	for _, e := range want {
		khs[&e.Key[0]] = e.KeyHash()
	}
	slices.SortFunc(want, func(a, b cells.Entry) int {
		ka, kb := khs[&a.Key[0]], khs[&b.Key[0]]
		return bytes.Compare(ka[:], kb[:])
	})
	var got []cells.Entry
	if err := h.Ascend(func(e cells.Entry) (bool, error) { got = append(got, e); return true, nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Ascend gave %d cells, reference %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Key, want[i].Key) || got[i].StateHash != want[i].StateHash ||
			got[i].Size != want[i].Size || got[i].LastActive != want[i].LastActive {
			t.Fatalf("Ascend[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Stopping early stops.
	n := 0
	if err := h.Ascend(func(cells.Entry) (bool, error) { n++; return n < 3, nil }); err != nil || n != min(3, len(want)) {
		t.Fatalf("early stop: %d calls, %v", n, err)
	}
	checkPages(t, h, want)
	// Point reads: every key of a small keyspace, a rotating sample of a large one.
	stride := keyspace/200 + 1
	for i := len(got) % stride; i < keyspace; i += stride {
		checkKey(t, h, ref, cellKey(i))
	}
}

// checkPages checks AscendFrom and Page against want, the live cells in
// key-hash order: paging through with several limits yields every cell once,
// in order; AscendFrom and Page from a cell's key hash start strictly after
// it, and from an absent key hash at the first cell above it.
func checkPages(t *testing.T, h *cells.Head, want []cells.Entry) {
	t.Helper()
	same := func(what string, got, want []cells.Entry) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d cells, want %d", what, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i].Key, want[i].Key) || got[i].StateHash != want[i].StateHash ||
				got[i].Size != want[i].Size || got[i].LastActive != want[i].LastActive {
				t.Fatalf("%s: [%d] = %+v, want %+v", what, i, got[i], want[i])
			}
		}
	}
	limits := []int{97, len(want) + 1}
	if len(want) <= 300 {
		limits = append(limits, 1, 2, 7)
	}
	for _, limit := range limits {
		var all []cells.Entry
		var after *schemas.Hash
		for pages := 0; ; pages++ {
			page, err := h.Page(after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > limit || pages > len(want) {
				t.Fatalf("limit %d: page %d holds %d cells", limit, pages, len(page))
			}
			all = append(all, page...)
			if len(page) < limit {
				break
			}
			kh := page[len(page)-1].KeyHash()
			after = &kh
		}
		same(fmt.Sprintf("paging by %d", limit), all, want)
	}
	khs := make([]schemas.Hash, len(want))
	for i, e := range want {
		khs[i] = e.KeyHash()
	}
	from := func(after schemas.Hash) []cells.Entry {
		i, found := slices.BinarySearchFunc(khs, after, func(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) })
		if found {
			i++
		}
		return want[i:]
	}
	stride := len(want)/10 + 1
	for i := 0; i < len(want)+stride; i += stride {
		cursors := []schemas.Hash{schemas.HashBytes([]byte(fmt.Sprint("absent-", i)))}
		if i < len(want) {
			cursors = append(cursors, khs[i])
		}
		for _, after := range cursors {
			exp := from(after)
			// To the end from the first cursors, then the first 5 (stopping early).
			n := len(exp)
			if i > 0 {
				n = min(5, n)
			}
			var got []cells.Entry
			if err := h.AscendFrom(&after, func(e cells.Entry) (bool, error) {
				got = append(got, e)
				return len(got) < n, nil
			}); err != nil {
				t.Fatal(err)
			}
			same(fmt.Sprintf("AscendFrom %x", after[:4]), got, exp[:n])
			page, err := h.Page(&after, 5)
			if err != nil {
				t.Fatal(err)
			}
			same(fmt.Sprintf("Page from %x", after[:4]), page, exp[:min(5, len(exp))])
		}
	}
}

func checkKey(t *testing.T, h *cells.Head, ref map[string]refCell, key []byte) {
	t.Helper()
	c, want := ref[string(key)]
	st, ok, err := h.Get(key)
	if err != nil || ok != want || !bytes.Equal(st, c.state) {
		t.Fatalf("Get(%x) = %x %v %v; want %x %v", key, st, ok, err, c.state, want)
	}
	e, ok, err := h.Lookup(key)
	if err != nil || ok != want || (ok && (e.StateHash != schemas.HashBytes(c.state) || e.LastActive != c.last || !bytes.Equal(e.Key, key))) {
		t.Fatalf("Lookup(%x) = %+v %v %v", key, e, ok, err)
	}
}

// TestHeadMatchesReference drives a Head with random puts, deletes, reads and
// materializations against a plain map, with a tiny cache and budget so every
// layer (delta resident/spilled, cache, index) is exercised, and checks that
// the root always equals a direct build of the live set. Under -race (and
// not AOS_LONG) the largest keyspace is 600 rather than 2,000: the checks
// after each drain are quadratic in it, and every layer is still crossed.
func TestHeadMatchesReference(t *testing.T) {
	seed := testSeed(t)
	largest := 2000
	if raceEnabled && os.Getenv("AOS_LONG") == "" {
		largest = 600
	}
	for round := range 12 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			r := newRand(seed + uint64(round))
			keyspace := []int{20, 200, largest}[round%3]
			store := cas.NewMemory()
			cfg := cells.Config{CacheSize: 1 + r.IntN(16), SpillThreshold: 40 + r.IntN(40), ResidentBudget: int64(100 + r.IntN(2000))}
			h, err := cells.NewHead(store, cells.EmptyRoot, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref := map[string]refCell{}
			ops := 6 * keyspace
			// A drain prepared here runs in its own goroutine while the
			// ops go on, and is installed at a random later op.
			var dr *cells.Drain
			install := func() {
				t.Helper()
				if dr == nil {
					return
				}
				if _, err := h.Install(dr); err != nil {
					t.Fatal(err)
				}
				dr = nil
				// Whatever changed while the drain ran, the head still
				// agrees with the reference, counts included.
				checkAgainst(t, h, ref, keyspace)
			}
			for step := range ops {
				i := r.IntN(keyspace)
				key := cellKey(i)
				if r.IntN(100) < 3 {
					if dr == nil {
						if dr = h.PrepareDrain(1 + r.IntN(h.Stats().Dirty+3)); dr != nil {
							if h.PrepareDrain(1) != nil {
								t.Fatal("a second drain was prepared while one is in flight")
							}
							go dr.Run()
						}
					} else {
						install()
					}
				}
				if dr != nil && r.IntN(100) < 2 {
					if _, err := h.MaterializeSome(1); !errors.Is(err, cells.ErrDrainInFlight) {
						t.Fatalf("MaterializeSome with a drain in flight: %v", err)
					}
					if _, err := h.Materialize(); !errors.Is(err, cells.ErrDrainInFlight) {
						t.Fatalf("Materialize with a drain in flight: %v", err)
					}
				}
				switch p := r.IntN(100); {
				case p < 50:
					st := schemas.MustMarshal(bytes.Repeat([]byte{byte(step)}, r.IntN(100)))
					c := refCell{state: st, last: uint64(step)}
					if err := h.Put(key, st, c.last); err != nil {
						t.Fatal(err)
					}
					ref[string(key)] = c
				case p < 75:
					if err := h.Delete(key); err != nil {
						t.Fatal(err)
					}
					delete(ref, string(key))
				case p < 97:
					checkKey(t, h, ref, key)
				case p < 98:
					install()
					before := h.Stats().Dirty
					limit := 1 + r.IntN(before+3)
					n, err := h.MaterializeSome(limit)
					if err != nil {
						t.Fatal(err)
					}
					if want := min(limit, before); n != want || h.Stats().Dirty != before-want {
						t.Fatalf("MaterializeSome(%d) of %d dirty wrote %d, %d left", limit, before, n, h.Stats().Dirty)
					}
				case p < 99:
					install()
					root, err := h.Materialize()
					if err != nil {
						t.Fatal(err)
					}
					if root != h.Root() {
						t.Fatal("Root differs from Materialize's result")
					}
					if s := h.Stats(); s.Dirty != 0 || s.ResidentBytes != 0 || s.Spilled != 0 {
						t.Fatalf("delta not cleared: %+v", s)
					}
				default:
					checkAgainst(t, h, ref, keyspace)
				}
				if s := h.Stats(); s.ResidentBytes > cfg.ResidentBudget || s.CacheLen > cfg.CacheSize {
					t.Fatalf("over budget: %+v (config %+v)", s, cfg)
				}
			}
			checkAgainst(t, h, ref, keyspace)
			install()
			checkAgainst(t, h, ref, keyspace)
			root, err := h.Materialize()
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, h, ref, keyspace)
			mustVerify(t, h.Index())
			var final []cells.Entry
			for k, c := range ref {
				final = append(final, cells.Entry{Key: []byte(k), StateHash: schemas.HashBytes(c.state), Size: uint64(len(c.state)), LastActive: c.last})
			}
			direct, err := cells.BuildIndex(cas.NewMemory(), final)
			if err != nil {
				t.Fatal(err)
			}
			if root != direct.Root() {
				t.Fatalf("head root %s, direct build %s", root, direct.Root())
			}
			s := h.Stats()
			t.Logf("keyspace %d: %d cells, stats %+v", keyspace, len(ref), s)

			// Everything the head needs survives a GC from its root, and a fresh
			// head on that root (cold caches) sees the same world.
			sweep(t, store, root)
			h2, err := cells.NewHead(store, root, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkAgainst(t, h2, ref, keyspace)

			// Deleting everything returns to the empty root.
			for k := range ref {
				if err := h2.Delete([]byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			clear(ref)
			checkAgainst(t, h2, ref, keyspace)
			if root, err := h2.Materialize(); err != nil || root != cells.EmptyRoot {
				t.Fatalf("after deleting everything: root %s, %v", root, err)
			}
		})
	}
}

func TestHeadSpill(t *testing.T) {
	store := cas.NewMemory()
	h, err := cells.NewHead(store, cells.EmptyRoot, cells.Config{CacheSize: 4, SpillThreshold: 1000, ResidentBudget: 300})
	if err != nil {
		t.Fatal(err)
	}
	big := schemas.MustMarshal(bytes.Repeat([]byte{7}, 2000))
	if err := h.Put([]byte("big"), big, 1); err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(); s.Spilled != 1 || s.Resident != 0 || s.SpillsTotal != 1 {
		t.Fatalf("large state did not spill at once: %+v", s)
	}
	if ok, _ := store.Has(schemas.HashBytes(big)); !ok {
		t.Fatal("spilled state not in the CAS")
	}
	states := map[int][]byte{}
	for i := range 10 {
		states[i] = schemas.MustMarshal(bytes.Repeat([]byte{byte(i)}, 97)) // 99 bytes
		if err := h.Put(cellKey(i), states[i], uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	s := h.Stats()
	if s.ResidentBytes > 300 || s.Resident != 3 || s.Spilled != 8 || s.Dirty != 11 {
		t.Fatalf("budget spill: %+v", s)
	}
	// Oldest first: cells 0..6 spilled, 7..9 resident. Both read back intact.
	for i := range 10 {
		got, ok, err := h.Get(cellKey(i))
		if err != nil || !ok || !bytes.Equal(got, states[i]) {
			t.Fatalf("spilled cell %d: %v %v", i, ok, err)
		}
	}
	if got, _, _ := h.Get([]byte("big")); !bytes.Equal(got, big) {
		t.Fatal("big state read back wrong")
	}
	// Rewriting a spilled cell makes it resident again (and spills the oldest).
	if err := h.Put(cellKey(0), states[0], 11); err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(); s.Resident != 3 || s.Spilled != 8 || s.Dirty != 11 {
		t.Fatalf("after rewrite: %+v", s)
	}
	root, err := h.Materialize()
	if err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(); s.Dirty != 0 || s.Spilled != 0 || s.ResidentBytes != 0 || s.CacheLen != 3 {
		t.Fatalf("after materialize: %+v", s)
	}
	h2, _ := cells.NewHead(store, root, cells.Config{CacheSize: 4})
	for i := range 10 {
		if got, ok, err := h2.Get(cellKey(i)); err != nil || !ok || !bytes.Equal(got, states[i]) {
			t.Fatalf("cell %d after materialize: %v %v", i, ok, err)
		}
	}
	if h2.Len() != 11 {
		t.Fatalf("Len %d", h2.Len())
	}
}

func TestHeadCacheEviction(t *testing.T) {
	store := cas.NewMemory()
	h, _ := cells.NewHead(store, cells.EmptyRoot, cells.Config{CacheSize: 3})
	for i := range 50 {
		h.Put(cellKey(i), cellState(i, 1), 1)
	}
	if _, err := h.Materialize(); err != nil {
		t.Fatal(err)
	}
	if s := h.Stats(); s.CacheLen != 3 {
		t.Fatalf("promotion: %+v", s)
	}
	// Cells 47..49 were promoted: hits. Reading all evicts repeatedly.
	for i := 47; i < 50; i++ {
		if got, ok, err := h.Get(cellKey(i)); err != nil || !ok || !bytes.Equal(got, cellState(i, 1)) {
			t.Fatalf("promoted cell %d: %v %v", i, ok, err)
		}
	}
	for round := range 2 {
		for i := range 50 {
			got, ok, err := h.Get(cellKey(i))
			if err != nil || !ok || !bytes.Equal(got, cellState(i, 1)) {
				t.Fatalf("round %d cell %d: %v %v", round, i, ok, err)
			}
		}
	}
	s := h.Stats()
	if s.CacheLen != 3 || s.CacheHits != 3 || s.CacheMisses != 100 {
		t.Fatalf("cache stats: %+v", s)
	}
	h.Get(cellKey(49))
	if s2 := h.Stats(); s2.CacheHits != 4 {
		t.Fatalf("expected a hit on the most recent cell: %+v", s2)
	}
	// A write drops the cached clean copy; the delta wins.
	h.Put(cellKey(49), cellState(49, 2), 2)
	if got, _, _ := h.Get(cellKey(49)); !bytes.Equal(got, cellState(49, 2)) {
		t.Fatal("stale cache read after Put")
	}
	h.Delete(cellKey(48))
	if _, ok, _ := h.Get(cellKey(48)); ok {
		t.Fatal("deleted cell still visible")
	}
	if h.Len() != 49 {
		t.Fatalf("Len %d", h.Len())
	}
}

func TestHeadCorruptState(t *testing.T) {
	store := cas.NewMemory()
	h, _ := cells.NewHead(store, cells.EmptyRoot, cells.Config{CacheSize: 1})
	h.Put(cellKey(1), cellState(1, 1), 1)
	h.Put(cellKey(2), cellState(2, 1), 1)
	root, _ := h.Materialize()
	store.Corrupt(schemas.HashBytes(cellState(1, 1)), []byte("garbage"))
	h2, _ := cells.NewHead(store, root, cells.Config{CacheSize: 1})
	if _, _, err := h2.Get(cellKey(1)); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("corrupt state read: %v", err)
	}
}

// TestConfigDefaults: zero fields take the documented defaults; the package
// reads no environment (aosd passes AOS_CELL_CACHE_SIZE in as CacheSize).
func TestConfigDefaults(t *testing.T) {
	h, err := cells.NewHead(cas.NewMemory(), cells.EmptyRoot, cells.Config{})
	if err != nil || h.Config().CacheSize != cells.DefaultCacheSize || h.Config().SpillThreshold != cells.DefaultSpillThreshold ||
		h.Config().ResidentBudget != cells.DefaultResidentBudget {
		t.Fatalf("config %+v, %v", h.Config(), err)
	}
	h, err = cells.NewHead(cas.NewMemory(), cells.EmptyRoot, cells.Config{CacheSize: 17})
	if err != nil || h.Config().CacheSize != 17 {
		t.Fatalf("config %+v, %v", h.Config(), err)
	}
	if _, err := cells.NewHead(cas.NewMemory(), cells.EmptyRoot, cells.Config{CacheSize: -1}); !errors.Is(err, cells.ErrBadConfig) {
		t.Fatalf("negative cache size accepted: %v", err)
	}
}

// TestHeadConcurrentReaders: CLI-style readers run against the kernel's writes
// (meaningful under -race).
func TestHeadConcurrentReaders(t *testing.T) {
	h, _ := cells.NewHead(cas.NewMemory(), cells.EmptyRoot, cells.Config{CacheSize: 8, ResidentBudget: 500})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if st, ok, err := h.Get(cellKey(i % 100)); err != nil || (ok && len(st) == 0) {
					t.Errorf("concurrent Get: %v", err)
					return
				}
				h.Stats()
				h.Len()
				if i%50 == 0 {
					h.Ascend(func(cells.Entry) (bool, error) { return true, nil })
				}
				// A page read races the writes and drains: whatever it sees,
				// its cells are in strictly increasing key-hash order after
				// the cursor.
				after := schemas.HashBytes([]byte{byte(i)})
				page, err := h.Page(&after, 1+i%40)
				if err != nil {
					t.Errorf("concurrent Page: %v", err)
					return
				}
				prev := after
				for _, e := range page {
					kh := e.KeyHash()
					if bytes.Compare(kh[:], prev[:]) <= 0 {
						t.Errorf("concurrent Page from %x: %x after %x", after[:4], kh[:4], prev[:4])
						return
					}
					prev = kh
				}
			}
		}()
	}
	for v := range 20 {
		for i := range 100 {
			if (i+v)%7 == 0 {
				h.Delete(cellKey(i))
			} else {
				h.Put(cellKey(i), cellState(i, v), uint64(v))
			}
		}
		if v%2 == 0 {
			// A background drain, as the kernel runs them, between writes.
			if dr := h.PrepareDrain(30); dr != nil {
				go dr.Run()
				for i := range 20 {
					h.Put(cellKey(i), cellState(i, v+100), uint64(v))
				}
				if _, err := h.Install(dr); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if _, err := h.Materialize(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
