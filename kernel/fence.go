package kernel

import (
	"github.com/aos-kernel/aos/schemas"
)

// What a trusted executor can make the journal grow by is bounded here.
//
// A receipt for an intent that is not pending journals at most one record,
// and only for an intent this world settled recently without a receipt (its
// instance failed): that late receipt is journaled once, as a drop, so the
// intent's trace shows what the executor finally said. Every other receipt
// for an intent that is not pending journals nothing: a second late receipt,
// any receipt for an intent a receipt settled (a duplicate), and one for an
// intent this world never issued or settled too long ago to remember (an
// unknown intent). A receipt or frame for an intent an operator cancelled
// (cancel.go) is refused with ErrIntentCancelled, naming the cancel's seq,
// and journals nothing. Stream frames are bounded per intent in number
// (Limits.MaxFramesPerIntent) and each in size (Limits.MaxFrameBytes).
//
// The fence is a pure function of the journal: it changes only where a
// record is journaled (settleIntent, for the receipt, fault or cancel that
// settles an intent; the drop and frame records), by the same code live and in
// replay, so a reopened world judges the next receipt exactly as the world
// that wrote the journal would have.
//
// Memory: a remembered settled intent costs its map slot (a 32-byte hash
// and a 40-byte settledIntent) plus map overhead, and 32 bytes in the fifo:
// 193 bytes measured (BenchmarkFenceMemory), so the default 65,536 cost
// about 12 MiB. Frame counts cost a map entry per pending intent with
// frames, forgotten when it settles.

// settledIntent is what the world remembers of a recently settled intent.
type settledIntent struct {
	effect    string // the intent's effect
	seq       uint64 // the record that settled it: its receipt, its cancel, or the fault that failed its instance
	dropSeq   uint64 // the drop journaled for its one late receipt; 0 if none
	receipt   bool   // settled by a receipt (else by a cancel or its instance's failure)
	cancelled bool   // settled by an operator's cancel: seq is the cancel record
}

// intentFence remembers the last Limits.MaxSettledIntents settled intents,
// evicting the oldest first (settlement order, which is journal order), and
// counts the frames journaled for each pending intent.
type intentFence struct {
	settled map[schemas.Hash]settledIntent
	fifo    []schemas.Hash // settled hashes in settlement order; fifo[head:] are live
	head    int
	frames  map[schemas.Hash]int
}

// noteSettled remembers intent h, settled by the record at seq, and forgets
// the oldest settled intents beyond capacity.
func (f *intentFence) noteSettled(h schemas.Hash, e settledIntent, capacity int) {
	if f.settled == nil {
		f.settled = map[schemas.Hash]settledIntent{}
	}
	if _, ok := f.settled[h]; !ok { // an intent settles once; be safe anyway
		f.fifo = append(f.fifo, h)
	}
	f.settled[h] = e
	for len(f.fifo)-f.head > capacity {
		delete(f.settled, f.fifo[f.head])
		f.head++
	}
	if f.head > 1024 && f.head > len(f.fifo)/2 { // keep the dead prefix bounded
		n := copy(f.fifo, f.fifo[f.head:])
		f.fifo, f.head = f.fifo[:n], 0
	}
}

// lookup finds a remembered settled intent.
func (f *intentFence) lookup(h schemas.Hash) (settledIntent, bool) {
	e, ok := f.settled[h]
	return e, ok
}

// settledByReceipt marks remembered intent h as settled by a receipt.
func (f *intentFence) settledByReceipt(h schemas.Hash) {
	if e, ok := f.settled[h]; ok {
		e.receipt = true
		f.settled[h] = e
	}
}

// noteCancelled marks remembered intent h as settled by an operator's
// cancel (the record that settled it): whatever an executor says of it
// afterwards is refused.
func (f *intentFence) noteCancelled(h schemas.Hash) {
	if e, ok := f.settled[h]; ok {
		e.cancelled = true
		f.settled[h] = e
	}
}

// noteDrop records the drop journaled at seq for a late receipt for h. Only
// the first drop for an intent settled without a receipt counts: replay of a
// journal written before drops were bounded re-emits every drop it holds.
func (f *intentFence) noteDrop(h schemas.Hash, seq uint64) {
	if e, ok := f.settled[h]; ok && !e.receipt && e.dropSeq == 0 {
		e.dropSeq = seq
		f.settled[h] = e
	}
}

// frameCount is how many frames are journaled for pending intent h.
func (f *intentFence) frameCount(h schemas.Hash) int { return f.frames[h] }

// noteFrame counts a frame journaled for pending intent h.
func (f *intentFence) noteFrame(h schemas.Hash) {
	if f.frames == nil {
		f.frames = map[schemas.Hash]int{}
	}
	f.frames[h]++
}

// forgetFrames drops h's frame count when it settles.
func (f *intentFence) forgetFrames(h schemas.Hash) { delete(f.frames, h) }

// rememberedSettled is how many settled intents the fence remembers.
func (f *intentFence) rememberedSettled() int { return len(f.fifo) - f.head }
