package journal_test

import (
	"errors"
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
