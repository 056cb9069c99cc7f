package cas_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

func openMem(t testing.TB) *badger.DB {
	t.Helper()
	db, err := cas.OpenBadgerInMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openDisk(t testing.TB, dir string) *badger.DB {
	t.Helper()
	db, err := cas.OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// stores returns each Store implementation under test, fresh.
func stores(t *testing.T) map[string]func(t *testing.T) cas.Store {
	return map[string]func(t *testing.T) cas.Store{
		"memory": func(t *testing.T) cas.Store { return cas.NewMemory() },
		"badger": func(t *testing.T) cas.Store { return cas.NewBadger(openMem(t)) },
	}
}

func TestStoreRoundTrip(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			a, b := []byte("alpha"), []byte("beta")
			ha, err := s.Put(a)
			if err != nil {
				t.Fatal(err)
			}
			if ha != schemas.HashBytes(a) {
				t.Fatalf("Put returned %s, want %s", ha, schemas.HashBytes(a))
			}
			if _, err := s.Put(a); err != nil { // idempotent
				t.Fatal(err)
			}
			got, err := s.Get(ha)
			if err != nil || !bytes.Equal(got, a) {
				t.Fatalf("Get = %q, %v; want %q", got, err, a)
			}
			hs, err := s.PutBatch([][]byte{b, a, b, {}})
			if err != nil {
				t.Fatal(err)
			}
			want := []schemas.Hash{schemas.HashBytes(b), ha, schemas.HashBytes(b), schemas.HashBytes(nil)}
			if !slices.Equal(hs, want) {
				t.Fatalf("PutBatch hashes = %v, want %v", hs, want)
			}
			for i, o := range [][]byte{b, a, {}} {
				got, err := s.Get(schemas.HashBytes(o))
				if err != nil || !bytes.Equal(got, o) {
					t.Fatalf("object %d: Get = %q, %v; want %q", i, got, err, o)
				}
			}
			missing := schemas.HashBytes([]byte("never stored"))
			if _, err := s.Get(missing); !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), missing.String()) {
				t.Fatalf("Get(missing) error = %v; want ErrNotFound naming %s", err, missing)
			}
			if ok, err := s.Has(missing); ok || err != nil {
				t.Fatalf("Has(missing) = %v, %v", ok, err)
			}
			if ok, err := s.Has(ha); !ok || err != nil {
				t.Fatalf("Has(stored) = %v, %v", ok, err)
			}
			if err := s.Delete([]schemas.Hash{ha, missing}); err != nil {
				t.Fatal(err)
			}
			if ok, _ := s.Has(ha); ok {
				t.Fatal("object still present after Delete")
			}
		})
	}
}

func TestStoreIterateOrder(t *testing.T) {
	for name, mk := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := mk(t)
			sizes := map[schemas.Hash]int{}
			var objs [][]byte
			for i := range 300 {
				o := bytes.Repeat([]byte{byte(i)}, i%17+1)
				o = fmt.Appendf(o, "#%d", i)
				objs = append(objs, o)
				sizes[schemas.HashBytes(o)] = len(o)
			}
			if _, err := s.PutBatch(objs[:150]); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs[150:] {
				if _, err := s.Put(o); err != nil {
					t.Fatal(err)
				}
			}
			var seen []schemas.Hash
			err := s.Iterate(func(h schemas.Hash, size int) error {
				if sizes[h] != size {
					t.Errorf("%s: size %d, want %d", h, size, sizes[h])
				}
				seen = append(seen, h)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(sizes) {
				t.Fatalf("Iterate saw %d objects, want %d", len(seen), len(sizes))
			}
			if !slices.IsSortedFunc(seen, func(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) }) {
				t.Fatal("Iterate not in hash order")
			}
			stop := errors.New("stop")
			n := 0
			err = s.Iterate(func(schemas.Hash, int) error { n++; return stop })
			if !errors.Is(err, stop) || n != 1 {
				t.Fatalf("Iterate after fn error: n=%d err=%v; want 1, stop", n, err)
			}
		})
	}
}

func TestBadgerSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	s := cas.NewBadger(db)
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
	s = cas.NewBadger(db)
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
	s := cas.NewBadger(db)
	h, err := s.Put([]byte("honest bytes"))
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte("c/"), h[:]...)
	err = db.Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("forged bytes")) })
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(h)
	if !errors.Is(err, cas.ErrCorrupt) || !strings.Contains(err.Error(), h.String()) {
		t.Fatalf("Get of overwritten object: %v; want ErrCorrupt naming %s", err, h)
	}
}

func TestOpenBadgerLocked(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	// Badger's lock is flock on the directory, which conflicts between two
	// opens even inside one process.
	db2, err := cas.OpenBadger(dir)
	if err == nil {
		db2.Close()
		t.Fatal("second open of a locked world succeeded")
	}
	if !errors.Is(err, cas.ErrLocked) || !strings.Contains(err.Error(), "another process has the world open") {
		t.Fatalf("second open: %v; want ErrLocked saying another process has the world open", err)
	}
}

// A world written while Badger compressed its tables (its default, and ours
// before cas.OpenBadger turned compression off) still reads back: each table
// carries its own compression in Badger's manifest.
func TestOpenBadgerReadsCompressedTables(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithCompression(options.Snappy).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	objs := make([][]byte, 5000)
	for i := range objs {
		objs[i] = bytes.Repeat([]byte(fmt.Sprintf("object %d, compressible; ", i)), 8)
	}
	hs, err := cas.NewBadger(db).PutBatch(objs)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil { // flushes the memtable into a Snappy table
		t.Fatal(err)
	}
	db, err = cas.OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := len(db.Tables()); n == 0 {
		t.Fatal("no tables on disk: the objects were not flushed, so nothing compressed was read")
	}
	s := cas.NewBadger(db)
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
	s := cas.NewBadger(db)
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
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("rotten")) }); err != nil {
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
