package receipts

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/aos-kernel/aos/schemas"
)

// Fence errors.
var (
	ErrUnknownIntent = errors.New("receipts: receipt for an intent that is not open")
	ErrSettled       = errors.New("receipts: intent already settled")
	ErrAlreadyOpen   = errors.New("receipts: intent already open")
	ErrFrameOrder    = errors.New("receipts: stream frame out of order")
)

// Fence tracks which intents may still be settled. An intent is opened
// once (when the journal records it), settled at most once (when the
// journal records its receipt, its rejection, or its drop), and from then
// on every receipt for it is refused with ErrSettled. A receipt for an
// intent never opened, or settled so long ago that Forget dropped it, is
// refused with ErrUnknownIntent.
//
// Safety does not rest on the settled set: a settled intent is no longer
// pending, so any receipt for it is refused either way. The settled set
// only makes the refusal precise (a duplicate the kernel journals as
// dropped, rather than a stray), which is why Forget is always safe.
//
// Memory: 32 bytes (hash) plus map overhead per pending intent, and 40
// bytes (hash plus settle seq) plus map overhead per remembered settled
// intent, roughly 80-100 bytes each in a Go map. Call Forget after a
// snapshot to bound it.
//
// Results depend only on the order of calls, so a kernel that calls the
// Fence in journal order gets the same answers on replay. Methods are safe
// for concurrent use (the lock is uncontended in the kernel loop, and lets
// HTTP handlers pre-check cheaply); each call is atomic.
type Fence struct {
	mu      sync.Mutex
	pending map[schemas.Hash]struct{}
	settled map[schemas.Hash]uint64 // hash -> journal seq of the settlement
}

// NewFence returns an empty fence.
func NewFence() *Fence {
	return &Fence{pending: map[schemas.Hash]struct{}{}, settled: map[schemas.Hash]uint64{}}
}

// Open marks intent h pending. Opening an intent twice, or one already
// settled, is an error (intent hashes bind the emitting step, so this is a
// kernel bug, not outside input).
func (f *Fence) Open(h schemas.Hash) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pending[h]; ok {
		return fmt.Errorf("%w: %s", ErrAlreadyOpen, h)
	}
	if _, ok := f.settled[h]; ok {
		return fmt.Errorf("%w: %s", ErrSettled, h)
	}
	f.pending[h] = struct{}{}
	return nil
}

// Check reports whether a receipt for h may be accepted now: nil if h is
// pending, else an error wrapping ErrSettled or ErrUnknownIntent. It
// changes nothing.
func (f *Fence) Check(h schemas.Hash) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.check(h)
}

func (f *Fence) check(h schemas.Hash) error {
	if _, ok := f.pending[h]; ok {
		return nil
	}
	if seq, ok := f.settled[h]; ok {
		return fmt.Errorf("%w: intent %s settled at seq %d", ErrSettled, h, seq)
	}
	return fmt.Errorf("%w: intent %s", ErrUnknownIntent, h)
}

// Settle moves h from pending to settled, recording seq (the journal seq
// of the record that settles it). It returns true only for the first
// settlement of an open intent; for an intent already settled or never
// opened it returns false and changes nothing.
func (f *Fence) Settle(h schemas.Hash, seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pending[h]; !ok {
		return false
	}
	delete(f.pending, h)
	f.settled[h] = seq
	return true
}

// Forget drops settled intents whose settlement seq is below before. Late
// duplicates for them are then refused as ErrUnknownIntent rather than
// ErrSettled. It returns how many were dropped.
func (f *Fence) Forget(before uint64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for h, seq := range f.settled {
		if seq < before {
			delete(f.settled, h)
			n++
		}
	}
	return n
}

// Pending returns the open intents in hash order (for snapshots and status).
func (f *Fence) Pending() []schemas.Hash {
	f.mu.Lock()
	out := make([]schemas.Hash, 0, len(f.pending))
	for h := range f.pending {
		out = append(out, h)
	}
	f.mu.Unlock()
	sortHashes(out)
	return out
}

// Len returns the number of pending and of remembered settled intents.
func (f *Fence) Len() (pending, settled int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending), len(f.settled)
}

func sortHashes(hs []schemas.Hash) {
	sort.Slice(hs, func(i, j int) bool { return string(hs[i][:]) < string(hs[j][:]) })
}

// FrameSeq orders stream frames (sys/EffectStreamFrame@1) per intent.
// Sequences are strictly increasing and start at 1; gaps are allowed
// (frames are non-authoritative progress, and an executor that retries or
// sheds load may skip some), but a repeated or older seq is refused, so a
// workflow never sees progress go backwards or twice. The kernel checks the
// Fence first (frames for intents not pending are refused there) and calls
// Close when the intent settles.
//
// Memory: 32 + 8 bytes plus map overhead per intent with frames. Safe for
// concurrent use; results depend only on call order.
type FrameSeq struct {
	mu   sync.Mutex
	last map[schemas.Hash]uint64
}

// NewFrameSeq returns an empty tracker.
func NewFrameSeq() *FrameSeq { return &FrameSeq{last: map[schemas.Hash]uint64{}} }

// Accept records frame seq for intent h if seq is greater than the last
// accepted one (0 before any); otherwise it returns an error wrapping
// ErrFrameOrder and changes nothing.
func (s *FrameSeq) Accept(h schemas.Hash, seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.last[h]
	if seq <= last {
		if last == 0 {
			return fmt.Errorf("%w: intent %s: frame seq %d, sequences start at 1", ErrFrameOrder, h, seq)
		}
		return fmt.Errorf("%w: intent %s: frame seq %d, last accepted %d (want greater)", ErrFrameOrder, h, seq, last)
	}
	s.last[h] = seq
	return nil
}

// Last returns the last accepted seq for h (0 if none).
func (s *FrameSeq) Last(h schemas.Hash) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[h]
}

// Close forgets h; call it when the intent settles.
func (s *FrameSeq) Close(h schemas.Hash) {
	s.mu.Lock()
	delete(s.last, h)
	s.mu.Unlock()
}
