package badgerdb_test

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// TestJournal holds the Badger journal to the contract every backend keeps.
func TestJournal(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journaltest.Journal { return openMem(t).Journal() })
}

// reopen closes db and opens dir again: what the journal holds then is
// what reached the disk.
func reopen(t *testing.T, db *badgerdb.DB, dir string) *badgerdb.DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return openDisk(t, dir)
}

func TestHeightAfterReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendFrames(t, db.Journal(), 1, 100, 1000, 1)
	db = reopen(t, db, dir)
	defer db.Close()
	j := db.Journal()
	if h := j.Height(); h != 1102 {
		t.Fatalf("height after reopen = %d, want 1102", h)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 550), 550, 1102)
	journaltest.AppendFrames(t, j, 3)
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, 1105)
}

// TestRefusedAppendsWriteNothing: appends refused with ErrGap leave nothing
// on disk, as a reopen shows.
func TestRefusedAppendsWriteNothing(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendFrames(t, db.Journal(), 3)
	journaltest.RefuseGaps(t, db.Journal())
	db = reopen(t, db, dir)
	defer db.Close()
	j := db.Journal()
	if h := j.Height(); h != 3 {
		t.Fatalf("height after reopen = %d, want 3", h)
	}
	var keys int
	err := db.Badger().View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte("j/")
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys != 1 {
		t.Fatalf("journal holds %d frames, want 1", keys)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, 3)
}

func TestReadDetectsCorruptFrame(t *testing.T) {
	db := openMem(t)
	j := db.Journal()
	journaltest.AppendFrames(t, j, 2, 2)
	err := db.Badger().Update(func(txn *badger.Txn) error {
		return txn.Set([]byte("j/\x00\x00\x00\x00\x00\x00\x00\x03"), []byte{0xff})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = j.Read(1, func(journal.Record) (bool, error) { return true, nil })
	if !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Read over corrupt frame: %v, want ErrCorrupt", err)
	}
}
