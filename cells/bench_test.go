package cells_test

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

// Benchmarks run on a 1,000,000-cell world built once per backend and shared:
// "mem" is cas.NewMemory, "badger" is the Badger CAS on disk in a temp directory.
// Run them with (see docs/perf/cells.md):
//
//	go test -run '^$' -bench . -benchtime 3x ./cells/     (Materialize)
//	go test -run '^$' -bench 'Get|Put' ./cells/
const worldCells = 1_000_000

type world struct {
	store cas.Store
	root  schemas.Hash
	build time.Duration
}

var (
	worldsMu sync.Mutex
	worlds   = map[string]*world{}
	cleanups []func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.Exit(code)
}

func openBackend(b *testing.B, backend string) cas.Store {
	switch backend {
	case "mem":
		return cas.NewMemory()
	case "badger":
		dir, err := os.MkdirTemp("", "cells-bench-")
		if err != nil {
			b.Fatal(err)
		}
		db, err := badgerdb.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		cleanups = append(cleanups, func() { db.Close(); os.RemoveAll(dir) })
		return db.CAS()
	}
	b.Fatalf("unknown backend %q", backend)
	return nil
}

// getWorld returns the shared million-cell world for backend, building it on
// first use: states in one PutBatch per 100,000, the index in one Apply.
func getWorld(b *testing.B, backend string) *world {
	worldsMu.Lock()
	defer worldsMu.Unlock()
	if w := worlds[backend]; w != nil {
		return w
	}
	start := time.Now()
	store := openBackend(b, backend)
	es := make([]cells.Entry, worldCells)
	var states [][]byte
	for i := range es {
		st := cellState(i, 0)
		es[i] = cells.Entry{Key: cellKey(i), StateHash: schemas.HashBytes(st), Size: uint64(len(st)), LastActive: uint64(i)}
		states = append(states, st)
		if len(states) == 100_000 {
			if _, err := store.PutBatch(states); err != nil {
				b.Fatal(err)
			}
			states = states[:0]
		}
	}
	ix, err := cells.BuildIndex(store, es)
	if err != nil {
		b.Fatal(err)
	}
	w := &world{store: store, root: ix.Root(), build: time.Since(start)}
	worlds[backend] = w
	return w
}

var backends = []string{"mem", "badger"}

func BenchmarkGetHot(b *testing.B) {
	for _, be := range backends {
		b.Run(be, func(b *testing.B) {
			w := getWorld(b, be)
			h, err := cells.NewHead(w.store, w.root, cells.Config{CacheSize: cells.DefaultCacheSize})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([][]byte, cells.DefaultCacheSize)
			for i := range keys {
				keys[i] = cellKey(i * 97)
				if _, _, err := h.Get(keys[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, ok, err := h.Get(keys[i%len(keys)]); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
			s := h.Stats()
			b.ReportMetric(100*float64(s.CacheHits)/float64(s.CacheHits+s.CacheMisses), "hit%")
		})
	}
}

func BenchmarkGetCold(b *testing.B) {
	for _, be := range backends {
		b.Run(be, func(b *testing.B) {
			w := getWorld(b, be)
			h, err := cells.NewHead(w.store, w.root, cells.Config{CacheSize: cells.DefaultCacheSize})
			if err != nil {
				b.Fatal(err)
			}
			r := newRand(1)
			keys := make([][]byte, 1<<16)
			for i := range keys {
				keys[i] = cellKey(r.IntN(worldCells))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, ok, err := h.Get(keys[i%len(keys)]); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
			s := h.Stats()
			b.ReportMetric(100*float64(s.CacheMisses)/float64(s.CacheHits+s.CacheMisses), "miss%")
		})
	}
}

// BenchmarkPut stages updates of existing cells in the delta (default config).
func BenchmarkPut(b *testing.B) {
	w := getWorld(b, "mem")
	h, err := cells.NewHead(w.store, w.root, cells.Config{CacheSize: cells.DefaultCacheSize})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, 1<<16)
	states := make([][]byte, len(keys))
	for i := range keys {
		keys[i], states[i] = cellKey(i*13), cellState(i*13, 1)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := h.Put(keys[i%len(keys)], states[i%len(keys)], uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutNew stages cells of new keys, so every Put adds a delta entry
// (and, since the delta is kept in key-hash order, an ordered insert); the
// delta is materialized, untimed, every 65,536 puts as the kernel would.
func BenchmarkPutNew(b *testing.B) {
	w := getWorld(b, "mem")
	h, err := cells.NewHead(w.store, w.root, cells.Config{CacheSize: cells.DefaultCacheSize})
	if err != nil {
		b.Fatal(err)
	}
	st := cellState(0, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := h.Put(cellKey(worldCells+i), st, uint64(i)); err != nil {
			b.Fatal(err)
		}
		if h.Stats().Dirty >= 1<<16 {
			b.StopTimer()
			if _, err := h.Materialize(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}

// BenchmarkMaterialize flushes n dirty cells (updates of random existing cells)
// into the million-cell index. Only Materialize is timed.
func BenchmarkMaterialize(b *testing.B) {
	for _, be := range backends {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/dirty=%d", be, n), func(b *testing.B) {
				w := getWorld(b, be)
				r := newRand(uint64(n))
				root := w.root
				for i := 0; b.Loop(); i++ {
					b.StopTimer()
					h, err := cells.NewHead(w.store, root, cells.Config{CacheSize: cells.DefaultCacheSize})
					if err != nil {
						b.Fatal(err)
					}
					for j := range n {
						k := r.IntN(worldCells)
						if err := h.Put(cellKey(k), cellState(k, 1+i*n+j), uint64(worldCells+j)); err != nil {
							b.Fatal(err)
						}
					}
					runtime.GC()
					b.StartTimer()
					if root, err = h.Materialize(); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if h.Len() != worldCells {
						b.Fatalf("Len %d", h.Len())
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/dirty-cell")
			})
		}
	}
}

// benchSlices refills a head over the million-cell index with 65,536 dirty
// cells (the kernel's default threshold) whenever fewer than chunk are left,
// and calls slice once per op with the timer stopped; slice times what it
// measures.
func benchSlices(b *testing.B, be string, chunk int, seed uint64, slice func(h *cells.Head)) {
	const dirty = 1 << 16
	w := getWorld(b, be)
	r := newRand(seed)
	var h *cells.Head
	fill := func(i int) {
		var err error
		if h, err = cells.NewHead(w.store, w.root, cells.Config{CacheSize: cells.DefaultCacheSize}); err != nil {
			b.Fatal(err)
		}
		for j := range dirty {
			k := r.IntN(worldCells)
			if err := h.Put(cellKey(k), cellState(k, 1+i*dirty+j), uint64(worldCells+j)); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
	}
	b.StopTimer()
	fill(0)
	for i := 0; i < b.N; i++ {
		if h.Stats().Dirty < chunk {
			fill(i + 1)
		}
		slice(h)
	}
}

// BenchmarkMaterializeSome is the pause of one bounded slice written on the
// caller's goroutine. Each op is one MaterializeSome call.
func BenchmarkMaterializeSome(b *testing.B) {
	for _, be := range backends {
		for _, chunk := range []int{1024, 4096} {
			b.Run(fmt.Sprintf("%s/chunk=%d", be, chunk), func(b *testing.B) {
				benchSlices(b, be, chunk, uint64(chunk), func(h *cells.Head) {
					b.StartTimer()
					if _, err := h.MaterializeSome(chunk); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
				})
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(chunk), "µs/dirty-cell")
			})
		}
	}
}

// BenchmarkDrainPause is what the kernel's loop pays per slice written in
// the background: choosing and snapshotting the entries (PrepareDrain) and
// adopting the new index (Install). Writing the slice (Run) is not timed.
//
//	go test ./cells -run '^$' -bench 'DrainPause|MaterializeSome' -benchtime 20x
func BenchmarkDrainPause(b *testing.B) {
	const chunk = 4096
	for _, be := range backends {
		b.Run(fmt.Sprintf("%s/chunk=%d", be, chunk), func(b *testing.B) {
			benchSlices(b, be, chunk, 7, func(h *cells.Head) {
				b.StartTimer()
				dr := h.PrepareDrain(chunk)
				b.StopTimer()
				dr.Run()
				b.StartTimer()
				if _, err := h.Install(dr); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
			})
		})
	}
}

// BenchmarkWorldBytesPerCell reports the CAS bytes of the million-cell index
// (nodes only, then nodes plus states) per cell, and the build time.
func BenchmarkWorldBytesPerCell(b *testing.B) {
	w := getWorld(b, "mem")
	for b.Loop() {
	}
	nodes, _ := reachable(b, w.store, w.root)
	var nodeBytes int
	for _, n := range nodes {
		nodeBytes += n
	}
	stateBytes := worldCells * len(cellState(0, 0))
	b.ReportMetric(float64(nodeBytes)/worldCells, "index-B/cell")
	b.ReportMetric(float64(nodeBytes+stateBytes)/worldCells, "cas-B/cell")
	b.ReportMetric(float64(len(nodes)), "nodes")
	b.ReportMetric(w.build.Seconds(), "build-s")
}
