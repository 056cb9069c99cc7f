package storefault_test

import (
	"errors"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/internal/storefault"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
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
