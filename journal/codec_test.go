package journal_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// DecodeFrame refuses a frame that is not the one stored under its seq.
func TestDecodeFrameChecksItsSeq(t *testing.T) {
	rec := func(seq uint64) journal.Record {
		return journal.Record{Seq: seq, Kind: journal.KindStep, Body: []byte{1}}
	}
	good := journal.EncodeFrame([]journal.Record{rec(7), rec(8)})
	recs, err := journal.DecodeFrame(7, good)
	if err != nil || len(recs) != 2 || recs[1].Seq != 8 {
		t.Fatalf("DecodeFrame of a good frame = %v, %v", recs, err)
	}
	for name, c := range map[string]struct {
		first uint64
		data  []byte
	}{
		"not cbor":        {7, []byte{0xff}},
		"empty":           {7, journal.EncodeFrame(nil)},
		"other first seq": {6, good},
		"not consecutive": {7, journal.EncodeFrame([]journal.Record{rec(7), rec(9)})},
	} {
		if _, err := journal.DecodeFrame(c.first, c.data); !errors.Is(err, journal.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestScanRefusesGapsAndShortJournals: a range read checks that each frame
// starts right after the one before and that the frames reach the height,
// so a lost or misplaced frame is ErrCorrupt rather than silently skipped.
func TestScanRefusesGapsAndShortJournals(t *testing.T) {
	frame := func(first, last uint64) []journal.Record {
		var recs []journal.Record
		for s := first; s <= last; s++ {
			recs = append(recs, journal.Record{Seq: s, Kind: journal.KindEvent})
		}
		return recs
	}
	var seen []uint64
	collect := func(r journal.Record) (bool, error) { seen = append(seen, r.Seq); return true, nil }

	s := journal.NewScan(1, 5, 1, collect)
	if done, err := s.Frame(frame(1, 2)); done || err != nil {
		t.Fatalf("first frame: done %v, %v", done, err)
	}
	done, err := s.Frame(frame(4, 5)) // seq 3 is missing
	if !done || !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "want seq 3") {
		t.Fatalf("frame after a gap: done %v, err %v", done, err)
	}
	if !slices.Equal(seen, []uint64{1, 2}) {
		t.Fatalf("records handed out: %v, want [1 2]", seen)
	}

	seen = nil
	s = journal.NewScan(1, 5, 1, collect)
	if done, err := s.Frame(frame(1, 3)); done || err != nil {
		t.Fatalf("frame 1..3: done %v, %v", done, err)
	}
	if err := s.End(); !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "ends at seq 3, height is 5") {
		t.Fatalf("frames that stop short of the height: %v", err)
	}
	s = journal.NewScan(1, 3, 1, collect)
	if _, err := s.Frame(frame(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.End(); err != nil {
		t.Fatalf("frames that reach the height: %v", err)
	}
}
