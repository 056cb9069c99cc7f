package badgerdb_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
	"github.com/aos-kernel/aos/schemas"
)

// backupOf backs db up into memory.
func backupOf(t *testing.T, db *badgerdb.DB) ([]byte, badgerdb.BackupInfo) {
	t.Helper()
	var buf bytes.Buffer
	info, err := db.Backup(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), info
}

// restoreInto restores a backup into a new directory and opens it.
func restoreInto(t *testing.T, b []byte) (*badgerdb.DB, badgerdb.BackupInfo) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	info, err := badgerdb.Restore(dir, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	db := openDisk(t, dir)
	t.Cleanup(func() { db.Close() })
	return db, info
}

// TestBackupRestoreRoundTrip: a store with CAS objects, journal frames,
// marks and a retention cut comes back from its backup with every key, the
// same journal (First, height, records) and every object; it takes appends
// where the original would.
func TestBackupRestoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	var objs []schemas.Hash
	for i := range 50 {
		h, err := db.CAS().Put([]byte(fmt.Sprintf("object %d %s", i, strings.Repeat("x", i*100))))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, h)
	}
	journaltest.AppendMixed(t, db.Journal(), 2, 3, 4, 5, 6, 7) // frames at 1, 3, 6, 10, 15, 21; height 27
	journaltest.DropBefore(t, db.Journal(), 12, nil, journal.DropStats{Frames: 3, Records: 9, Bytes: journaltest.FrameBytes(1, 2, 3, 4), First: 10})

	b, wrote := backupOf(t, db)
	got, info := restoreInto(t, b)
	if info.Keys != wrote.Keys || info.Bytes != wrote.Bytes || info.First != 10 || info.Height != 27 {
		t.Fatalf("restored %+v, backed up %+v, want journal 10..27", info, wrote)
	}
	if a, b := countKeys(t, db, ""), countKeys(t, got, ""); a != b || uint64(b) != info.Keys {
		t.Fatalf("%d keys in the original, %d restored, backup says %d", a, b, info.Keys)
	}
	journaltest.CheckTruncated(t, got.Journal(), 10, 27)
	journaltest.CheckMixed(t, journaltest.ReadAll(t, got.Journal(), 10), 10, 27)
	if m := journaltest.MarksOf(t, got.Journal(), journal.KindManifest); !slicesEqual(m, journaltest.MarksOf(t, db.Journal(), journal.KindManifest)) {
		t.Fatalf("marks restored %v, original %v", m, journaltest.MarksOf(t, db.Journal(), journal.KindManifest))
	}
	for _, h := range objs {
		want, _ := db.CAS().Get(h)
		if v, err := got.CAS().Get(h); err != nil || !bytes.Equal(v, want) {
			t.Fatalf("object %s: %v", h, err)
		}
	}
	journaltest.AppendMixed(t, got.Journal(), 3)
	journaltest.CheckTruncated(t, got.Journal(), 10, 30)
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestBackupWhileAppending: a backup taken while a writer appends holds
// every frame whose Append returned before the backup began, and the copy
// is a gap-free prefix of the journal with each record as it was written.
func TestBackupWhileAppending(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	defer db.Close()
	j := db.Journal()
	journaltest.AppendFrames(t, j, 5)
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
		werr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.CAS().Put([]byte(fmt.Sprintf("blob %d", i))); err != nil {
				werr = err
				return
			}
			if err := j.Append(journaltest.Recs(j.Height()+1, 1+i%7)); err != nil {
				werr = err
				return
			}
		}
	}()
	var backups [][]byte
	var acked []uint64
	for range 5 {
		// Wait for the writer's next append, so each backup races it.
		if _, err := j.Wait(t.Context(), j.Height()); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, j.Height())
		b, _ := backupOf(t, db)
		backups = append(backups, b)
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	for i, b := range backups {
		got, info := restoreInto(t, b)
		if info.Height < acked[i] {
			t.Fatalf("backup %d holds seqs to %d, but %d were acknowledged before it began", i, info.Height, acked[i])
		}
		journaltest.CheckRun(t, journaltest.ReadAll(t, got.Journal(), 1), 1, info.Height)
		if got.Journal().Height() != info.Height {
			t.Fatalf("backup %d: restored height %d, backup says %d", i, got.Journal().Height(), info.Height)
		}
	}
}

// TestRestoreRefusesDamage: a backup cut short, with a byte changed, with
// its keys out of order, or that is not one, is refused with
// ErrBadBackup naming the byte; a non-empty directory is refused before
// anything is written.
func TestRestoreRefusesDamage(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	journaltest.AppendFrames(t, db.Journal(), 3, 4)
	if _, err := db.CAS().Put([]byte("an object")); err != nil {
		t.Fatal(err)
	}
	good, _ := backupOf(t, db)
	// A byte of the object's value: only the checksum can tell.
	flipped := bytes.Clone(good)
	at := bytes.Index(flipped, []byte("an object"))
	if at < 0 {
		t.Fatal("the object is not in the backup")
	}
	flipped[at+3] ^= 0x01
	for name, b := range map[string][]byte{
		"cut short":    good[:len(good)-40],
		"byte changed": flipped,
		"not a backup": []byte("PK\x03\x04 a zip file"),
		"empty":        nil,
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			_, err := badgerdb.Restore(dir, bytes.NewReader(b))
			if !errors.Is(err, badgerdb.ErrBadBackup) || !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("restore of a backup %s: %v, want ErrBadBackup naming the byte", name, err)
			}
		})
	}
	t.Run("keys out of order", func(t *testing.T) {
		// A well-formed backup whose second key sorts before its first.
		var b bytes.Buffer
		b.WriteString("aos-store-backup/1\n")
		for _, k := range []string{"c/b", "c/a"} {
			b.Write([]byte{byte(len(k))})
			b.WriteString(k)
			b.Write([]byte{1, 'v'})
		}
		_, err := badgerdb.ReadBackup(&b, func(k, v []byte) error { return nil })
		if !errors.Is(err, badgerdb.ErrBadBackup) || !strings.Contains(err.Error(), `"c/a" does not follow "c/b"`) {
			t.Fatalf("keys out of order: %v", err)
		}
	})
	t.Run("directory not empty", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := badgerdb.Restore(dir, bytes.NewReader(good)); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("restore into a non-empty directory: %v", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("restore wrote into a non-empty directory: %d entries", len(ents))
		}
	})
}

// TestReadBackupStopsAtItsEnd: given a *bufio.Reader, ReadBackup leaves
// what follows the backup unread.
func TestReadBackupStopsAtItsEnd(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	journaltest.AppendFrames(t, db.Journal(), 2)
	b, _ := backupOf(t, db)
	r := bufio.NewReader(bytes.NewReader(append(bytes.Clone(b), "after"...)))
	if _, err := badgerdb.ReadBackup(r, func(k, v []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "after" {
		t.Fatalf("after the backup: %q, want %q", rest, "after")
	}
}
