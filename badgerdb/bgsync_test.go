package badgerdb_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// waitSignal waits for a send on c; 20 seconds without one fail the test
// (the syncer it waits for never ran), rather than hanging it.
func waitSignal(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20 s", what)
	}
}

// TestBackgroundSyncEveryTailBytes: Appends ask the background syncer for a
// Badger sync each time the tail has taken the configured bytes, and it
// syncs off the append path: the Appends themselves make no Badger sync.
func TestBackgroundSyncEveryTailBytes(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	j := db.Journal()
	synced := make(chan struct{}, 100)
	j.SetBackgroundSync(4<<10, nil, func() { synced <- struct{}{} })
	b0, _ := j.Syncs()
	for range 20 {
		journaltest.AppendFrames(t, j, 10) // 10 records of a few hundred bytes
	}
	waitSignal(t, synced, "background sync after 20 appends over the 4 KiB step")
	if j.BackgroundSyncs() == 0 {
		t.Fatal("the background syncer signalled a sync it did not count")
	}
	if b, _ := syncsSince(j, b0, 0); b != 0 {
		t.Fatalf("appends with no CAS write made %d Badger syncs of their own, want 0", b)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, j.Height())
}

// TestBackgroundSyncCoversEarlierCASWrites: a background sync makes durable
// the CAS writes counted before it started, so the next Append need not sync
// Badger for them; a write counted after it read the count still makes the
// Append sync first.
func TestBackgroundSyncCoversEarlierCASWrites(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	j := db.Journal()
	journaltest.AppendFrames(t, j, 1)

	synced := make(chan struct{}, 1)
	var lateWrite func()
	j.SetBackgroundSync(1<<40, func() {
		if lateWrite != nil {
			lateWrite()
		}
	}, func() { synced <- struct{}{} })

	if _, err := db.CAS().Put([]byte("an object a record will name")); err != nil {
		t.Fatal(err)
	}
	j.AskBackgroundSync()
	waitSignal(t, synced, "background sync")
	b0, _ := j.Syncs()
	journaltest.AppendFrames(t, j, 2)
	if b, _ := syncsSince(j, b0, 0); b != 0 {
		t.Fatalf("append after a background sync covering the CAS write made %d Badger syncs, want 0", b)
	}

	lateWrite = func() {
		if _, err := db.CAS().Put([]byte("written after the syncer read the count")); err != nil {
			t.Error(err)
		}
	}
	j.AskBackgroundSync()
	waitSignal(t, synced, "background sync")
	b0, _ = j.Syncs()
	journaltest.AppendFrames(t, j, 3)
	if b, _ := syncsSince(j, b0, 0); b != 1 {
		t.Fatalf("append after a CAS write the background sync did not count made %d Badger syncs, want 1", b)
	}
}

// TestBackgroundSyncFailureFailsJournal: a failed background sync is a
// storage failure: the next Append fails with journal.ErrFailed and the
// height stays; the frames acknowledged before it are all read back at the
// next Open.
func TestBackgroundSyncFailureFailsJournal(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	j := db.Journal()
	journaltest.AppendFrames(t, j, 2, 3)
	j.BreakSyncDir()
	j.AskBackgroundSync()
	waitSignal(t, j.BackgroundSyncerDone(), "end of the background syncer after its sync failed")
	err := j.Append([]journal.Record{{Seq: 6, Kind: journal.KindStep, Body: []byte{6}}})
	if !errors.Is(err, journal.ErrFailed) {
		t.Fatalf("append after a failed background sync = %v, want journal.ErrFailed", err)
	}
	if h := j.Height(); h != 5 {
		t.Fatalf("height after the refused append = %d, want 5", h)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 5)
}

// TestCloseStopsBackgroundSyncer: Close returns only once the background
// syncer has, so it never syncs a closed Badger.
func TestCloseStopsBackgroundSyncer(t *testing.T) {
	db := openDisk(t, t.TempDir())
	j := db.Journal()
	journaltest.AppendFrames(t, j, 4)
	j.AskBackgroundSync()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.BackgroundSyncerDone():
	default:
		t.Fatal("Close returned with the background syncer still running")
	}
}
