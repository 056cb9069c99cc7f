package badgerdb_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cas/castest"
	"github.com/aos-kernel/aos/schemas"
)

// openMem opens an in-memory database closed when the test ends.
func openMem(t testing.TB) *badgerdb.DB {
	t.Helper()
	db, err := badgerdb.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openDisk opens dir; the caller closes it.
func openDisk(t testing.TB, dir string) *badgerdb.DB {
	t.Helper()
	db, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestCASStore holds the Badger CAS to the contract every cas.Store keeps.
func TestCASStore(t *testing.T) {
	castest.Run(t, func(t *testing.T) cas.Store { return openMem(t).CAS() })
}

func TestBadgerSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	s := db.CAS()
	var hs []schemas.Hash
	for i := range 100 {
		h, err := s.Put(fmt.Appendf(nil, "object %d", i))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	big := bytes.Repeat([]byte("x"), 2<<20) // over the value threshold: lives in the value log
	hb, err := s.Put(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDisk(t, dir)
	defer db.Close()
	s = db.CAS()
	for i, h := range hs {
		got, err := s.Get(h)
		if want := fmt.Sprintf("object %d", i); err != nil || string(got) != want {
			t.Fatalf("after reopen Get(%s) = %q, %v; want %q", h, got, err, want)
		}
	}
	got, err := s.Get(hb)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("after reopen big object: len %d, err %v", len(got), err)
	}
	err = s.Iterate(func(h schemas.Hash, size int) error {
		if h == hb && size != len(big) {
			t.Errorf("Iterate size of big object = %d, want %d", size, len(big))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBadgerDetectsCorruption(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	s := db.CAS()
	h, err := s.Put([]byte("honest bytes"))
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte("c/"), h[:]...)
	err = db.Badger().Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("forged bytes")) })
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(h)
	if !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Get of overwritten object: %v; want ErrCorrupt naming %s", err, h)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	// Badger's lock is flock on the directory, which conflicts between two
	// opens even inside one process.
	db2, err := badgerdb.Open(dir)
	if err == nil {
		db2.Close()
		t.Fatal("second open of a locked world succeeded")
	}
	if !errors.Is(err, badgerdb.ErrLocked) || !strings.Contains(err.Error(), "another process has the world open") {
		t.Fatalf("second open: %v; want ErrLocked saying another process has the world open", err)
	}
}

// A world written while Badger compressed its tables (its default, and ours
// before badgerdb.Open turned compression off) still reads back: each table
// carries its own compression in Badger's manifest.
func TestOpenReadsCompressedTables(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithCompression(options.Snappy).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	objs := make([][]byte, 5000)
	for i := range objs {
		objs[i] = bytes.Repeat([]byte(fmt.Sprintf("object %d, compressible; ", i)), 8)
	}
	hs, err := badgerdb.NewCAS(db).PutBatch(objs)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // flushes the memtable into a Snappy table
		t.Fatal(err)
	}
	bdb, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if n := len(bdb.Badger().Tables()); n == 0 {
		t.Fatal("no tables on disk: the objects were not flushed, so nothing compressed was read")
	}
	s := bdb.CAS()
	for i, h := range hs {
		b, err := s.Get(h)
		if err != nil || !bytes.Equal(b, objs[i]) {
			t.Fatalf("object %d: %v", i, err)
		}
	}
}

// TestPutHealsCorruption: putting an object whose stored copy is corrupt
// replaces the copy (Put and PutBatch alike), so the next Get succeeds.
func TestPutHealsCorruption(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	s := db.CAS()
	for _, put := range []struct {
		name string
		fn   func([]byte) error
	}{
		{"Put", func(b []byte) error { _, err := s.Put(b); return err }},
		{"PutBatch", func(b []byte) error { _, err := s.PutBatch([][]byte{b}); return err }},
	} {
		data := []byte("honest bytes for " + put.name)
		if err := put.fn(data); err != nil {
			t.Fatal(err)
		}
		h := schemas.HashBytes(data)
		key := append([]byte("c/"), h[:]...)
		if err := db.Badger().Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("rotten")) }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(h); !errors.Is(err, cas.ErrCorrupt) {
			t.Fatalf("%s: corruption not detected: %v", put.name, err)
		}
		if err := put.fn(data); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(h); err != nil || string(got) != string(data) {
			t.Fatalf("%s did not heal the object: %q, %v", put.name, got, err)
		}
	}
}

// TestPutMissingLeavesStoredCopies: PutMissing neither reads nor rewrites
// an object that is stored, so a corrupt copy stays corrupt (Get still
// reports it) until a Put heals it, as cas.PutMissing documents.
func TestPutMissingLeavesStoredCopies(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	s := db.CAS()
	data := []byte("honest bytes, then rotten")
	h, err := s.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte("c/"), h[:]...)
	if err := db.Badger().Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("rotten")) }); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PutMissing([]schemas.Hash{h}, [][]byte{data}); err != nil || n != 0 {
		t.Fatalf("PutMissing of a stored object: wrote %d, %v", n, err)
	}
	if _, err := s.Get(h); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("after PutMissing: %v, want the copy still corrupt", err)
	}
}
