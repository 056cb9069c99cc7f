package kernel

import (
	"runtime"
	"sync/atomic"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// Replay reads ahead. Unlike the live loop, replay knows which cells it will
// step next: each step record names its workflow and key. A goroutine reads
// the journal a window ahead of the loop and prefetches those cells
// (cells.Head.Prefetch), so the CAS reads of a cold cell happen on another
// core, and the loop finds the cell in memory. Prefetching changes what is
// in memory, never what a read returns: what replay computes, and the
// records it compares, do not depend on how far ahead the goroutine got, or
// whether it ran at all. A prefetch that fails is dropped; the loop reads
// the cell again itself and stops on the error as it always would.

// readAheadWindow is how many records ahead of the loop the goroutine may
// prefetch: enough to hide a cold read of a few tens of microseconds behind
// the loop's work, few enough that what it prefetched (one hot cache entry
// or one absence note per step) is still there when the loop gets there
// (cells' hot cache holds 4,096 cells by default, its absence notes 4,096).
const readAheadWindow = 512

// readAheadMinLead is how far ahead of the loop a prefetch must start to be
// worth it. A cold cell costs the goroutine about as much as it costs the
// loop, so prefetching the cell the loop is about to step only reads it
// twice; when the goroutine falls that close it skips ahead, leaving those
// cells to the loop and warming the ones after them.
const readAheadMinLead = 64

// readAheadLockstep makes the loop wait, before each record, until the
// goroutine has handled it (tests only, to make its effect deterministic);
// readAheadOff keeps replay from starting the goroutine (tests only, to
// show what it changes).
var readAheadLockstep, readAheadOff bool

type readAhead struct {
	heads   atomic.Pointer[map[string]*cells.Head] // the loop's heads, republished when one is added
	reached atomic.Uint64                          // the last seq the loop drove
	handled atomic.Uint64                          // the last seq the goroutine handled (lockstep)
	wake    chan struct{}                          // the loop moved on
	stop    chan struct{}
	done    chan struct{}
}

// startReadAhead starts the goroutine at seq from; closeReadAhead ends it.
// A nil *readAhead (readAheadOff) does nothing.
func (st *state) startReadAhead(from uint64) *readAhead {
	if readAheadOff {
		return nil
	}
	ra := &readAhead{wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	ra.reached.Store(from - 1)
	st.ahead = ra
	st.publishHeads()
	go ra.run(st.w.journal, from)
	return ra
}

func (st *state) closeReadAhead() {
	if ra := st.ahead; ra != nil {
		close(ra.stop)
		<-ra.done
		st.ahead = nil
	}
}

// addHead enters a new head, and shows it to the read-ahead goroutine.
func (st *state) addHead(name string, h *cells.Head) {
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

// advance tells the goroutine the loop has driven seq (and, in lockstep,
// first waits until the goroutine has handled seq+1).
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

// stepTarget is the part of a step or fault record that names its cell.
type stepTarget struct {
	Workflow string `cbor:"workflow"`
	Key      []byte `cbor:"key,omitempty"`
}

func (ra *readAhead) run(log Log, from uint64) {
	defer close(ra.done)
	minLead := uint64(readAheadMinLead)
	if readAheadLockstep {
		minLead = 0
	}
	_ = log.Read(from, func(r journal.Record) (bool, error) {
		defer ra.handled.Store(r.Seq)
		if r.Kind != journal.KindStep && r.Kind != journal.KindFault {
			return true, nil
		}
		for r.Seq > ra.reached.Load()+readAheadWindow {
			select {
			case <-ra.wake:
			case <-ra.stop:
				return false, nil
			}
		}
		select {
		case <-ra.stop:
			return false, nil
		default:
		}
		if r.Seq <= ra.reached.Load()+minLead {
			// The loop gets there before a prefetch would be done, and
			// would read the cell itself: jump ahead instead.
			return true, nil
		}
		var t stepTarget
		if schemas.UnmarshalTrusted(r.Body, &t) != nil {
			return true, nil // the loop reports a bad record
		}
		h := (*ra.heads.Load())[t.Workflow]
		for h == nil && r.Seq > ra.reached.Load()+1 {
			// A workflow a manifest record before this step installs (the
			// first one, in a replay from genesis): wait for the loop.
			select {
			case <-ra.wake:
			case <-ra.stop:
				return false, nil
			}
			h = (*ra.heads.Load())[t.Workflow]
		}
		if h != nil {
			_ = h.Prefetch(t.Key) // the loop reads it again and reports any error
		}
		return true, nil
	})
}
