package journal

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// Memory is a journal held in memory, for unit tests: the kernel's journal
// port with no storage engine. It keeps the semantics of the Badger journal
// (gap check, frames, reads bounded by the height at the call, Wait on a
// channel) and keeps each frame as its encoded bytes, so every test on it
// runs the frame codec too. Nothing is durable and nothing fails, so it has
// no sticky failure; wrap it to inject one.
type Memory struct {
	tip Tip

	mu     sync.Mutex // serializes Append; guards frames and marks
	frames []memFrame // in seq order; a frame never changes once appended
	marks  map[Kind][]uint64
}

type memFrame struct {
	first uint64 // seq of the frame's first record
	data  []byte // EncodeFrame of its records
}

// NewMemory returns an empty journal.
func NewMemory() *Memory { return &Memory{} }

// Height is the last appended sequence number, 0 when the journal is empty.
func (m *Memory) Height() uint64 { return m.tip.Height() }

// Wait blocks until Height() > after or ctx is done (see Tip.Wait).
func (m *Memory) Wait(ctx context.Context, after uint64) (uint64, error) {
	return m.tip.Wait(ctx, after)
}

// Append stores recs as one frame. recs[0].Seq must be Height()+1 and the
// seqs consecutive, or Append returns ErrGap and stores nothing. Appending no
// records is a no-op. recs is not retained.
func (m *Memory) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := CheckContinues(m.tip.Height(), recs); err != nil {
		return err
	}
	m.frames = append(m.frames, memFrame{first: recs[0].Seq, data: EncodeFrame(recs)})
	for _, r := range recs {
		if Indexed(r.Kind) {
			if m.marks == nil {
				m.marks = map[Kind][]uint64{}
			}
			m.marks[r.Kind] = append(m.marks[r.Kind], r.Seq)
		}
	}
	m.tip.Advance(recs[len(recs)-1].Seq)
	return nil
}

// Read calls fn for every record with seq >= from, in order, until fn
// returns false or an error (which Read returns). Records appended after the
// call are not seen. from 0 reads from the start. fn may Append.
func (m *Memory) Read(from uint64, fn func(Record) (bool, error)) error {
	height := m.Height()
	from = max(from, 1)
	if from > height {
		return nil
	}
	// Frames are only ever appended, and every frame up to height was
	// appended before the height moved: this slice holds them all.
	m.mu.Lock()
	frames := m.frames
	m.mu.Unlock()
	i := sort.Search(len(frames), func(i int) bool { return frames[i].first > from }) - 1
	if i < 0 {
		return fmt.Errorf("%w: no frame holds seq %d", ErrCorrupt, from)
	}
	s := NewScan(from, height, frames[i].first, fn)
	for _, f := range frames[i:] {
		recs, err := DecodeFrame(f.first, f.data)
		if err != nil {
			return err
		}
		if done, err := s.Frame(recs); done {
			return err
		}
	}
	return s.End()
}

// ReadKind is Read restricted to records of the given kinds.
func (m *Memory) ReadKind(from uint64, kinds []Kind, fn func(Record) (bool, error)) error {
	return m.Read(from, OnlyKinds(kinds, fn))
}

// Marks calls fn with the seq of every record of kind k, newest first,
// until fn returns false or an error (which Marks returns). k must be an
// Indexed kind; others have no marks.
func (m *Memory) Marks(k Kind, fn func(seq uint64) (bool, error)) error {
	m.mu.Lock()
	seqs := m.marks[k]
	m.mu.Unlock()
	for i := len(seqs) - 1; i >= 0; i-- {
		if more, err := fn(seqs[i]); err != nil || !more {
			return err
		}
	}
	return nil
}

// First is the lowest seq the journal holds: 1 (Memory keeps everything).
func (m *Memory) First() uint64 { return 1 }
