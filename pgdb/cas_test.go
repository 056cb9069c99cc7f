package pgdb_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cas/castest"
	"github.com/aos-kernel/aos/pgdb"
	"github.com/aos-kernel/aos/schemas"
)

// TestCASStore holds the Postgres CAS to the contract every cas.Store
// keeps.
func TestCASStore(t *testing.T) {
	castest.Run(t, func(t *testing.T) cas.Store {
		db, l, _ := owned(t)
		return db.CAS(&l)
	})
}

// TestCASSurvivesReopen: objects, big ones included (stored out of line),
// are there with their sizes after the DB is opened again.
func TestCASSurvivesReopen(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	s := db.CAS(nil)
	var hs []schemas.Hash
	for i := range 100 {
		h, err := s.Put(fmt.Appendf(nil, "object %d", i))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	big := bytes.Repeat([]byte("x"), 2<<20)
	hb, err := s.Put(big)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s = w.open(t).CAS(nil)
	for i, h := range hs {
		got, err := s.Get(h)
		if want := fmt.Sprintf("object %d", i); err != nil || string(got) != want {
			t.Fatalf("after reopen Get(%s) = %q, %v; want %q", h, got, err, want)
		}
	}
	if got, err := s.Get(hb); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("after reopen, the big object: %d bytes, %v", len(got), err)
	}
	n := 0
	err = s.Iterate(func(h schemas.Hash, size int) error {
		n++
		if h == hb && size != len(big) {
			t.Errorf("Iterate: size of the big object = %d, want %d", size, len(big))
		}
		return nil
	})
	if err != nil || n != 101 {
		t.Fatalf("Iterate saw %d objects, %v; want 101", n, err)
	}
}

// TestCASVerifiesAndHeals: bytes changed behind the store's back are
// ErrCorrupt naming the hash (every read is verified), and a Put or a
// PutBatch of the true bytes replaces them.
func TestCASVerifiesAndHeals(t *testing.T) {
	w := newWorld(t)
	s := w.open(t).CAS(nil)
	for _, put := range []struct {
		name string
		fn   func([]byte) error
	}{
		{"Put", func(b []byte) error { _, err := s.Put(b); return err }},
		{"PutBatch", func(b []byte) error { _, err := s.PutBatch([][]byte{b}); return err }},
	} {
		t.Run(put.name, func(t *testing.T) {
			honest := []byte("honest bytes for " + put.name)
			h, err := s.Put(honest)
			if err != nil {
				t.Fatal(err)
			}
			w.sql(t, "UPDATE objects SET data = 'forged bytes' WHERE hash = $1", h[:])
			if _, err := s.Get(h); !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
				t.Fatalf("Get of an overwritten object: %v; want ErrCorrupt naming %s", err, h)
			}
			if err := put.fn(honest); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(h); err != nil || !bytes.Equal(got, honest) {
				t.Fatalf("after %s of the true bytes: Get = %q, %v", put.name, got, err)
			}
		})
	}
}

// TestCASDeleteIsFenced: only the holder of the current lease deletes
// objects. A CAS without a lease deletes nothing (ErrNotOwner); one whose
// lease another owner took deletes nothing (ErrFenced), so a collection by
// an owner fenced mid-way cannot remove what the new owner wrote.
func TestCASDeleteIsFenced(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	la := acquire(t, db, "node-a", false)
	a := db.CAS(&la)
	h, err := a.Put([]byte("the new owner relies on this"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CAS(nil).Delete([]schemas.Hash{h}); !errors.Is(err, pgdb.ErrNotOwner) {
		t.Fatalf("Delete without a lease: %v, want ErrNotOwner", err)
	}
	lb := acquire(t, w.open(t), "node-b", true)
	err = a.Delete([]schemas.Hash{h})
	if !errors.Is(err, pgdb.ErrFenced) || !strings.Contains(err.Error(), "node-b") {
		t.Fatalf("Delete by the fenced owner: %v, want ErrFenced naming node-b", err)
	}
	if ok, err := a.Has(h); !ok || err != nil {
		t.Fatalf("after the fenced Delete: Has = %v, %v; want the object kept", ok, err)
	}
	if err := db.CAS(&lb).Delete([]schemas.Hash{h}); err != nil {
		t.Fatalf("Delete by the new owner: %v", err)
	}
	if ok, _ := a.Has(h); ok {
		t.Fatal("the new owner's Delete left the object")
	}
}
