package storefault_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// The n-th accepted operation fails once, without reaching the store;
// operations the predicate refuses are neither counted nor failed.
func TestInjectorFailsNthOnce(t *testing.T) {
	inj := storefault.FailNth(storefault.Ops(storefault.CASPut, storefault.JournalAppend), 3)
	store := cas.NewMemory()
	c := &storefault.CAS{Store: store, Faults: inj}
	j := &storefault.Journal{Log: journal.NewMemory(), Faults: inj}

	if _, err := c.Put([]byte("a")); err != nil { // 1
		t.Fatal(err)
	}
	if _, err := c.Get(schemas.HashBytes([]byte("x"))); !errors.Is(err, cas.ErrNotFound) { // not counted
		t.Fatalf("Get of a missing object: %v", err)
	}
	if err := j.Append([]journal.Record{{Seq: 1, Kind: journal.KindEvent}}); err != nil { // 2
		t.Fatal(err)
	}
	h, err := c.Put([]byte("b")) // 3: fails
	if !errors.Is(err, storefault.ErrInjected) || !inj.Fired() {
		t.Fatalf("third put: %v (fired %v), want ErrInjected", err, inj.Fired())
	}
	if ok, _ := store.Has(h); ok {
		t.Fatal("the failed put reached the store")
	}
	if err := j.Append([]journal.Record{{Seq: 2, Kind: journal.KindEvent}}); err != nil { // 4: fired already
		t.Fatal(err)
	}
	if n := inj.Count(); n != 4 {
		t.Fatalf("counted %d operations, want 4", n)
	}
}

// BeforeAppend runs ahead of every Append, before a failure is injected.
func TestBeforeAppendRunsFirst(t *testing.T) {
	var seen []uint64
	inj := storefault.FailNth(storefault.Ops(storefault.JournalAppend), 2)
	j := &storefault.Journal{Log: journal.NewMemory(), Faults: inj, BeforeAppend: func(recs []journal.Record) {
		seen = append(seen, recs[0].Seq)
	}}
	if err := j.Append([]journal.Record{{Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]journal.Record{{Seq: 2}}); !errors.Is(err, storefault.ErrInjected) {
		t.Fatalf("second append: %v, want ErrInjected", err)
	}
	if len(seen) != 2 || seen[1] != 2 || j.Height() != 1 {
		t.Fatalf("hook saw %v, height %d; want [1 2], 1", seen, j.Height())
	}
}

// AfterAppend runs after every Append with its result: nil once the wrapped
// journal holds the records, the injected failure when there was one.
func TestAfterAppendSeesResult(t *testing.T) {
	type call struct {
		seq    uint64
		height uint64
		err    error
	}
	var calls []call
	inj := storefault.FailNth(storefault.Ops(storefault.JournalAppend), 2)
	j := &storefault.Journal{Log: journal.NewMemory(), Faults: inj}
	j.AfterAppend = func(recs []journal.Record, err error) {
		calls = append(calls, call{recs[0].Seq, j.Height(), err})
	}
	if err := j.Append([]journal.Record{{Seq: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]journal.Record{{Seq: 2}}); !errors.Is(err, storefault.ErrInjected) {
		t.Fatalf("second append: %v, want ErrInjected", err)
	}
	if len(calls) != 2 {
		t.Fatalf("hook ran %d times, want 2", len(calls))
	}
	if c := calls[0]; c.seq != 1 || c.height != 1 || c.err != nil {
		t.Fatalf("first call %+v: want seq 1 already in the journal, no error", c)
	}
	if c := calls[1]; c.seq != 2 || c.height != 1 || !errors.Is(c.err, storefault.ErrInjected) {
		t.Fatalf("second call %+v: want seq 2 not in the journal, ErrInjected", c)
	}
}

// BeforeWrite runs ahead of every CAS write, naming it, before a failure is
// injected; reads do not run it.
func TestBeforeWriteRunsFirst(t *testing.T) {
	var seen []storefault.Op
	inj := storefault.FailNth(storefault.Ops(storefault.CASPutBatch), 1)
	c := &storefault.CAS{Store: cas.NewMemory(), Faults: inj, BeforeWrite: func(op storefault.Op) { seen = append(seen, op) }}
	h, err := c.Put([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBatch([][]byte{[]byte("b")}); !errors.Is(err, storefault.ErrInjected) {
		t.Fatalf("put batch: %v, want ErrInjected", err)
	}
	if _, err := c.Get(h); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Has(h); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete([]schemas.Hash{h}); err != nil {
		t.Fatal(err)
	}
	want := []storefault.Op{storefault.CASPut, storefault.CASPutBatch, storefault.CASDelete}
	if !slices.Equal(seen, want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
}

// BeforeRead runs ahead of every CAS read, naming it, before a failure is
// injected; writes do not run it.
func TestBeforeReadRunsFirst(t *testing.T) {
	var seen []storefault.Op
	inj := storefault.FailNth(storefault.Ops(storefault.CASGet), 1)
	c := &storefault.CAS{Store: cas.NewMemory(), Faults: inj, BeforeRead: func(op storefault.Op) { seen = append(seen, op) }}
	h, err := c.Put([]byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBatch([][]byte{[]byte("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(h); !errors.Is(err, storefault.ErrInjected) {
		t.Fatalf("get: %v, want ErrInjected", err)
	}
	if ok, err := c.Has(h); err != nil || !ok {
		t.Fatalf("has: %v %v", ok, err)
	}
	if err := c.Iterate(func(schemas.Hash, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete([]schemas.Hash{h}); err != nil {
		t.Fatal(err)
	}
	want := []storefault.Op{storefault.CASGet, storefault.CASHas, storefault.CASIterate}
	if !slices.Equal(seen, want) {
		t.Fatalf("hook saw %v, want %v", seen, want)
	}
}
