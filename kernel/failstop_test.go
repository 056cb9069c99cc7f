package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// faultPlan fails the failAt-th counted storage operation once (0: never)
// and counts the operations it saw.
type faultPlan struct {
	reads, writes bool // which operations count
	failAt        int64
	n             atomic.Int64
	fired         atomic.Bool
}

func (p *faultPlan) tick(write bool, op string) error {
	if (write && !p.writes) || (!write && !p.reads) {
		return nil
	}
	if n := p.n.Add(1); n == p.failAt {
		p.fired.Store(true)
		return fmt.Errorf("injected failure of %s (operation %d)", op, n)
	}
	return nil
}

// faultyCAS and faultyLog are the storage ports with failures injected.
type faultyCAS struct {
	cas.Store
	p *faultPlan
}

func (f faultyCAS) Put(b []byte) (schemas.Hash, error) {
	if err := f.p.tick(true, "cas put"); err != nil {
		return schemas.Hash{}, err
	}
	return f.Store.Put(b)
}

func (f faultyCAS) PutBatch(bs [][]byte) ([]schemas.Hash, error) {
	if err := f.p.tick(true, "cas put batch"); err != nil {
		return nil, err
	}
	return f.Store.PutBatch(bs)
}

func (f faultyCAS) Get(h schemas.Hash) ([]byte, error) {
	if err := f.p.tick(false, "cas get"); err != nil {
		return nil, err
	}
	return f.Store.Get(h)
}

func (f faultyCAS) Has(h schemas.Hash) (bool, error) {
	if err := f.p.tick(false, "cas has"); err != nil {
		return false, err
	}
	return f.Store.Has(h)
}

type faultyLog struct {
	kernel.Log
	p *faultPlan
}

func (f faultyLog) Append(recs []journal.Record) error {
	if err := f.p.tick(true, "journal append"); err != nil {
		return err
	}
	return f.Log.Append(recs)
}

// storageRun drives a counter world over faulty stores until the plan
// fires (or the work ends), and returns what was acknowledged.
type storageRun struct {
	acked map[uint64]string // seq -> key of each acknowledged event
	errs  []error
}

func runWithFaults(t *testing.T, dir string, p *faultPlan) storageRun {
	t.Helper()
	db, err := cas.OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	jn, err := journal.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kernel.Config{Builtins: testBuiltins(), MaterializeAt: 16, MaterializeChunk: 8,
		Cells: cells.Config{CacheSize: 4, SpillThreshold: 8, ResidentBudget: 64}}
	plan := &faultPlan{} // off while the world opens and the manifest goes in
	w, err := kernel.OpenStores(kernel.Stores{CAS: faultyCAS{cas.NewBadger(db), plan}, Journal: faultyLog{jn, plan}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := &harness{t: t, w: w}
	mustApply(t, h, counterManifest)
	plan.reads, plan.writes, plan.failAt = p.reads, p.writes, p.failAt

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
	if plan.fired.Load() {
		if _, err := w.Submit(context.Background(), countEvent("after", 1)); !errors.Is(err, kernel.ErrBroken) {
			t.Fatalf("submit after the failure: %v, want ErrBroken", err)
		}
		if _, err := w.Status(context.Background()); !errors.Is(err, kernel.ErrBroken) {
			t.Fatalf("status after the failure: %v, want ErrBroken", err)
		}
	}
	p.n.Store(plan.n.Load())
	p.fired.Store(plan.fired.Load())
	return run
}

// TestStorageFailuresFailStop injects one failed storage operation (a CAS
// read, or a CAS write or journal append) at many points of a busy world.
// Each time the world stops: callers get ErrBroken (wrapping ErrStorage and
// the cause), no fault is journaled for anyone's event, every acknowledged
// event is in the journal on reopen, the cells agree with the journal, and
// the reopened world goes on.
func TestStorageFailuresFailStop(t *testing.T) {
	for _, kind := range []struct {
		name          string
		reads, writes bool
	}{{"writes", false, true}, {"reads", true, false}} {
		// A clean run counts the operations, so the failures land all over it.
		probe := &faultPlan{reads: kind.reads, writes: kind.writes}
		runWithFaults(t, t.TempDir(), probe)
		total := probe.n.Load()
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
				p := &faultPlan{reads: kind.reads, writes: kind.writes, failAt: at}
				run := runWithFaults(t, dir, p)
				if !p.fired.Load() {
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
	w, err := kernel.Open(dir, kernel.Config{Builtins: testBuiltins()})
	if err != nil {
		t.Fatalf("reopen after the failure: %v", err)
	}
	defer w.Close()
	journaled := map[uint64]string{}
	perKey := map[string]int{}
	for _, r := range allRecords(t, w) {
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
