package badgerdb_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// syncsSince returns the Badger syncs and tail fdatasyncs made since
// (b0, t0).
func syncsSince(j *badgerdb.Journal, b0, t0 uint64) (uint64, uint64) {
	b, t := j.Syncs()
	return b - b0, t - t0
}

// TestAppendFlushesOnce: an append is one fdatasync of the tail and no
// Badger sync, unless the CAS was written since the last Badger sync: then
// Badger is synced first, once, so the objects are durable before the
// records that name them.
func TestAppendFlushesOnce(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	j := db.Journal()
	b0, t0 := j.Syncs()
	journaltest.AppendFrames(t, j, 1, 7, 30, 2, 1)
	if b, tl := syncsSince(j, b0, t0); b != 0 || tl != 5 {
		t.Fatalf("5 appends with no CAS write: %d Badger syncs, %d tail syncs; want 0 and 5", b, tl)
	}
	for _, put := range []struct {
		name string
		do   func() error
	}{
		{"Put", func() error { _, err := db.CAS().Put([]byte("an object a record names")); return err }},
		{"PutBatch", func() error { _, err := db.CAS().PutBatch([][]byte{[]byte("one"), []byte("two")}); return err }},
		{"Put of a stored object", func() error { _, err := db.CAS().Put([]byte("one")); return err }},
	} {
		if err := put.do(); err != nil {
			t.Fatal(err)
		}
		b0, t0 = j.Syncs()
		journaltest.AppendFrames(t, j, 3, 4)
		if b, tl := syncsSince(j, b0, t0); b != 1 || tl != 2 {
			t.Fatalf("%s, then 2 appends: %d Badger syncs, %d tail syncs; want 1 (before the first) and 2", put.name, b, tl)
		}
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, j.Height())
}

// TestTailPutsBackLostFrames: frames (and their kind marks) that Badger
// lost because it was not synced are put back from the tail at Open.
func TestTailPutsBackLostFrames(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendMixed(t, db.Journal(), 5, 30, 1, 12, 40)
	want := allMarks(t, db.Journal())
	for _, first := range []uint64{6, 37, 49} {
		if err := db.LoseFrame(first); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	j := db.Journal()
	if h := j.Height(); h != 88 {
		t.Fatalf("height after reopen = %d, want 88", h)
	}
	journaltest.CheckMixed(t, journaltest.ReadAll(t, j, 1), 1, 88)
	for k, seqs := range allMarks(t, j) {
		if !slices.Equal(seqs, want[k]) {
			t.Fatalf("Marks(%s) after reopen = %v, want %v", k, seqs, want[k])
		}
	}
}

// TestTailTornEnd: a tail whose last record a crash tore (or left
// followed by garbage) opens at the frames before it; the torn frame, which
// Badger still holds, is copied into the tail at Open, so from then on it
// is as durable as the rest.
func TestTailTornEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // bytes before the end of the records
		junk []byte
	}{
		{"last record torn", 5, []byte{0xde, 0xad, 0xbe, 0xef, 0x01}},
		{"garbage after", 0, []byte{0, 0, 0, 3, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 99, 13, 14, 15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openDisk(t, dir)
			journaltest.AppendFrames(t, db.Journal(), 4, 9, 6)
			used := db.Journal().TailUsed()
			if err := db.CloseKeepTail(); err != nil {
				t.Fatal(err)
			}
			writeAt(t, filepath.Join(dir, badgerdb.TailName), used-tc.at, tc.junk)

			db = openDisk(t, dir)
			if h := db.Journal().Height(); h != 19 {
				t.Fatalf("height after a torn tail = %d, want 19 (Badger holds every frame)", h)
			}
			journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 19)
			// Badger now loses every frame: the tail has them all,
			// the one whose record was torn included.
			for _, first := range []uint64{1, 5, 14} {
				if err := db.LoseFrame(first); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.CloseKeepTail(); err != nil {
				t.Fatal(err)
			}
			db = openDisk(t, dir)
			defer db.Close()
			if h := db.Journal().Height(); h != 19 {
				t.Fatalf("height after Badger lost the frames = %d, want 19", h)
			}
			journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 19)
			journaltest.AppendFrames(t, db.Journal(), 2)
			journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 21)
		})
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestTailKeepsDroppedFramesDropped: frames retention dropped after the
// tail recorded them are not put back at Open.
func TestTailKeepsDroppedFramesDropped(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	j := db.Journal()
	journaltest.AppendFrames(t, j, 5, 5, 5, 5)
	if _, err := j.DropBefore(11, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	j = db.Journal()
	if f := j.First(); f != 11 {
		t.Fatalf("First after reopen = %d, want 11", f)
	}
	if err := j.Read(1, func(journal.Record) (bool, error) { return true, nil }); !errors.Is(err, journal.ErrTruncated) {
		t.Fatalf("Read(1) after reopen: %v, want ErrTruncated", err)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 11), 11, 20)
}

// TestTailCheckpoint: once the tail outgrows its limit an Append syncs
// Badger and starts the tail afresh, so the tail (what Open replays) stays
// bounded, and so does its file, which restarts write over; a clean Close
// empties it too.
func TestTailCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, badgerdb.TailName)
	db := openDisk(t, dir)
	j := db.Journal()
	const limit = 8 << 10
	j.SetTailLimit(limit)
	b0, _ := j.Syncs()
	for range 200 {
		journaltest.AppendFrames(t, j, 10)
		if used := j.TailUsed(); used >= limit {
			t.Fatalf("tail holds %d bytes after an append, limit %d", used, limit)
		}
	}
	if b, _ := syncsSince(j, b0, 0); b == 0 {
		t.Fatal("no checkpoint synced Badger")
	}
	if st, err := os.Stat(path); err != nil || st.Size() > 1<<20 {
		t.Fatalf("tail file after 200 appends with a limit of %d: %v, %v; want one growth step (1 MiB)", limit, st, err)
	}
	// Every frame is one append of 10 records: the tail holds the ones
	// since the last restart, and records left from before it (the file
	// is written over) are not replayed.
	since := j.Height() - j.TailBase()
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	if got, want := db.Journal().TailReplayed(), int(since/10); got != want {
		t.Fatalf("Open replayed %d frames, want the %d appended since the last restart", got, want)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 2000)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	if used := db.Journal().TailUsed(); used != int64(badgerdb.TailHeaderLen) {
		t.Fatalf("tail after a clean Close and Open holds %d bytes, want %d (the header)", used, badgerdb.TailHeaderLen)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 2000)
}

// TestTailMissing: a world written before the tail existed (or whose tail
// a crash left without a header) opens with its journal whole and a new
// tail, and appends from there survive losing them from Badger.
func TestTailMissing(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendFrames(t, db.Journal(), 3, 8)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, badgerdb.TailName)); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 11)
	journaltest.AppendFrames(t, db.Journal(), 5)
	if err := db.LoseFrame(12); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	journaltest.CheckRun(t, journaltest.ReadAll(t, db.Journal(), 1), 1, 16)
}

// TestTailBigFrames: frames larger than the tail's growth step go through
// the tail whole and come back from it.
func TestTailBigFrames(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	j := db.Journal()
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for range 3 {
		recs := journaltest.Recs(j.Height()+1, 3)
		recs[1].Body = big
		if err := j.Append(recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.LoseFrame(7); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db = openDisk(t, dir)
	defer db.Close()
	got := journaltest.ReadAll(t, db.Journal(), 1)
	if len(got) != 9 {
		t.Fatalf("read %d records after reopen, want 9", len(got))
	}
	for i, r := range got {
		want := journaltest.Rec(uint64(i + 1)).Body
		if i%3 == 1 {
			want = big
		}
		if r.Seq != uint64(i+1) || !slices.Equal(r.Body, want) {
			t.Fatalf("record %d after reopen: seq %d, %d body bytes; want seq %d, %d bytes", i, r.Seq, len(r.Body), i+1, len(want))
		}
	}
}

// TestTailAheadOfBadgerIsCorrupt: a tail that says Badger was durable
// through a seq Badger does not hold (Badger lost synced frames) is
// reported at Open, not papered over.
func TestTailAheadOfBadgerIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	j := db.Journal()
	j.SetTailLimit(1) // every append checkpoints: the tail's base is the height
	journaltest.AppendFrames(t, j, 4, 5)
	if err := db.LoseFrame(5); err != nil {
		t.Fatal(err)
	}
	if err := db.CloseKeepTail(); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir)
	if err == nil {
		db.Close()
		t.Fatal("Open succeeded on a journal that lost frames its tail says were durable")
	}
	if !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	t.Log(err)
}

// TestAppendFailsWithEitherHalf: an Append runs Badger's commit and the
// tail's write and flush together; either failing makes it return an
// error with the height unchanged, and fails the journal. A frame the tail
// made durable while Badger's commit failed is back at the next Open
// (doc'd on Append): its appender was told of an error, never of success.
func TestAppendFailsWithEitherHalf(t *testing.T) {
	rec := func(seq uint64) []journal.Record {
		return []journal.Record{{Seq: seq, Kind: journal.KindStep, Body: []byte{byte(seq)}}}
	}
	check := func(t *testing.T, j *badgerdb.Journal, what string) {
		t.Helper()
		if err := j.Append(rec(3)); err == nil {
			t.Fatalf("Append with a failing %s returned nil", what)
		}
		if h := j.Height(); h != 2 {
			t.Fatalf("height after the failed append = %d, want 2", h)
		}
		if err := j.Append(rec(3)); !errors.Is(err, journal.ErrFailed) {
			t.Fatalf("the append after a failed one = %v, want journal.ErrFailed", err)
		}
	}
	t.Run("tail", func(t *testing.T) {
		db := openDisk(t, t.TempDir())
		defer db.CloseKeepTail()
		j := db.Journal()
		for seq := uint64(1); seq <= 2; seq++ {
			if err := j.Append(rec(seq)); err != nil {
				t.Fatal(err)
			}
		}
		j.BreakTail()
		check(t, j, "tail")
	})
	t.Run("badger", func(t *testing.T) {
		dir := t.TempDir()
		db := openDisk(t, dir)
		j := db.Journal()
		for seq := uint64(1); seq <= 2; seq++ {
			if err := j.Append(rec(seq)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Badger().Close(); err != nil {
			t.Fatal(err)
		}
		check(t, j, "Badger commit")
		db.CloseKeepTail()
		db = openDisk(t, dir)
		defer db.Close()
		if h := db.Journal().Height(); h != 3 {
			t.Fatalf("height at the next Open = %d, want 3 (the frame the tail made durable)", h)
		}
	})
}
