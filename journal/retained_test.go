package journal_test

import (
	"errors"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// TestReadRetained: a read from below First starts at First and says so; a
// read from above it starts where asked; a drop that moves First as the read
// starts is followed to the new First; a plain Read from below First is
// still a *Truncation naming First.
func TestReadRetained(t *testing.T) {
	m := journal.NewMemory()
	for seq := uint64(1); seq <= 10; seq++ {
		if err := m.Append([]journal.Record{{Seq: seq, Kind: journal.KindStep, Body: []byte{byte(seq)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.DropBefore(5, nil); err != nil {
		t.Fatal(err)
	}
	read := func(j journal.Retained, from uint64) (uint64, []uint64, error) {
		var seqs []uint64
		start, err := journal.ReadRetained(j, from, func(r journal.Record) (bool, error) {
			seqs = append(seqs, r.Seq)
			return true, nil
		})
		return start, seqs, err
	}
	for _, c := range []struct{ from, start, first uint64 }{{0, 5, 5}, {1, 5, 5}, {4, 5, 5}, {7, 7, 7}} {
		start, seqs, err := read(m, c.from)
		if err != nil || start != c.start || len(seqs) == 0 || seqs[0] != c.first || seqs[len(seqs)-1] != 10 {
			t.Fatalf("ReadRetained from %d: start %d, seqs %v, %v; want start %d, seqs %d..10", c.from, start, seqs, err, c.start, c.first)
		}
	}
	err := m.Read(2, func(journal.Record) (bool, error) { return true, nil })
	var tr *journal.Truncation
	if !errors.As(err, &tr) || tr.First != 5 || tr.From != 2 || !errors.Is(err, journal.ErrTruncated) {
		t.Fatalf("Read below First: %v, want a *Truncation at 5 from 2", err)
	}

	// First moves between First() and Read: the read follows it.
	racing := &dropAtRead{Memory: m, before: 8}
	start, seqs, err := read(racing, 0)
	if err != nil || start != 8 || len(seqs) != 3 || seqs[0] != 8 {
		t.Fatalf("ReadRetained across a drop: start %d, seqs %v, %v; want 8, 8..10", start, seqs, err)
	}
}

// dropAtRead drops the records before before the first time it is read,
// as a collection running beside a reader does.
type dropAtRead struct {
	*journal.Memory
	before uint64
	done   bool
}

func (d *dropAtRead) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	if !d.done {
		d.done = true
		if _, err := d.Memory.DropBefore(d.before, nil); err != nil {
			return err
		}
	}
	return d.Memory.Read(from, fn)
}
