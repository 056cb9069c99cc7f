package kernel

import (
	"runtime"
	"sync/atomic"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Replay reads ahead. Unlike the live loop, replay knows what comes next:
// the journal. Two goroutines run ahead of the loop:
//
//   - the reader reads the journal once and decodes the bodies of the
//     records the loop decodes most (steps, faults, events), handing the
//     loop batches of records with their bodies decoded; the loop still
//     compares every record it re-produces with the journal's bytes, which
//     the reader hands over with the decoded body;
//   - the prefetchers (readAheadPrefetchers of them, each taking whole
//     batches) take the cell each step or fault names from the reader and
//     prefetch it (cells.Head.Prefetch), so the CAS reads of a cold cell
//     happen on another core, and the loop finds the cell in memory.
//
// Neither changes what replay computes. A decoded body is a pure function
// of the record's bytes, decoded by the same function the loop calls when
// it reads the journal itself (readAheadOff), so a body that does not
// decode stops replay with the same report at the same record. Prefetching
// changes what is in memory, never what a read returns: what replay
// computes, and the records it compares, do not depend on how far ahead
// either goroutine got. A prefetch that fails is dropped; the loop reads
// the cell again itself and stops on the error as it always would. A read
// of the journal that fails (a corrupt frame) reaches the loop after every
// record before it, as it would reading the journal itself.

// readAheadBatch is how many records the reader hands over at a time: a
// channel operation per record would cost the loop more than decoding.
const readAheadBatch = 64

// readAheadWindow is how many records ahead of the loop the reader may get
// (the batches in the channel, plus the one it is filling). The loop now
// waits for the reader when it has nothing left, so the window must outlast
// the reader being descheduled for a scheduler slice (10 ms of a loop
// replaying 100,000 records/s is 1,000 records), and hide a cold cell read
// of a few tens of microseconds behind the loop's work; it must stay small
// enough that what the prefetchers got for it (one hot cache entry or one
// absence note per step or fault) is still there when the loop gets there
// (cells' hot cache holds 4,096 cells by default, its absence notes 4,096).
const readAheadWindow = 2048

// readAheadMinLead is how far ahead of the loop a prefetch must start to be
// worth it. A cold cell costs the prefetcher about as much as it costs the
// loop, so prefetching the cell the loop is about to step only reads it
// twice; when the prefetcher falls that close it skips ahead, leaving those
// cells to the loop and warming the ones after them.
const readAheadMinLead = 64

// readAheadPrefetchers is how many prefetchers take the reader's batches,
// each its own: a cold cell read waits on the store (a commit in flight, a
// page of a table) as much as it computes, and the loop overtakes a lone
// prefetcher that waits.
const readAheadPrefetchers = 2

// readAheadLockstep makes the loop wait, before each record, until the
// prefetcher has handled it (tests only, to make its effect deterministic);
// readAheadOff keeps replay from starting either goroutine: the loop reads
// and decodes the journal itself (tests only, to show what they change).
var readAheadLockstep, readAheadOff bool

// replayItem is one journal record as the loop replays it: the record (its
// bytes are what the loop compares with what it re-produces) and, for a
// step, a fault or an event, its body decoded (err: it does not decode).
type replayItem struct {
	journal.Record
	step  *records.StepRec
	fault *records.FaultRec
	event *records.EventRec
	err   error
}

// decodeReplayItem decodes the body of a step, fault or event record. The
// reader calls it ahead of the loop, and the loop itself when it reads the
// journal (readAheadOff): the same function, so the same result.
func decodeReplayItem(r journal.Record) replayItem {
	it := replayItem{Record: r}
	switch r.Kind {
	case journal.KindStep:
		it.step = new(records.StepRec)
		it.err = schemas.UnmarshalTrusted(r.Body, it.step)
	case journal.KindFault:
		it.fault = new(records.FaultRec)
		it.err = schemas.UnmarshalTrusted(r.Body, it.fault)
	case journal.KindEvent:
		it.event = new(records.EventRec)
		it.err = schemas.UnmarshalTrusted(r.Body, it.event)
	}
	return it
}

// target names the cell of the record at seq, for the prefetcher (wf is
// empty for a record that names none).
type target struct {
	seq uint64
	wf  string
	key []byte
}

// target is the cell a decoded step or fault names.
func (it *replayItem) target() target {
	t := target{seq: it.Seq}
	switch {
	case it.err != nil: // the loop reports a bad record
	case it.step != nil:
		t.wf, t.key = it.step.Workflow, it.step.Key
	case it.fault != nil:
		t.wf, t.key = it.fault.Workflow, it.fault.Key
	}
	return t
}

type readAhead struct {
	heads   atomic.Pointer[map[string]*cells.Head] // the loop's heads, republished when one is added
	reached atomic.Uint64                          // the last seq the loop drove
	handled atomic.Uint64                          // the last seq the prefetcher handled (lockstep)
	wake    chan struct{}                          // the loop moved on

	feed    chan []replayItem // reader -> loop; closed after the last record
	readErr error             // why the reader's read ended early; set before feed is closed
	targets chan []target     // reader -> prefetcher; closed when the reader ends

	stop       chan struct{}
	readerDone chan struct{}
	done       chan struct{} // every prefetcher ended
	running    atomic.Int32  // prefetchers still running
}

// startReadAhead starts the reader and the prefetcher at seq from;
// closeReadAhead ends them. A nil *readAhead (readAheadOff) does nothing.
func (st *state) startReadAhead(from uint64) *readAhead {
	if readAheadOff {
		return nil
	}
	ra := &readAhead{
		wake:       make(chan struct{}, 1),
		feed:       make(chan []replayItem, readAheadWindow/readAheadBatch-1),
		targets:    make(chan []target, 2*readAheadWindow/readAheadBatch),
		stop:       make(chan struct{}),
		readerDone: make(chan struct{}),
		done:       make(chan struct{}),
	}
	ra.reached.Store(from - 1)
	st.ahead = ra
	st.publishHeads()
	go ra.read(st.w.journal, from)
	n := readAheadPrefetchers
	if readAheadLockstep {
		n = 1 // handled must advance in order
	}
	ra.running.Store(int32(n))
	for range n {
		go ra.prefetch()
	}
	return ra
}

func (st *state) closeReadAhead() {
	if ra := st.ahead; ra != nil {
		close(ra.stop)
		<-ra.readerDone
		<-ra.done
		st.ahead = nil
	}
}

// addHead enters a new head, and shows it to the prefetcher. A head that
// replay creates writes only the cell objects the store lacks until replay
// ends (cells.Head.WriteMissingOnly): replay re-creates the index versions
// the live world wrote, so nearly all of them are stored already.
func (st *state) addHead(name string, h *cells.Head) {
	h.WriteMissingOnly(st.replaying)
	st.heads[name] = h
	st.publishHeads()
}

func (st *state) publishHeads() {
	if st.ahead == nil {
		return
	}
	m := make(map[string]*cells.Head, len(st.heads))
	for n, h := range st.heads {
		m[n] = h
	}
	st.ahead.heads.Store(&m)
}

// readJournal hands fn every record from seq from on: read and decoded by
// the reader when it runs, else read from the journal and decoded here.
// Either way fn sees the same records, decoded the same, and the same error
// ends the read.
func (st *state) readJournal(ra *readAhead, from uint64, fn func(*replayItem) (bool, error)) error {
	if ra == nil {
		return st.w.journal.Read(from, func(r journal.Record) (bool, error) {
			it := decodeReplayItem(r)
			return fn(&it)
		})
	}
	for batch := range ra.feed {
		for i := range batch {
			if more, err := fn(&batch[i]); err != nil || !more {
				return err
			}
		}
	}
	return ra.readErr
}

// advance tells the prefetcher the loop has driven seq.
func (ra *readAhead) advance(seq uint64) {
	if ra == nil {
		return
	}
	ra.reached.Store(seq)
	if seq%64 == 0 {
		select {
		case ra.wake <- struct{}{}:
		default:
		}
	}
}

// await is the lockstep wait before the loop drives seq.
func (ra *readAhead) await(seq uint64) {
	if ra == nil || !readAheadLockstep {
		return
	}
	select {
	case ra.wake <- struct{}{}:
	default:
	}
	for ra.handled.Load() < seq {
		select {
		case <-ra.done:
			return
		default:
			runtime.Gosched()
		}
	}
}

// read is the reader: it reads the journal once, from seq from, decodes
// each record and hands the loop batches of them, and the prefetcher the
// cells they name. The loop's channel bounds how far ahead it gets; the
// prefetcher's batch is dropped when the prefetcher is that far behind
// (it would skip those cells anyway), except in lockstep.
func (ra *readAhead) read(log Log, from uint64) {
	defer close(ra.readerDone)
	defer close(ra.targets)
	defer close(ra.feed)
	var batch []replayItem
	var ts []target
	send := func() bool {
		if len(ts) > 0 {
			if readAheadLockstep {
				select {
				case ra.targets <- ts:
				case <-ra.stop:
					return false
				}
			} else {
				select {
				case ra.targets <- ts:
				default:
				}
			}
		}
		select {
		case ra.feed <- batch:
		case <-ra.stop:
			return false
		}
		batch, ts = make([]replayItem, 0, readAheadBatch), nil
		return true
	}
	batch = make([]replayItem, 0, readAheadBatch)
	err := log.Read(from, func(r journal.Record) (bool, error) {
		it := decodeReplayItem(r)
		if t := it.target(); t.wf != "" || readAheadLockstep {
			ts = append(ts, t)
		}
		batch = append(batch, it)
		if len(batch) == readAheadBatch {
			return send(), nil
		}
		return true, nil
	})
	if len(batch) > 0 { // the records before a failed frame too
		send()
	}
	ra.readErr = err // the loop reads it after feed is closed
}

// prefetch is the prefetcher: it prefetches the cell of each target the
// reader hands it that is far enough ahead of the loop.
func (ra *readAhead) prefetch() {
	defer func() {
		if ra.running.Add(-1) == 0 {
			close(ra.done)
		}
	}()
	minLead := uint64(readAheadMinLead)
	if readAheadLockstep {
		minLead = 0
	}
	for ts := range ra.targets {
		for _, t := range ts {
			if !ra.prefetchOne(t, minLead) {
				return
			}
			ra.handled.Store(t.seq)
		}
	}
}

// prefetchOne prefetches t's cell unless the loop is too close to it; it
// is false when replay ends.
func (ra *readAhead) prefetchOne(t target, minLead uint64) bool {
	select {
	case <-ra.stop:
		return false
	default:
	}
	if t.wf == "" || t.seq <= ra.reached.Load()+minLead {
		// The loop gets there before a prefetch would be done, and would
		// read the cell itself: skip ahead instead.
		return true
	}
	h := (*ra.heads.Load())[t.wf]
	for h == nil && t.seq > ra.reached.Load()+1 {
		// A workflow a manifest record before this step installs (the
		// first one, in a replay from genesis): wait for the loop.
		select {
		case <-ra.wake:
		case <-ra.stop:
			return false
		}
		h = (*ra.heads.Load())[t.wf]
	}
	if h != nil {
		_ = h.Prefetch(t.key) // the loop reads it again and reports any error
	}
	return true
}
