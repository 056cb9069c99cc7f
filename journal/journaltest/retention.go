package journaltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// FrameBytes is the encoded size of consecutive frames of Mixed records,
// the first starting at seq first, of the given sizes: what DropBefore
// counts in DropStats.Bytes when it drops them.
func FrameBytes(first uint64, sizes ...int) int64 {
	var n int64
	for _, size := range sizes {
		n += int64(len(journal.EncodeFrame(MixedRecs(first, size))))
		first += uint64(size)
	}
	return n
}

// DropBefore calls j.DropBefore and fails unless it returns want.
func DropBefore(t testing.TB, j Journal, before uint64, archive func(uint64, []byte) error, want journal.DropStats) {
	t.Helper()
	got, err := j.DropBefore(before, archive)
	if err != nil {
		t.Fatalf("DropBefore(%d): %v", before, err)
	}
	if got != want {
		t.Fatalf("DropBefore(%d) = %+v, want %+v", before, got, want)
	}
}

// CheckTruncated fails unless j, holding Mixed records through height,
// holds them from first on: First is first, reads from below it are
// ErrTruncated (not ErrCorrupt), a *journal.Truncation naming first, and
// say so, reads from first on return
// every record, and Marks gives no seq below first.
func CheckTruncated(t testing.TB, j Journal, first, height uint64) {
	t.Helper()
	if f, h := j.First(), j.Height(); f != first || h != height {
		t.Fatalf("First, Height = %d, %d; want %d, %d", f, h, first, height)
	}
	for from := range first {
		err := j.Read(from, func(journal.Record) (bool, error) { return true, nil })
		if !errors.Is(err, journal.ErrTruncated) || errors.Is(err, journal.ErrCorrupt) {
			t.Fatalf("Read(%d) below First %d: %v, want ErrTruncated", from, first, err)
		}
		if want := fmt.Sprintf("journal records before seq %d were dropped by retention", first); !strings.Contains(err.Error(), want) {
			t.Fatalf("Read(%d): %q does not say %q", from, err, want)
		}
		if tr := (*journal.Truncation)(nil); !errors.As(err, &tr) || tr.First != first {
			t.Fatalf("Read(%d): %v is not a *journal.Truncation naming First %d (readers take First from it)", from, err, first)
		}
		err = j.ReadKind(from, journal.Kinds(), func(journal.Record) (bool, error) { return true, nil })
		if !errors.Is(err, journal.ErrTruncated) {
			t.Fatalf("ReadKind(%d) below First %d: %v, want ErrTruncated", from, first, err)
		}
	}
	for from := first; from <= height+1; from++ {
		CheckMixed(t, ReadAll(t, j, from), from, height)
	}
	checkMarks(t, j, first, height)
}

// DropBefore removes whole frames only, keeps the one holding before, and
// leaves the height and every later record as they were.
func dropWholeFrames(t *testing.T, j Journal) {
	AppendMixed(t, j, 2, 3, 4, 5) // frames 1-2, 3-5, 6-9, 10-14
	DropBefore(t, j, 5, nil, journal.DropStats{Frames: 1, Records: 2, Bytes: FrameBytes(1, 2), First: 3})
	CheckTruncated(t, j, 3, 14)
	// Below First, or inside the frame at First: nothing to drop.
	for _, before := range []uint64{0, 1, 3, 4, 5} {
		DropBefore(t, j, before, nil, journal.DropStats{First: 3})
	}
	DropBefore(t, j, 6, nil, journal.DropStats{Frames: 1, Records: 3, Bytes: FrameBytes(3, 3), First: 6})
	CheckTruncated(t, j, 6, 14)
	st, err := j.DropBefore(16, nil)
	if err == nil || !strings.Contains(err.Error(), "drop before seq 16") {
		t.Fatalf("DropBefore past Height()+1 = %+v, %v; want an error naming seq 16", st, err)
	}
	CheckTruncated(t, j, 6, 14)
}

// Dropping every frame leaves an empty journal that still has its height:
// it continues at Height()+1.
func dropEverything(t *testing.T, j Journal) {
	AppendMixed(t, j, 4, 4, 4)
	DropBefore(t, j, 13, nil, journal.DropStats{Frames: 3, Records: 12, Bytes: FrameBytes(1, 4, 4, 4), First: 13})
	CheckTruncated(t, j, 13, 12)
	if h, err := j.Wait(context.Background(), 11); h != 12 || err != nil {
		t.Fatalf("Wait(after=11) = %d, %v; want 12 at once", h, err)
	}
	if err := j.Append(MixedRecs(1, 1)); !errors.Is(err, journal.ErrGap) {
		t.Fatalf("Append at seq 1 after the drop: %v, want ErrGap", err)
	}
	AppendMixed(t, j, 8)
	CheckTruncated(t, j, 13, 20)
	DropBefore(t, j, 13, nil, journal.DropStats{First: 13})
}

type archived struct {
	first uint64
	frame []byte
}

// The archive sees each dropped frame, oldest first, as EncodeFrame wrote
// it, and an archive file of them holds exactly the records dropped.
func dropArchivesFramesInOrder(t *testing.T, j Journal) {
	sizes := []int{1, 4, 2, 7, 3} // frames 1, 2-5, 6-7, 8-14, 15-17
	AppendMixed(t, j, sizes...)
	var got []archived
	archive := func(first uint64, frame []byte) error {
		got = append(got, archived{first, bytes.Clone(frame)})
		return nil
	}
	DropBefore(t, j, 10, archive, journal.DropStats{Frames: 3, Records: 7,
		Bytes: FrameBytes(1, 1, 4, 2), First: 8})
	first := uint64(1)
	for i, a := range got {
		if want := journal.EncodeFrame(MixedRecs(first, sizes[i])); a.first != first || !bytes.Equal(a.frame, want) {
			t.Fatalf("archived frame %d: first seq %d, %d bytes; want the frame at seq %d (%d bytes)", i, a.first, len(a.frame), first, len(want))
		}
		first += uint64(sizes[i])
	}
	if len(got) != 3 {
		t.Fatalf("archive called %d times, want 3", len(got))
	}
	var file bytes.Buffer
	w := journal.NewArchiveWriter(&file)
	for _, a := range got {
		if err := w.Frame(a.first, a.frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var recs []journal.Record
	err := journal.ReadArchive(&file, func(r journal.Record) (bool, error) { recs = append(recs, r); return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	CheckMixed(t, recs, 1, 7)
	CheckTruncated(t, j, 8, 17)
}

// An archive error stops the drop before the frame it refused: the frames
// archived before it are dropped, it and the later ones are kept.
func dropStopsAtArchiveError(t *testing.T, j Journal) {
	AppendMixed(t, j, 2, 2, 2, 2)
	full := errors.New("archive full")
	var called []uint64
	st, err := j.DropBefore(9, func(first uint64, _ []byte) error {
		called = append(called, first)
		if first == 5 {
			return full
		}
		return nil
	})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), "frame at seq 5") {
		t.Fatalf("DropBefore with a failing archive: %v, want its error naming the frame at seq 5", err)
	}
	if want := (journal.DropStats{Frames: 2, Records: 4, Bytes: FrameBytes(1, 2, 2), First: 5}); st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
	if fmt.Sprint(called) != "[1 3 5]" {
		t.Fatalf("archive called for frames %v, want [1 3 5]", called)
	}
	CheckTruncated(t, j, 5, 8)
	DropBefore(t, j, 9, nil, journal.DropStats{Frames: 2, Records: 4, Bytes: FrameBytes(5, 2, 2), First: 9})
	CheckTruncated(t, j, 9, 8)
}

// A frame appended while a drop runs (here by the archive itself) is past
// the height the drop started at, so it is kept.
func dropKeepsFramesAppendedMeanwhile(t *testing.T, j Journal) {
	AppendMixed(t, j, 1, 1, 1)
	appended := false
	archive := func(uint64, []byte) error {
		if appended {
			return nil
		}
		appended = true
		return j.Append(MixedRecs(4, 2))
	}
	DropBefore(t, j, 4, archive, journal.DropStats{Frames: 3, Records: 3, Bytes: FrameBytes(1, 1, 1, 1), First: 4})
	CheckTruncated(t, j, 4, 5)
}

// Readers racing a drop see either every record from where they start or
// ErrTruncated, never a corrupt or short journal. Run with -race.
func concurrentReadersWhileDropping(t *testing.T, j Journal) {
	for i := range 150 {
		AppendFrames(t, j, i%5+1)
	}
	height := j.Height()
	var wg sync.WaitGroup
	for r := range 4 {
		from := height * uint64(r+1) / 5
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var got []journal.Record
				err := j.Read(from, func(rc journal.Record) (bool, error) { got = append(got, rc); return true, nil })
				if errors.Is(err, journal.ErrTruncated) {
					if f := j.First(); f <= from {
						t.Errorf("reader from seq %d: ErrTruncated while First is %d", from, f)
					}
					return
				}
				if err == nil {
					err = runError(got, from, height, Rec)
				}
				if err != nil {
					t.Errorf("reader from seq %d: %v", from, err)
					return
				}
			}
		}()
	}
	for before := uint64(1); before <= height; before += 7 {
		if _, err := j.DropBefore(before, nil); err != nil {
			t.Error(err)
		}
	}
	if _, err := j.DropBefore(height+1, nil); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if f := j.First(); f != height+1 {
		t.Fatalf("First after dropping everything = %d, want %d", f, height+1)
	}
}
