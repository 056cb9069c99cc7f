package badgerdb_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

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
	rng := rand.New(rand.NewPCG(26, 3))
	var frames [][]byte
	var objects []schemas.Hash
	var refused error
	for refused == nil {
		batch := make([][]byte, 2048)
		for i := range batch {
			batch[i] = make([]byte, 900)
			fillRandom(rng, batch[i])
		}
		hs, err := c.PutBatch(batch)
		if err != nil {
			refused = err
			break
		}
		objects = append(objects, hs...)
		body := make([]byte, 8<<10)
		fillRandom(rng, body)
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
	compacted := false
	for _, l := range db.Badger().Levels() {
		compacted = compacted || (l.Level > 0 && l.NumTables > 0)
	}
	if !compacted {
		t.Fatalf("no table left level 0 before the disk filled: the test never compacted near a full disk (levels %+v)", db.Badger().Levels())
	}
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
	for _, h := range objects {
		if _, err := c.Get(h); err != nil {
			t.Fatalf("acknowledged object lost: %v", err)
		}
	}
	if err := j.Append(stepAt(uint64(len(frames)+1), []byte("after"))); err != nil {
		t.Fatalf("append once space is freed: %v", err)
	}
}

func mustOpen(t *testing.T, dir string) *badgerdb.DB {
	t.Helper()
	db, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

func fillRandom(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
