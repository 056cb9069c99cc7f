package journaltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// Journal is what the contract exercises: the kernel's journal port,
// ReadKind, and retention (DropBefore).
type Journal interface {
	Height() uint64
	Append(recs []journal.Record) error
	Read(from uint64, fn func(journal.Record) (bool, error)) error
	ReadKind(from uint64, kinds []journal.Kind, fn func(journal.Record) (bool, error)) error
	Wait(ctx context.Context, after uint64) (uint64, error)
	Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error
	First() uint64
	DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error)
}

// Run runs the contract against journals made by open, a fresh empty one
// per subtest.
func Run(t *testing.T, open func(t *testing.T) Journal) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Journal)
	}{
		{"ReadRangesAcrossFrames", readRangesAcrossFrames},
		{"ReadKind", readKind},
		{"AppendRefusesGapsAndDisorder", appendRefusesGapsAndDisorder},
		{"WaitWakesOnAppend", waitWakesOnAppend},
		{"WaitHonoursCancel", waitHonoursCancel},
		{"ConcurrentReadersWhileAppending", concurrentReadersWhileAppending},
		{"FirstOfAFreshJournal", firstOfAFreshJournal},
		{"MarksByKind", marksByKind},
		{"MarksStopErrorAndNewAppends", marksStopErrorAndNewAppends},
		{"DropWholeFrames", dropWholeFrames},
		{"DropEverything", dropEverything},
		{"DropArchivesFramesInOrder", dropArchivesFramesInOrder},
		{"DropStopsAtArchiveError", dropStopsAtArchiveError},
		{"DropKeepsFramesAppendedMeanwhile", dropKeepsFramesAppendedMeanwhile},
		{"ConcurrentReadersWhileDropping", concurrentReadersWhileDropping},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

var kinds = []journal.Kind{journal.KindEvent, journal.KindStep, journal.KindIntent, journal.KindReceipt}

// Rec is the deterministic record for seq: tests can check any record read
// back without keeping what was written.
func Rec(seq uint64) journal.Record {
	return journal.Record{Seq: seq, Kind: kinds[seq%uint64(len(kinds))], Body: fmt.Appendf(nil, "body of %d", seq)}
}

// Recs is Rec(from), ..., Rec(from+n-1).
func Recs(from uint64, n int) []journal.Record {
	out := make([]journal.Record, n)
	for i := range out {
		out[i] = Rec(from + uint64(i))
	}
	return out
}

// AppendFrames appends frames of the given sizes after the current height.
func AppendFrames(t testing.TB, j Journal, sizes ...int) {
	t.Helper()
	for _, n := range sizes {
		if err := j.Append(Recs(j.Height()+1, n)); err != nil {
			t.Fatal(err)
		}
	}
}

// ReadAll reads every record from seq from on.
func ReadAll(t testing.TB, j Journal, from uint64) []journal.Record {
	t.Helper()
	var out []journal.Record
	err := j.Read(from, func(r journal.Record) (bool, error) { out = append(out, r); return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// CheckRun fails unless got is exactly Rec(from), Rec(from+1), ..., Rec(to).
func CheckRun(t testing.TB, got []journal.Record, from, to uint64) {
	t.Helper()
	if err := runError(got, from, to, Rec); err != nil {
		t.Fatal(err)
	}
}

// runError says how got differs from gen(from), ..., gen(to), or is nil.
func runError(got []journal.Record, from, to uint64, gen func(uint64) journal.Record) error {
	if want := int(to) - int(from) + 1; len(got) != max(want, 0) {
		return fmt.Errorf("read %d records from seq %d, want %d (through seq %d)", len(got), from, max(want, 0), to)
	}
	for i, r := range got {
		w := gen(from + uint64(i))
		if r.Seq != w.Seq || r.Kind != w.Kind || string(r.Body) != string(w.Body) {
			return fmt.Errorf("record %d = {%d %s %q}, want {%d %s %q}", i, r.Seq, r.Kind, r.Body, w.Seq, w.Kind, w.Body)
		}
	}
	return nil
}

func readRangesAcrossFrames(t *testing.T, j Journal) {
	if h := j.Height(); h != 0 {
		t.Fatalf("empty journal height = %d", h)
	}
	CheckRun(t, ReadAll(t, j, 0), 1, 0)
	sizes := []int{1, 3, 1, 10, 2, 1, 7}
	AppendFrames(t, j, sizes...)
	const total = 25
	if h := j.Height(); h != total {
		t.Fatalf("height = %d, want %d", h, total)
	}
	for from := uint64(0); from <= total+2; from++ {
		CheckRun(t, ReadAll(t, j, from), max(from, 1), total)
	}
	// Stopping early: fn returning false ends the read.
	for from := uint64(1); from <= total; from++ {
		for n := 1; n <= 4; n++ {
			var got []journal.Record
			err := j.Read(from, func(r journal.Record) (bool, error) {
				got = append(got, r)
				return len(got) < n, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			CheckRun(t, got, from, min(from+uint64(n)-1, total))
		}
	}
	stop := errors.New("stop")
	if err := j.Read(1, func(journal.Record) (bool, error) { return true, stop }); !errors.Is(err, stop) {
		t.Fatalf("Read returned %v, want fn's error", err)
	}
}

func readKind(t *testing.T, j Journal) {
	AppendFrames(t, j, 5, 5, 5)
	var got []uint64
	err := j.ReadKind(3, []journal.Kind{journal.KindStep, journal.KindReceipt}, func(r journal.Record) (bool, error) {
		got = append(got, r.Seq)
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{3, 5, 7, 9, 11, 13, 15} // KindStep at seq%4==1, KindReceipt at seq%4==3
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ReadKind seqs = %v, want %v", got, want)
	}
}

func appendRefusesGapsAndDisorder(t *testing.T, j Journal) {
	AppendFrames(t, j, 3)
	RefuseGaps(t, j)
	CheckRun(t, ReadAll(t, j, 1), 1, 3)
}

// RefuseGaps appends, to a journal holding Rec(1..3), records that do not
// continue it, and checks each is refused with ErrGap and leaves the height
// at 3; an empty Append is a no-op. A backend's own test then checks that
// nothing refused was stored.
func RefuseGaps(t *testing.T, j Journal) {
	t.Helper()
	if h := j.Height(); h != 3 {
		t.Fatalf("RefuseGaps wants a journal of height 3, got %d", h)
	}
	bad := map[string][]journal.Record{
		"gap":              {Rec(5)},
		"repeat last":      {Rec(3), Rec(4)},
		"restart at zero":  {Rec(0)},
		"restart at one":   {Rec(1)},
		"gap inside frame": {Rec(4), Rec(6)},
		"out of order":     {Rec(5), Rec(4)},
		"duplicate inside": {Rec(4), Rec(4)},
	}
	for name, rs := range bad {
		t.Run(name, func(t *testing.T) {
			err := j.Append(rs)
			if !errors.Is(err, journal.ErrGap) {
				t.Fatalf("Append: %v, want ErrGap", err)
			}
			if h := j.Height(); h != 3 {
				t.Fatalf("height after refused append = %d, want 3", h)
			}
		})
	}
	if err := j.Append(nil); err != nil {
		t.Fatalf("empty Append: %v", err)
	}
}

func waitWakesOnAppend(t *testing.T, j Journal) {
	got := make(chan uint64)
	go func() {
		h, err := j.Wait(context.Background(), 0)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	AppendFrames(t, j, 2)
	if h := <-got; h != 2 {
		t.Fatalf("Wait returned height %d, want 2", h)
	}
	// Already past: returns at once.
	if h, err := j.Wait(context.Background(), 1); h != 2 || err != nil {
		t.Fatalf("Wait(after=1) = %d, %v", h, err)
	}
}

func waitHonoursCancel(t *testing.T, j Journal) {
	AppendFrames(t, j, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := j.Wait(ctx, 1)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v, want context.Canceled", err)
	}
	if j.Height() != 1 {
		t.Fatal("height moved")
	}
}

// Readers follow the writer with Wait and check every read is a gap-free
// prefix of what the writer appends. Run with -race.
func concurrentReadersWhileAppending(t *testing.T, j Journal) {
	const frames = 200
	const readers = 4
	var want uint64
	for i := range frames {
		want += uint64(i%7 + 1)
	}
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seen uint64
			for seen < want {
				h, err := j.Wait(context.Background(), seen)
				if err != nil {
					t.Error(err)
					return
				}
				var got []journal.Record
				err = j.Read(seen+1, func(rc journal.Record) (bool, error) {
					got = append(got, rc)
					return true, nil
				})
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if uint64(len(got)) < h-seen {
					t.Errorf("reader %d: read %d records after %d, height was already %d", r, len(got), seen, h)
					return
				}
				for i, rc := range got {
					if rc.Seq != seen+1+uint64(i) || string(rc.Body) != string(Rec(rc.Seq).Body) {
						t.Errorf("reader %d: record %d has seq %d after %d", r, i, rc.Seq, seen)
						return
					}
				}
				seen += uint64(len(got))
			}
		}()
	}
	for i := range frames {
		AppendFrames(t, j, i%7+1)
	}
	wg.Wait()
}
