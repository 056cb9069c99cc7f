package badgerdb_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/internal/tmpfs"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// TestDiskFullOnTmpfs fills a real filesystem (a 384 MiB tmpfs) with
// small CAS objects, which live in the LSM, so memtables flush and tables
// compact as the disk fills, and with journal frames, which go to the value
// log and the tail. Without the guard a write through Badger's mappings
// faults with SIGBUS and kills the test binary; with it the first write
// that would leave too little is refused with ErrDiskFull and the process
// goes on. The store then closes (Badger flushes its memtable into the
// reserve), refuses to reopen while the disk is still full or opens, and
// once the tmpfs has grown it reopens with every acknowledged frame and
// object, and takes writes again.
func TestDiskFullOnTmpfs(t *testing.T) {
	const size = 384 << 20
	mnt := tmpfs.Mount(t, size)
	dir := filepath.Join(mnt, "store")
	// db is closed at the end unless the test closed it (and set it nil):
	// a failure must not leave Badger compacting on an unmounted tmpfs.
	var db *badgerdb.DB
	t.Cleanup(func() {
		if db != nil {
			db.Close()
		}
	})
	db = mustOpen(t, dir)
	j, c := db.Journal(), db.CAS()
	rng := rand.NewChaCha8([32]byte{26, 3})
	var frames [][]byte
	var objects []schemas.Hash
	var refused error
	for refused == nil {
		batch := make([][]byte, 2048)
		for i := range batch {
			batch[i] = make([]byte, 900)
			rng.Read(batch[i])
		}
		hs, err := c.PutBatch(batch)
		if err != nil {
			refused = err
			break
		}
		objects = append(objects, hs...)
		body := make([]byte, 8<<10)
		rng.Read(body)
		if err := j.Append(stepAt(uint64(len(frames)+1), body)); err != nil {
			refused = err
			break
		}
		frames = append(frames, body)
	}
	if !errors.Is(refused, badgerdb.ErrDiskFull) {
		t.Fatalf("the write that filled the disk failed with %v, want ErrDiskFull", refused)
	}
	t.Logf("refused after %d frames and %d objects, %d bytes free: %v", len(frames), len(objects), tmpfs.Free(t, mnt), refused)
	// By now level 0 holds enough tables that Badger compacts them into a
	// lower level: on the nearly full disk, into the space the guard kept
	// for the tables. Badger tells nobody when a compaction ends, so its
	// levels are polled until one has (a hang guard bounds the wait; no
	// result depends on how long it takes).
	deadline := time.Now().Add(5 * time.Minute)
	for !compactedBelowL0(db) {
		if time.Now().After(deadline) {
			t.Fatalf("no compaction into a lower level on the full disk (levels %+v)", db.Badger().Levels())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d bytes free once level 0 was compacted", tmpfs.Free(t, mnt))
	if err := db.Close(); err != nil {
		t.Fatalf("close on the full disk: %v", err)
	}
	db = nil
	switch again, err := badgerdb.Open(dir); {
	case err == nil:
		again.Close() // room enough after all: nothing to prove here
	case !errors.Is(err, badgerdb.ErrDiskFull):
		t.Fatalf("reopen on the full disk: %v, want ErrDiskFull or success", err)
	}

	tmpfs.Resize(t, mnt, 2*size)
	db = mustOpen(t, dir)
	j, c = db.Journal(), db.CAS()
	if h := j.Height(); h != uint64(len(frames)) {
		t.Fatalf("height %d after reopening, want the %d acknowledged frames", h, len(frames))
	}
	err := j.Read(1, func(r journal.Record) (bool, error) {
		if !bytes.Equal(r.Body, frames[r.Seq-1]) {
			t.Fatalf("frame %d differs after reopening", r.Seq)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every object is there; one in 16, spread over the run, is read back
	// whole and checked against its hash (a Get each takes half a minute
	// under -race).
	stored := make(map[schemas.Hash]bool, len(objects))
	if err := c.Iterate(func(h schemas.Hash, _ int) error { stored[h] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, h := range objects {
		if !stored[h] {
			t.Fatalf("acknowledged object %d (%s) lost", i, h)
		}
		if i%16 == 0 {
			if _, err := c.Get(h); err != nil {
				t.Fatalf("acknowledged object %d unreadable: %v", i, err)
			}
		}
	}
	if err := j.Append(stepAt(uint64(len(frames)+1), []byte("after"))); err != nil {
		t.Fatalf("append once space is freed: %v", err)
	}
}

// compactedBelowL0 says whether level 0 holds fewer tables than make
// Badger compact it (its default NumLevelZeroTables, 5) and a lower level
// holds some: a compaction out of level 0 has finished since it filled.
func compactedBelowL0(db *badgerdb.DB) bool {
	below := false
	l0 := 0
	for _, l := range db.Badger().Levels() {
		if l.Level == 0 {
			l0 = l.NumTables
		} else if l.NumTables > 0 {
			below = true
		}
	}
	return below && l0 < 5
}

func mustOpen(t *testing.T, dir string) *badgerdb.DB {
	t.Helper()
	db, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

// TestRestoreOnFullDisk: restoring a backup onto a filesystem too small
// for it (96 MiB onto 68) fails with ErrDiskFull while it writes, the
// reserve still free (the restore asks the guard, a chunk at a time),
// instead of faulting Badger's mapped files with SIGBUS.
func TestRestoreOnFullDisk(t *testing.T) {
	src := mustOpen(t, t.TempDir())
	rng := rand.NewChaCha8([32]byte{26, 9})
	for range 48 { // 96 MiB, more than the tmpfs below holds
		batch := make([][]byte, 1024)
		for i := range batch {
			batch[i] = make([]byte, 2048) // in the value log
			rng.Read(batch[i])
		}
		if _, err := src.CAS().PutBatch(batch); err != nil {
			t.Fatal(err)
		}
	}
	var backup bytes.Buffer
	if _, err := src.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	mnt := tmpfs.Mount(t, badgerdb.DefaultDiskReserve+16<<20)
	_, err := badgerdb.Restore(filepath.Join(mnt, "store"), &backup)
	if !errors.Is(err, badgerdb.ErrDiskFull) {
		t.Fatalf("restore of %d bytes onto a nearly full tmpfs: %v, want ErrDiskFull", backup.Len(), err)
	}
	// Refused while writing, with the reserve still free, not once the
	// disk had filled (a reopen of a full store is refused too).
	if free := tmpfs.Free(t, mnt); free < badgerdb.DefaultDiskReserve/2 {
		t.Fatalf("%d bytes free after the refused restore: it wrote past the reserve (%v)", free, err)
	}
}
