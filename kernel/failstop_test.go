package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// storefault declares the journal port it wraps instead of importing the
// kernel; these hold its declarations to the kernel's, both ways, so the
// two method sets stay the same.
var (
	_ kernel.Log         = storefault.Log(nil)
	_ storefault.Log     = kernel.Log(nil)
	_ kernel.Dropper     = storefault.Dropper(nil)
	_ storefault.Dropper = kernel.Dropper(nil)
	_ kernel.Log         = (*storefault.Journal)(nil)
)

// storageRun drives a counter world over faulty stores until the injected
// failure fires (or the work ends), and returns what was acknowledged.
type storageRun struct {
	acked map[uint64]string // seq -> key of each acknowledged event
	errs  []error
}

// faults names the operations a run counts and which of them fails (the
// failAt-th; 0: none, the run only counts).
type faults struct {
	ops    func(storefault.Op) bool
	failAt int64
}

// The storage operations the world's inputs cause: CAS reads, and CAS writes
// with journal appends.
var (
	storageReads  = storefault.Ops(storefault.CASGet, storefault.CASHas)
	storageWrites = storefault.Ops(storefault.CASPut, storefault.CASPutBatch, storefault.JournalAppend)
)

func runWithFaults(t *testing.T, dir string, f faults) (storageRun, *storefault.Injector) {
	t.Helper()
	db, err := worldstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := kernel.Config{Builtins: testBuiltins(), MaterializeAt: 16, MaterializeChunk: 8,
		Cells: cells.Config{CacheSize: 4, SpillThreshold: 8, ResidentBudget: 64}}
	inj := &storefault.Injector{} // off while the world opens and the manifest goes in
	w, err := kernel.Open(kernel.Stores{
		CAS:     &storefault.CAS{Store: db.CAS(), Faults: inj},
		Journal: &storefault.Journal{Log: db.Journal(), Faults: inj},
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := &harness{t: t, w: w}
	mustApply(t, h, counterManifest)
	inj.Arm(f.ops, f.failAt)

	run := storageRun{acked: map[uint64]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				key := fmt.Sprintf("k%d", (g*60+i)%23)
				seqs, err := w.Submit(context.Background(), countEvent(key, 1))
				mu.Lock()
				if err == nil && len(seqs) != 1 {
					err = fmt.Errorf("submit answered %d seqs and no error", len(seqs))
				}
				if err != nil {
					run.errs = append(run.errs, err)
					mu.Unlock()
					return
				}
				run.acked[seqs[0]] = key
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if inj.Fired() {
		if _, err := w.Submit(context.Background(), countEvent("after", 1)); !errors.Is(err, kernel.ErrBroken) {
			t.Fatalf("submit after the failure: %v, want ErrBroken", err)
		}
		if _, err := w.Status(context.Background()); !errors.Is(err, kernel.ErrBroken) {
			t.Fatalf("status after the failure: %v, want ErrBroken", err)
		}
	}
	return run, inj
}

// TestStorageFailuresFailStop injects one failed storage operation (a CAS
// read; a CAS write or journal append; a journal append alone) at many
// points of a busy world on Badger.
// Each time the world stops: callers get ErrBroken (wrapping ErrStorage and
// the cause), no fault is journaled for anyone's event, every acknowledged
// event is in the journal on reopen, the cells agree with the journal, and
// the reopened world goes on.
func TestStorageFailuresFailStop(t *testing.T) {
	for _, kind := range []struct {
		name string
		ops  func(storefault.Op) bool
	}{
		{"writes", storageWrites},
		{"reads", storageReads},
		{"appends", storefault.Ops(storefault.JournalAppend)},
	} {
		// A clean run counts the operations, so the failures land all over it.
		_, probe := runWithFaults(t, t.TempDir(), faults{ops: kind.ops})
		total := probe.Count()
		if total < 20 {
			t.Fatalf("%s: only %d operations in a run; the test would not probe much", kind.name, total)
		}
		points := []int64{1, 2, 3}
		for i := int64(1); i <= 12; i++ {
			points = append(points, total*i/13)
		}
		for _, at := range points {
			t.Run(fmt.Sprintf("%s/%d", kind.name, at), func(t *testing.T) {
				dir := t.TempDir()
				run, inj := runWithFaults(t, dir, faults{ops: kind.ops, failAt: at})
				if !inj.Fired() {
					// This interleaving needed fewer operations: then
					// everything must have gone through.
					if len(run.errs) > 0 || len(run.acked) != 180 {
						t.Fatalf("no failure injected, yet %d errors (%v) and %d acknowledged", len(run.errs), run.errs, len(run.acked))
					}
				} else if len(run.errs) == 0 {
					t.Fatal("the failure reached no caller")
				}
				for _, err := range run.errs {
					if !errors.Is(err, kernel.ErrBroken) || !errors.Is(err, kernel.ErrStorage) {
						t.Fatalf("caller got %v, want ErrBroken wrapping ErrStorage", err)
					}
				}
				checkReopened(t, dir, run)
			})
		}
	}
}

// checkReopened opens the world over the healthy store and checks it
// against what the faulty run acknowledged.
func checkReopened(t *testing.T, dir string, run storageRun) {
	t.Helper()
	w, err := openDir(dir, kernel.Config{Builtins: testBuiltins()})
	if err != nil {
		t.Fatalf("reopen after the failure: %v", err)
	}
	defer w.Close()
	journaled := map[uint64]string{}
	perKey := map[string]int{}
	for _, r := range allRecords(t, w.World) {
		switch r.Kind {
		case journal.KindFault:
			t.Fatalf("a fault was journaled: seq %d", r.Seq)
		case journal.KindEvent:
			var ev records.EventRec
			if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Schema == "com.test/CountEvent@1" {
				k := decodeCount(ev.Value).Key
				journaled[r.Seq] = k
				perKey[k]++
			}
		}
	}
	for seq, key := range run.acked {
		if journaled[seq] != key {
			t.Fatalf("acknowledged event %d (key %s) lost: journal has %q", seq, key, journaled[seq])
		}
	}
	ctx := context.Background()
	for key, n := range perKey {
		v, err := w.Cell(ctx, "com.test/counter@1", schemas.MustMarshal(key))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Count int `json:"count"`
		}
		if err := schemas.UnmarshalTrusted(v.State, &c); err != nil || c.Count != n {
			t.Fatalf("cell %s = %s (%v), journal holds %d events for it", key, stateJSON(v), err, n)
		}
	}
	if _, err := w.Submit(ctx, countEvent("after-reopen", 2)); err != nil {
		t.Fatalf("the reopened world does not go on: %v", err)
	}
}

// TestSnapshotStorageFailureStops: a snapshot whose writes fail stops the
// world like any storage failure, and its caller is answered as every
// caller is then: ErrBroken wrapping ErrStorage (the daemon's 503), not a
// bare storage error.
func TestSnapshotStorageFailureStops(t *testing.T) {
	db, err := worldstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inj := &storefault.Injector{}
	w, err := kernel.Open(kernel.Stores{
		CAS:     &storefault.CAS{Store: db.CAS(), Faults: inj},
		Journal: &storefault.Journal{Log: db.Journal(), Faults: inj},
	}, kernel.Config{Builtins: testBuiltins()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := &harness{t: t, w: w}
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := w.Submit(ctx, countEvent(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	inj.Arm(storefault.Ops(storefault.CASPut, storefault.CASPutBatch), 1)
	_, err = w.Snapshot(ctx)
	if !inj.Fired() {
		t.Fatal("the snapshot wrote nothing to the CAS")
	}
	if !errors.Is(err, kernel.ErrBroken) || !errors.Is(err, kernel.ErrStorage) {
		t.Fatalf("snapshot whose write failed: %v, want ErrBroken wrapping ErrStorage", err)
	}
	if _, err := w.Submit(ctx, countEvent("after", 1)); !errors.Is(err, kernel.ErrBroken) {
		t.Fatalf("submit after the failed snapshot: %v, want ErrBroken", err)
	}
}
