package badgerdb_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// TestJournalSmallDropChunks runs the contract with DropBefore deleting one
// or two frames per chunk, so every drop in it crosses chunk boundaries.
func TestJournalSmallDropChunks(t *testing.T) {
	for _, n := range []int{1, 2} {
		journaltest.Run(t, func(t *testing.T) journaltest.Journal {
			j := openMem(t).Journal()
			j.SetDropChunk(n)
			return j
		})
	}
}

// TestDropSurvivesReopen: what DropBefore deleted is gone from disk, and
// First, the height and the kept records are what a reopen finds.
func TestDropSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendMixed(t, db.Journal(), 2, 3, 4, 5, 6, 7) // frames at 1, 3, 6, 10, 15, 21; height 27
	journaltest.DropBefore(t, db.Journal(), 12, nil, journal.DropStats{Frames: 3, Records: 9, Bytes: journaltest.FrameBytes(1, 2, 3, 4), First: 10})
	db = reopen(t, db, dir)
	defer db.Close()
	journaltest.CheckTruncated(t, db.Journal(), 10, 27)
	if n := countKeys(t, db, "j/"); n != 3 {
		t.Fatalf("%d frames on disk after the drop, want 3", n)
	}
	// Marks of 6, 7 and 8 were deleted with their frame; 18, 19, 20 remain.
	if n := countKeys(t, db, "m/"); n != 3 {
		t.Fatalf("%d marks on disk after the drop, want 3", n)
	}
	journaltest.AppendMixed(t, db.Journal(), 4)
	journaltest.CheckTruncated(t, db.Journal(), 10, 31)
}

// TestDropEverythingSurvivesReopen: with every frame dropped, no frame is
// left to recover the height from; Open takes it from the recorded First,
// so the journal continues where it ended instead of starting over at seq 1.
func TestDropEverythingSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendMixed(t, db.Journal(), 5, 5)
	journaltest.DropBefore(t, db.Journal(), 11, nil, journal.DropStats{Frames: 2, Records: 10, Bytes: journaltest.FrameBytes(1, 5, 5), First: 11})
	db = reopen(t, db, dir)
	j := db.Journal()
	journaltest.CheckTruncated(t, j, 11, 10)
	if n := countKeys(t, db, "j/") + countKeys(t, db, "m/"); n != 0 {
		t.Fatalf("%d frames and marks left on disk, want 0", n)
	}
	if err := j.Append(journaltest.MixedRecs(1, 1)); !errors.Is(err, journal.ErrGap) {
		t.Fatalf("Append at seq 1 after reopen: %v, want ErrGap", err)
	}
	journaltest.AppendMixed(t, j, 3)
	db = reopen(t, db, dir)
	defer db.Close()
	journaltest.CheckTruncated(t, db.Journal(), 11, 13)
}

// TestMarksBelowFirstNeverReturned: a drop interrupted after it moved
// First but before it deleted its marks leaves marks of dropped records;
// Marks skips them and the next drop deletes them.
func TestMarksBelowFirstNeverReturned(t *testing.T) {
	db := openMem(t)
	j := db.Journal()
	journaltest.AppendMixed(t, j, 12, 12)
	journaltest.DropBefore(t, j, 13, nil, journal.DropStats{Frames: 1, Records: 12, Bytes: journaltest.FrameBytes(1, 12), First: 13})
	if err := db.ForgeMark(journal.KindManifest, 6); err != nil {
		t.Fatal(err)
	}
	want := journaltest.MixedMarks(journal.KindManifest, 13, 24)
	if got := journaltest.MarksOf(t, j, journal.KindManifest); len(want) != 1 || !slices.Equal(got, want) {
		t.Fatalf("Marks(manifest) with a mark left below First = %v, want %v (one)", got, want)
	}
	journaltest.DropBefore(t, j, 25, nil, journal.DropStats{Frames: 1, Records: 12, Bytes: journaltest.FrameBytes(13, 12), First: 25})
	if n := countKeys(t, db, "m/"); n != 0 {
		t.Fatalf("%d marks left after dropping everything, want 0", n)
	}
}

// TestDropRefusesACorruptFrameBeforeArchiving: a frame that does not decode
// is not handed to the archive, and is not deleted.
func TestDropRefusesACorruptFrameBeforeArchiving(t *testing.T) {
	db := openMem(t)
	j := db.Journal()
	journaltest.AppendMixed(t, j, 2, 2, 2)
	if err := db.ForgeFrame(3, []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	var archived []uint64
	st, err := j.DropBefore(7, func(first uint64, _ []byte) error { archived = append(archived, first); return nil })
	if !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("DropBefore over a corrupt frame: %v, want ErrCorrupt", err)
	}
	if !slices.Equal(archived, []uint64{1}) || st.Frames != 1 || st.First != 3 || j.First() != 3 {
		t.Fatalf("archived %v, stats %+v, First %d; want [1], 1 frame, First 3", archived, st, j.First())
	}
}
