package journal

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Memory is a journal held in memory, for unit tests: the kernel's journal
// port with no storage engine. It keeps the semantics of the Badger journal
// (gap check, frames, reads bounded by the height at the call, Wait on a
// channel, retention by whole frames) and keeps each frame as its encoded
// bytes, so every test on it runs the frame codec too. Nothing is durable
// and nothing fails, so it has no sticky failure; wrap it to inject one.
type Memory struct {
	tip Tip

	dropMu sync.Mutex // serializes DropBefore; held while archive runs

	mu     sync.Mutex // serializes Append; guards frames, marks and dropped
	frames []memFrame // in seq order; a frame never changes once appended
	marks  map[Kind][]uint64
	// dropped is the last seq retention removed (0: none), so the zero
	// value is a journal that holds everything from seq 1.
	dropped uint64
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
// call are not seen. from 0 reads from the start. A from below First (the
// start included, once retention dropped it) is ErrTruncated. fn may Append.
func (m *Memory) Read(from uint64, fn func(Record) (bool, error)) error {
	height := m.Height()
	from = max(from, 1)
	if from > height {
		return nil
	}
	// Frames are only ever appended or dropped from the front, each time
	// into a new slice, and every frame up to height was appended before
	// the height moved: this slice holds them all from First on.
	m.mu.Lock()
	frames, first := m.frames, m.dropped+1
	m.mu.Unlock()
	if from < first {
		return TruncatedError(first, from)
	}
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
// Indexed kind; others have no marks. Records retention dropped have none.
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

// First is the lowest seq the journal holds: 1 until DropBefore drops a
// frame, then the first seq of the oldest frame kept (Height()+1 once every
// frame was dropped).
func (m *Memory) First() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped + 1
}

// DropBefore removes, oldest first, every whole frame whose last record's
// seq is below before, and their marks; a frame holding before (or
// straddling it) is kept, so First() may stay below before. When archive
// is not nil it is called with each frame's first seq and its encoded
// bytes before that frame is removed; frame must not be changed or kept
// after the call. An error from archive stops the drop: that frame and
// the later ones stay, the earlier ones (already archived) are removed,
// and the error is returned with the stats of what was removed. before
// past Height()+1 is an error and removes nothing; before <= First()
// removes nothing. The height is never touched. archive may read the
// journal and Append to it, but must not call DropBefore.
func (m *Memory) DropBefore(before uint64, archive func(first uint64, frame []byte) error) (DropStats, error) {
	m.dropMu.Lock()
	defer m.dropMu.Unlock()
	m.mu.Lock()
	frames, height := m.frames, m.tip.Height()
	m.mu.Unlock()
	if err := CheckDropBefore(before, height); err != nil {
		return DropStats{First: m.First()}, err
	}
	var st DropStats
	var archErr error
	n, newFirst := 0, uint64(0)
	for ; n < len(frames); n++ {
		f := frames[n]
		next := height + 1 // the seq after the frame's last
		if n+1 < len(frames) {
			next = frames[n+1].first
		}
		if next > before {
			break // its last record is at or past before: kept
		}
		if archive != nil {
			if err := archive(f.first, f.data); err != nil {
				archErr = fmt.Errorf("journal: drop before seq %d: archive the frame at seq %d: %w", before, f.first, err)
				break
			}
		}
		st.Frames++
		st.Records += int(next - f.first)
		st.Bytes += int64(len(f.data))
		newFirst = next
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > 0 {
		// New slices, never a change in place: a Read or Marks running
		// meanwhile keeps the slice it took.
		m.frames = slices.Clone(m.frames[n:])
		for k, seqs := range m.marks {
			i := sort.Search(len(seqs), func(i int) bool { return seqs[i] >= newFirst })
			m.marks[k] = slices.Clone(seqs[i:])
		}
		m.dropped = newFirst - 1
	}
	st.First = m.dropped + 1
	return st, archErr
}
