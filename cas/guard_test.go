package cas_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// present reports which of objs the store holds.
func present(t *testing.T, s cas.Store, objs map[string][]byte) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for name, o := range objs {
		ok, err := s.Has(schemas.HashBytes(o))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = ok
	}
	return got
}

func markedSet(objs ...[]byte) func(schemas.Hash) bool {
	m := map[schemas.Hash]bool{}
	for _, o := range objs {
		m[schemas.HashBytes(o)] = true
	}
	return func(h schemas.Hash) bool { return m[h] }
}

// TestGuardSweepKeepsWrittenObjects: Sweep deletes exactly the objects that
// are neither marked nor written since Begin, whether the write stored a new
// object or re-put an existing one (by Put or PutBatch), and its stats are
// exact.
func TestGuardSweepKeepsWrittenObjects(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(mem)
	objs := map[string][]byte{
		"marked":          []byte("marked, kept"),
		"garbage":         []byte("garbage, freed"),
		"garbage2":        []byte("more garbage, freed too"),
		"re-put":          []byte("garbage put again after Begin"),
		"re-put in batch": []byte("garbage put again in a batch after Begin"),
		"new":             []byte("new after Begin"),
		"new in batch":    []byte("new in a batch after Begin"),
	}
	for _, name := range []string{"marked", "garbage", "garbage2", "re-put", "re-put in batch"} {
		if _, err := g.Put(objs[name]); err != nil {
			t.Fatal(err)
		}
	}
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"re-put", "new"} {
		if _, err := g.Put(objs[name]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.PutBatch([][]byte{objs["re-put in batch"], objs["new in batch"]}); err != nil {
		t.Fatal(err)
	}
	var calls [][2]int
	stats, err := c.Sweep(markedSet(objs["marked"]), func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"marked": true, "garbage": false, "garbage2": false, "re-put": true, "re-put in batch": true, "new": true, "new in batch": true}
	got := present(t, mem, objs)
	for name := range objs {
		if got[name] != want[name] {
			t.Errorf("%s: present = %v, want %v", name, got[name], want[name])
		}
	}
	size := func(names ...string) (n int64) {
		for _, name := range names {
			n += int64(len(objs[name]))
		}
		return n
	}
	wantStats := cas.GCStats{
		KeptObjects:  5,
		KeptBytes:    size("marked", "re-put", "re-put in batch", "new", "new in batch"),
		KeptWritten:  4,
		FreedObjects: 2,
		FreedBytes:   size("garbage", "garbage2"),
	}
	if stats != wantStats {
		t.Errorf("stats = %+v, want %+v", stats, wantStats)
	}
	// Six unmarked objects, one chunk.
	if fmt.Sprint(calls) != "[[6 6]]" {
		t.Errorf("progress calls = %v, want [[6 6]]", calls)
	}
}

// TestGuardPutMissingRecordsStoredObjects: during a collection, PutMissing
// records every object it was given, the ones it found stored (and did not
// write) included, so the sweep spares them: the writer relies on them as
// on a deduplicated Put.
func TestGuardPutMissingRecordsStoredObjects(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(mem)
	objs := map[string][]byte{
		"garbage":        []byte("garbage, freed"),
		"found stored":   []byte("garbage found stored by PutMissing after Begin"),
		"written":        []byte("written by PutMissing after Begin"),
		"stored earlier": []byte("found stored by PutMissing before Begin"),
	}
	for _, name := range []string{"garbage", "found stored", "stored earlier"} {
		if _, err := g.Put(objs[name]); err != nil {
			t.Fatal(err)
		}
	}
	put := func(names ...string) int {
		var hs []schemas.Hash
		var os [][]byte
		for _, name := range names {
			hs, os = append(hs, schemas.HashBytes(objs[name])), append(os, objs[name])
		}
		n, err := g.PutMissing(hs, os)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := put("stored earlier"); n != 0 {
		t.Fatalf("PutMissing wrote %d stored objects", n)
	}
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if n := put("found stored", "written"); n != 1 {
		t.Fatalf("PutMissing wrote %d objects, want 1", n)
	}
	if _, err := c.Sweep(markedSet(), nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"garbage": false, "found stored": true, "written": true, "stored earlier": false}
	got := present(t, mem, objs)
	for name := range objs {
		if got[name] != want[name] {
			t.Errorf("%s: present = %v, want %v", name, got[name], want[name])
		}
	}
}

// TestGuardRecordsOnlyDuringCollection: writes before Begin and after the
// collection ended (by Sweep or Abort) save nothing in a later collection,
// and Abort deletes nothing.
func TestGuardRecordsOnlyDuringCollection(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(mem)
	objs := map[string][]byte{
		"before":       []byte("written before any collection"),
		"during abort": []byte("written during an aborted collection"),
		"after abort":  []byte("written after the abort"),
	}
	if _, err := g.Put(objs["before"]); err != nil {
		t.Fatal(err)
	}
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Put(objs["during abort"]); err != nil {
		t.Fatal(err)
	}
	c.Abort()
	for name, ok := range present(t, mem, objs) {
		if name != "after abort" && !ok {
			t.Errorf("Abort deleted %s", name)
		}
	}
	if _, err := c.Sweep(markedSet(), nil); !errors.Is(err, cas.ErrCollectionClosed) {
		t.Errorf("Sweep after Abort: %v, want ErrCollectionClosed", err)
	}
	if _, err := g.Put(objs["after abort"]); err != nil {
		t.Fatal(err)
	}
	c, err = g.Begin()
	if err != nil {
		t.Fatalf("Begin after Abort: %v", err)
	}
	stats, err := c.Sweep(markedSet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.FreedObjects != 3 || stats.KeptObjects != 0 {
		t.Errorf("stats = %+v, want all 3 freed", stats)
	}
	for name, ok := range present(t, mem, objs) {
		if ok {
			t.Errorf("%s was written outside the collection and survived it", name)
		}
	}
}

// TestGuardOneCollectionAtATime: a second Begin is refused while one runs,
// and allowed once it has ended.
func TestGuardOneCollectionAtATime(t *testing.T) {
	g := cas.NewGuard(cas.NewMemory())
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Begin(); !errors.Is(err, cas.ErrCollecting) {
		t.Fatalf("second Begin: %v, want ErrCollecting", err)
	}
	if _, err := c.Sweep(markedSet(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sweep(markedSet(), nil); !errors.Is(err, cas.ErrCollectionClosed) {
		t.Fatalf("second Sweep: %v, want ErrCollectionClosed", err)
	}
	c2, err := g.Begin()
	if err != nil {
		t.Fatalf("Begin after Sweep: %v", err)
	}
	c.Abort() // an ended collection's Abort must not end the running one
	if _, err := g.Begin(); !errors.Is(err, cas.ErrCollecting) {
		t.Fatalf("Begin after a stale Abort: %v, want ErrCollecting", err)
	}
	c2.Abort()
}

// failingDelete is a Memory whose Delete fails, to see Sweep report it.
type failingDelete struct{ *cas.Memory }

func (failingDelete) Delete([]schemas.Hash) error { return errors.New("disk on fire") }

// TestGuardSweepDeleteError: a failed Delete is returned naming what was
// being deleted, the collection ends, and nothing is counted as freed.
func TestGuardSweepDeleteError(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(failingDelete{mem})
	h, _ := g.Put([]byte("garbage"))
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	stats, err := c.Sweep(markedSet(), nil)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Sweep: %v, want the Delete error naming %s", err, h)
	}
	if stats.FreedObjects != 0 {
		t.Errorf("stats = %+v, want nothing freed", stats)
	}
	if _, err := g.Begin(); err != nil {
		t.Fatalf("Begin after a failed Sweep: %v", err)
	}
}

// TestGuardSweepChunks: a sweep of more than one chunk reports progress per
// chunk and frees everything unmarked.
func TestGuardSweepChunks(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(mem)
	const n = 4096 + 100
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = fmt.Appendf(nil, "object %d", i)
	}
	if _, err := g.PutBatch(objs); err != nil {
		t.Fatal(err)
	}
	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var calls [][2]int
	stats, err := c.Sweep(markedSet(objs[0]), func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	if stats.FreedObjects != n-1 || stats.KeptObjects != 1 {
		t.Errorf("stats = %+v, want %d freed, 1 kept", stats, n-1)
	}
	if fmt.Sprint(calls) != fmt.Sprintf("[[4096 %d] [%d %d]]", n-1, n-1, n-1) {
		t.Errorf("progress calls = %v", calls)
	}
}

// BenchmarkGuardRecord reports the memory a collection's recorded set costs
// per distinct object written during it.
func BenchmarkGuardRecord(b *testing.B) {
	const n = 100_000
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = fmt.Appendf(nil, "object %d", i)
	}
	for b.Loop() {
		b.StopTimer()
		g := cas.NewGuard(cas.NewMemory())
		// Written before Begin: the store's own memory is not the set's.
		if _, err := g.PutBatch(objs); err != nil {
			b.Fatal(err)
		}
		c, err := g.Begin()
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for _, o := range objs {
			if _, err := g.Put(o); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "B/recorded")
		c.Abort()
		b.StartTimer()
	}
}
