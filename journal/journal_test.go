package journal_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
)

func openMem(t testing.TB) (*badger.DB, *journal.Journal) {
	t.Helper()
	db, err := cas.OpenBadgerInMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	j, err := journal.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	return db, j
}

func openDisk(t testing.TB, dir string) (*badger.DB, *journal.Journal) {
	t.Helper()
	db, err := cas.OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(db)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return db, j
}

var kinds = []journal.Kind{journal.KindEvent, journal.KindStep, journal.KindIntent, journal.KindReceipt}

// rec is the deterministic record for seq: tests can check any record read
// back without keeping what was written.
func rec(seq uint64) journal.Record {
	return journal.Record{Seq: seq, Kind: kinds[seq%uint64(len(kinds))], Body: fmt.Appendf(nil, "body of %d", seq)}
}

func recs(from uint64, n int) []journal.Record {
	out := make([]journal.Record, n)
	for i := range out {
		out[i] = rec(from + uint64(i))
	}
	return out
}

// appendFrames appends frames of the given sizes after the current height.
func appendFrames(t testing.TB, j *journal.Journal, sizes ...int) {
	t.Helper()
	for _, n := range sizes {
		if err := j.Append(recs(j.Height()+1, n)); err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(t testing.TB, j *journal.Journal, from uint64) []journal.Record {
	t.Helper()
	var out []journal.Record
	err := j.Read(from, func(r journal.Record) (bool, error) { out = append(out, r); return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRun fails unless got is exactly rec(from), rec(from+1), ..., rec(to).
func checkRun(t testing.TB, got []journal.Record, from, to uint64) {
	t.Helper()
	if want := int(to) - int(from) + 1; len(got) != max(want, 0) {
		t.Fatalf("read %d records from seq %d, want %d (through seq %d)", len(got), from, max(want, 0), to)
	}
	for i, r := range got {
		w := rec(from + uint64(i))
		if r.Seq != w.Seq || r.Kind != w.Kind || string(r.Body) != string(w.Body) {
			t.Fatalf("record %d = {%d %s %q}, want {%d %s %q}", i, r.Seq, r.Kind, r.Body, w.Seq, w.Kind, w.Body)
		}
	}
}

func TestReadRangesAcrossFrames(t *testing.T) {
	_, j := openMem(t)
	if h := j.Height(); h != 0 {
		t.Fatalf("empty journal height = %d", h)
	}
	checkRun(t, readAll(t, j, 0), 1, 0)
	sizes := []int{1, 3, 1, 10, 2, 1, 7}
	appendFrames(t, j, sizes...)
	const total = 25
	if h := j.Height(); h != total {
		t.Fatalf("height = %d, want %d", h, total)
	}
	for from := uint64(0); from <= total+2; from++ {
		checkRun(t, readAll(t, j, from), max(from, 1), total)
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
			checkRun(t, got, from, min(from+uint64(n)-1, total))
		}
	}
	stop := errors.New("stop")
	if err := j.Read(1, func(journal.Record) (bool, error) { return true, stop }); !errors.Is(err, stop) {
		t.Fatalf("Read returned %v, want fn's error", err)
	}
}

func TestReadKind(t *testing.T) {
	_, j := openMem(t)
	appendFrames(t, j, 5, 5, 5)
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

func TestHeightAfterReopen(t *testing.T) {
	dir := t.TempDir()
	db, j := openDisk(t, dir)
	appendFrames(t, j, 1, 100, 1000, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, j = openDisk(t, dir)
	defer db.Close()
	if h := j.Height(); h != 1102 {
		t.Fatalf("height after reopen = %d, want 1102", h)
	}
	checkRun(t, readAll(t, j, 550), 550, 1102)
	appendFrames(t, j, 3)
	checkRun(t, readAll(t, j, 1), 1, 1105)
}

func TestAppendRefusesGapsAndDisorder(t *testing.T) {
	dir := t.TempDir()
	db, j := openDisk(t, dir)
	appendFrames(t, j, 3)
	bad := map[string][]journal.Record{
		"gap":              {rec(5)},
		"repeat last":      {rec(3), rec(4)},
		"restart at zero":  {rec(0)},
		"restart at one":   {rec(1)},
		"gap inside frame": {rec(4), rec(6)},
		"out of order":     {rec(5), rec(4)},
		"duplicate inside": {rec(4), rec(4)},
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
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Nothing refused reached the disk.
	db, j = openDisk(t, dir)
	defer db.Close()
	if h := j.Height(); h != 3 {
		t.Fatalf("height after reopen = %d, want 3", h)
	}
	var keys int
	err := db.View(func(txn *badger.Txn) error {
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
	checkRun(t, readAll(t, j, 1), 1, 3)
}

func TestWaitWakesOnAppend(t *testing.T) {
	_, j := openMem(t)
	got := make(chan uint64)
	go func() {
		h, err := j.Wait(context.Background(), 0)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	appendFrames(t, j, 2)
	if h := <-got; h != 2 {
		t.Fatalf("Wait returned height %d, want 2", h)
	}
	// Already past: returns at once.
	if h, err := j.Wait(context.Background(), 1); h != 2 || err != nil {
		t.Fatalf("Wait(after=1) = %d, %v", h, err)
	}
}

func TestWaitHonoursCancel(t *testing.T) {
	_, j := openMem(t)
	appendFrames(t, j, 1)
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
func TestConcurrentReadersWhileAppending(t *testing.T) {
	_, j := openMem(t)
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
					if rc.Seq != seen+1+uint64(i) || string(rc.Body) != string(rec(rc.Seq).Body) {
						t.Errorf("reader %d: record %d has seq %d after %d", r, i, rc.Seq, seen)
						return
					}
				}
				seen += uint64(len(got))
			}
		}()
	}
	for i := range frames {
		appendFrames(t, j, i%7+1)
	}
	wg.Wait()
}

func TestReadDetectsCorruptFrame(t *testing.T) {
	db, j := openMem(t)
	appendFrames(t, j, 2, 2)
	err := db.Update(func(txn *badger.Txn) error {
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
