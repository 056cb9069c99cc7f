package badgerdb_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// stepAt is a one-record frame at seq.
func stepAt(seq uint64, body []byte) []journal.Record {
	return []journal.Record{{Seq: seq, Kind: journal.KindStep, Body: body}}
}

// TestDiskFullRefusesWrites: with too little free space every kind of write
// (append, put, put batch, delete) is refused with ErrDiskFull before it
// writes anything; the refusal names the directory and the free bytes; and
// once space is back the same store takes writes again (nothing sticks).
func TestDiskFullRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	var free atomic.Int64
	free.Store(1 << 40)
	db.SetFree(free.Load)
	db.SetTables(0)
	j, c := db.Journal(), db.CAS()
	if err := j.Append(stepAt(1, []byte("one"))); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Put([]byte("kept"))
	if err != nil {
		t.Fatal(err)
	}

	// Room for the reserve, not for an append (which may grow the tail
	// by a MiB) nor for the objects below.
	free.Store(db.Reserve() + 100)
	err = j.Append(stepAt(2, []byte("two")))
	if !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("append on a full disk: %v, want ErrDiskFull", err)
	}
	for _, want := range []string{dir, "free", "reserve"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %q", err, want)
		}
	}
	if h := j.Height(); h != 1 {
		t.Fatalf("height %d after a refused append, want 1", h)
	}
	n := 0
	if err := j.Read(1, func(journal.Record) (bool, error) { n++; return true, nil }); err != nil || n != 1 {
		t.Fatalf("read after a refused append: %d records, %v", n, err)
	}
	big := make([]byte, 200)
	if _, err := c.Put(big); !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("put on a full disk: %v, want ErrDiskFull", err)
	}
	if _, err := c.PutBatch([][]byte{[]byte("a"), big}); !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("put batch on a full disk: %v, want ErrDiskFull", err)
	}
	if err := c.Delete([]schemas.Hash{kept}); !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("delete on a full disk: %v, want ErrDiskFull", err)
	}
	for _, o := range [][]byte{big, []byte("a")} {
		if ok, err := c.Has(schemas.HashBytes(o)); err != nil || ok {
			t.Fatalf("a refused put stored its object (%v, %v)", ok, err)
		}
	}
	if ok, err := c.Has(kept); err != nil || !ok {
		t.Fatalf("a refused delete removed its object (%v, %v)", ok, err)
	}

	free.Store(1 << 40)
	if err := j.Append(stepAt(2, []byte("two"))); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	if _, err := c.Put(big); err != nil {
		t.Fatalf("put once space is back: %v", err)
	}
}

// TestDiskFullCountsTables: the guard keeps the LSM's tables free beyond
// the reserve (compactions write their outputs before deleting their
// inputs), and says how much it kept for them.
func TestDiskFullCountsTables(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	const tables = 10 << 20
	free := db.Reserve() + tables + 4<<20 // the tables and room for an append
	db.SetFree(func() int64 { return free })
	db.SetTables(tables)
	j := db.Journal()
	if err := j.Append(stepAt(1, []byte("one"))); err != nil {
		t.Fatalf("append with the reserve and the tables free: %v", err)
	}
	db.SetTables(tables + 4<<20)
	err := j.Append(stepAt(2, []byte("two")))
	if !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("append with less than the reserve and the tables free: %v, want ErrDiskFull", err)
	}
	if !strings.Contains(err.Error(), "14.0 MiB (14680064 bytes) for compacting its tables") {
		t.Fatalf("refusal %q does not say what it kept for the tables", err)
	}
}

// TestOpenRefusedWhenDiskFull: Open refuses a store whose filesystem keeps
// less than the reserve, before Badger writes anything (a new store's
// directory is not even made); Options.DiskReserve sets the reserve; a
// negative one is an error.
func TestOpenRefusedWhenDiskFull(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	_, err := badgerdb.OpenWithFree(dir, badgerdb.Options{}, func() int64 { return badgerdb.DefaultDiskReserve - 1 })
	if !errors.Is(err, badgerdb.ErrDiskFull) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("open with less than the reserve free: %v, want ErrDiskFull naming %s", err, dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused open made the store's directory (%v)", err)
	}
	if _, err := badgerdb.OpenWithFree(dir, badgerdb.Options{DiskReserve: 1 << 20}, func() int64 { return 1<<20 - 1 }); !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("open with less than a set reserve free: %v, want ErrDiskFull", err)
	}
	db, err := badgerdb.OpenWithFree(dir, badgerdb.Options{DiskReserve: 1 << 20}, func() int64 { return 64 << 20 })
	if err != nil {
		t.Fatalf("open with a set reserve and more free: %v", err)
	}
	if db.Reserve() != 1<<20 {
		t.Fatalf("reserve %d, want the one set", db.Reserve())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := badgerdb.OpenWith(dir, badgerdb.Options{DiskReserve: -1}); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("open with a negative reserve: %v", err)
	}
}

// TestNoSpaceIsDiskFull: a write the operating system refused for want of
// space (ENOSPC, as the tail's write(2) or Badger's own file writes meet
// it) is reported as ErrDiskFull, still wrapping ENOSPC, naming the
// directory and the free bytes; any other error is left as it is.
func TestNoSpaceIsDiskFull(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	db.SetFree(func() int64 { return 12345 })
	err := db.NoSpace(fmt.Errorf("write tail: %w", &os.PathError{Op: "write", Path: "aos-journal.tail", Err: syscall.ENOSPC}))
	if !errors.Is(err, badgerdb.ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("ENOSPC reported as %v, want ErrDiskFull wrapping ENOSPC", err)
	}
	for _, want := range []string{dir, "12345 bytes free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	other := fmt.Errorf("write tail: %w", syscall.EIO)
	if got := db.NoSpace(other); got != other {
		t.Fatalf("EIO reported as %v, want it unchanged", got)
	}
}
