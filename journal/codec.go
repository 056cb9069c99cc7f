package journal

import (
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/schemas"
)

// What every backend needs to store and serve frames the same way: the
// checked decoder, the continuity check of an Append, and the walk of a
// range read across frames. A backend only finds frames (by the seq of
// their first record) and keeps their bytes.

// DecodeFrame decodes the frame a backend stored under first (the seq of its
// first record, which a backend keeps beside the bytes, e.g. in its key) and
// checks it against first: not empty, first seq equal to first, seqs
// consecutive. Anything else is ErrCorrupt naming first. v is not retained:
// the records' bodies are copies, so v may be a buffer the backend reuses.
func DecodeFrame(first uint64, v []byte) ([]Record, error) {
	recs, ok := decodeFrameFast(v)
	if !ok {
		// The library says what is wrong with a frame the fast path refused.
		if err := schemas.UnmarshalTrusted(v, &recs); err != nil {
			return nil, fmt.Errorf("%w: frame at seq %d: %v", ErrCorrupt, first, err)
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: frame at seq %d is empty", ErrCorrupt, first)
	}
	if recs[0].Seq != first {
		return nil, fmt.Errorf("%w: frame keyed at seq %d starts at seq %d", ErrCorrupt, first, recs[0].Seq)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			return nil, fmt.Errorf("%w: frame at seq %d: seq %d follows seq %d", ErrCorrupt, first, recs[i].Seq, recs[i-1].Seq)
		}
	}
	return recs, nil
}

// CheckContinues refuses, with ErrGap, records that do not continue a
// journal of the given height exactly: the first seq must be height+1 and
// the rest consecutive. recs must not be empty.
func CheckContinues(height uint64, recs []Record) error {
	if recs[0].Seq != height+1 {
		return fmt.Errorf("%w: first record has seq %d, want %d (height %d)", ErrGap, recs[0].Seq, height+1, height)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Seq != recs[i-1].Seq+1 {
			return fmt.Errorf("%w: record %d has seq %d after seq %d", ErrGap, i, recs[i].Seq, recs[i-1].Seq)
		}
	}
	return nil
}

// Scan is one range read walking frames in seq order: it hands fn the
// records from From through the height at the start of the read, and checks
// that each frame starts right after the previous one, so a missing or
// misplaced frame is ErrCorrupt rather than a silent gap.
type Scan struct {
	from, height uint64
	next         uint64 // the seq the next frame must start with
	fn           func(Record) (bool, error)
}

// NewScan starts a read of records from..height whose first frame (the one
// holding from) starts at seq start.
func NewScan(from, height, start uint64, fn func(Record) (bool, error)) *Scan {
	return &Scan{from: from, height: height, next: start, fn: fn}
}

// Frame hands the records of the next frame to fn. done is true once the
// read is over: fn stopped it or failed (err is fn's error), the frame went
// past the height, or the frame is not the one expected (err is ErrCorrupt).
func (s *Scan) Frame(recs []Record) (done bool, err error) {
	if recs[0].Seq != s.next {
		return true, fmt.Errorf("%w: frame at seq %d, want seq %d", ErrCorrupt, recs[0].Seq, s.next)
	}
	for _, r := range recs {
		if r.Seq > s.height {
			return true, nil
		}
		if r.Seq < s.from {
			continue
		}
		more, err := s.fn(r)
		if err != nil || !more {
			return true, err
		}
	}
	s.next = recs[len(recs)-1].Seq + 1
	return false, nil
}

// End is called when the frames ran out before Frame said done: the frames
// must then have reached the height.
func (s *Scan) End() error {
	if s.next <= s.height {
		return fmt.Errorf("%w: journal ends at seq %d, height is %d", ErrCorrupt, s.next-1, s.height)
	}
	return nil
}

// OnlyKinds wraps fn for a read restricted to records of the given kinds
// (the backends' ReadKind).
func OnlyKinds(kinds []Kind, fn func(Record) (bool, error)) func(Record) (bool, error) {
	return func(r Record) (bool, error) {
		if !slices.Contains(kinds, r.Kind) {
			return true, nil
		}
		return fn(r)
	}
}
