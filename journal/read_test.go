package journal_test

import (
	"errors"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// TestReadAt: the record at a seq, whichever frame holds it; a seq past the
// end is ErrCorrupt, one retention dropped ErrTruncated.
func TestReadAt(t *testing.T) {
	m := journal.NewMemory()
	for _, frame := range [][]journal.Record{
		{{Seq: 1, Kind: journal.KindEvent, Body: []byte{1}}, {Seq: 2, Kind: journal.KindStep, Body: []byte{2}}},
		{{Seq: 3, Kind: journal.KindCheckpoint, Body: []byte{3}}},
		{{Seq: 4, Kind: journal.KindEvent, Body: []byte{4}}, {Seq: 5, Kind: journal.KindSnapshot, Body: []byte{5}}},
	} {
		if err := m.Append(frame); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 5; seq++ {
		r, err := journal.ReadAt(m, seq)
		if err != nil || r.Seq != seq || len(r.Body) != 1 || r.Body[0] != byte(seq) {
			t.Errorf("ReadAt(%d) = %+v, %v", seq, r, err)
		}
	}
	if _, err := journal.ReadAt(m, 6); !errors.Is(err, journal.ErrCorrupt) {
		t.Errorf("ReadAt past the end: %v, want ErrCorrupt", err)
	}
	if _, err := m.DropBefore(3, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ReadAt(m, 2); !errors.Is(err, journal.ErrTruncated) {
		t.Errorf("ReadAt of a dropped record: %v, want ErrTruncated", err)
	}
	if r, err := journal.ReadAt(m, 3); err != nil || r.Kind != journal.KindCheckpoint {
		t.Errorf("ReadAt(3) after the drop = %+v, %v", r, err)
	}
}
