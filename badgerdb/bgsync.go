package badgerdb

import (
	"fmt"
	"sync/atomic"
)

// bgSyncBytes is how many bytes the tail takes before an Append asks the
// background syncer for a Badger sync.
const bgSyncBytes = 1 << 20

// bgSyncer syncs Badger on a goroutine of its own, off the append path.
//
// Why: Badger is written unsynced (doc.go, "Durability"), so its dirty pages
// pile up between the syncs an Append must make itself: a checkpoint's, once
// the tail holds 16 MiB, and one before records that name objects written
// since the last sync (a snapshot's). Each such sync wrote back everything
// since the one before, up to 16 MiB of memtable WAL and value log, while the
// committer, and every request waiting on it, stood still: 17-22 ms at
// C=256 in aosd bench (docs/PERFORMANCE.md). Syncing in the background every
// bgSyncBytes of tail leaves those syncs about a megabyte to write.
//
// It changes no durability promise: an extra sync only makes durable sooner
// what the tail already holds. A background sync that covers the CAS writes
// counted before it started lets the next Append skip its own (noteSynced).
// A failed background sync fails the journal at the next Append, as a failed
// sync of an Append's does (journal.ErrFailed): what reached the disk is
// unknown.
type bgSyncer struct {
	kick    chan struct{} // capacity 1: a sync is wanted
	stop    chan struct{} // closed by stopSyncer
	done    chan struct{} // closed when the goroutine has returned
	every   int64         // tail bytes per kick (bgSyncBytes); under appendMu
	pending int64         // tail bytes since the last kick; under appendMu
	err     atomic.Pointer[error]

	// For tests: beforeSync runs after the goroutine has read the CAS's
	// write count and before it syncs, afterSync once a sync succeeded.
	beforeSync, afterSync func()
}

// startSyncer starts the background syncer; stopSyncer ends it.
func (j *Journal) startSyncer() {
	j.bg.kick = make(chan struct{}, 1)
	j.bg.every = bgSyncBytes
	j.bg.stop = make(chan struct{})
	j.bg.done = make(chan struct{})
	go j.syncLoop()
}

// stopSyncer stops the background syncer and waits until it has returned,
// so Badger can be closed after it. A sync it is making is finished first.
func (j *Journal) stopSyncer() {
	if j.bg.stop == nil {
		return
	}
	select {
	case <-j.bg.stop:
	default:
		close(j.bg.stop)
	}
	<-j.bg.done
}

// appended counts n bytes written to the tail, asking for a background
// sync each bgSyncBytes. Called with appendMu held, and only with a tail,
// whose Open started the syncer.
func (b *bgSyncer) appended(n int64) {
	b.pending += n
	if b.pending < b.every {
		return
	}
	b.pending = 0
	b.ask()
}

// ask wants a background sync, unless one is already wanted.
func (b *bgSyncer) ask() {
	select {
	case b.kick <- struct{}{}:
	default: // one is already wanted
	}
}

// failure is the first background sync's failure, nil while none failed.
func (b *bgSyncer) failure() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (j *Journal) syncLoop() {
	defer close(j.bg.done)
	for {
		select {
		case <-j.bg.stop:
			return
		case <-j.bg.kick:
		}
		// Every CAS write counted by now has committed (the CAS counts a
		// write once its commit returned), so the sync below covers it.
		writes := j.casWrites.Load()
		if j.bg.beforeSync != nil {
			j.bg.beforeSync()
		}
		if err := j.syncStore(); err != nil {
			err = fmt.Errorf("journal: background sync: %w", err)
			j.bg.err.Store(&err)
			return
		}
		j.noteSynced(writes)
		j.syncs.background.Add(1)
		if j.bg.afterSync != nil {
			j.bg.afterSync()
		}
	}
}
