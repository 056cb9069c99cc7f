package kernel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// The tail crash child's policy: a snapshot every tailEvery records, and
// the default bound on the tail (2 x tailEvery).
const (
	tailEvery   = 100
	tailMaxTail = 2 * tailEvery
	// tailSubmitters send one event per request each, so a loop turn holds
	// at most this many events; an event journals at most four records (the
	// event and its step, and a counter reaching ten emits a Total that the
	// audit workflow steps on), and a turn may add a checkpoint and a
	// snapshot record.
	tailSubmitters = 3
	tailTurnMax    = tailSubmitters*4 + 2
	// tailStall is how many events the child acknowledges while the
	// snapshot's cell write is stalled before it gives up waiting for the
	// loop to hold: far more than the bound allows.
	tailStall = 10 * tailMaxTail
)

// TestSnapshotCrashTailBound SIGKILLs a real process whose snapshot's cell
// write is stalled (a slow disk, a huge delta) while clients keep sending
// events, and reopens its world: the open replays at most
// Config.SnapshotMaxTail records plus one loop turn's (kernel.holdTail),
// however long the snapshot took, every acknowledged event is in the
// journal, and the state equals a replay from genesis. Without the bound
// the loop goes on acknowledging while the snapshot hangs, and the open
// after the kill replays everything since the snapshot before.
func TestSnapshotCrashTailBound(t *testing.T) {
	if os.Getenv("AOS_TAILCRASH_WORLD") != "" {
		tailCrashChild()
		return
	}
	dir := t.TempDir()
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(man, []byte(counterManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	world := filepath.Join(dir, "world")
	run := runCrashChild(t, "TestSnapshotCrashTailBound", []string{"AOS_TAILCRASH_WORLD=" + world, "AOS_TAILCRASH_MANIFEST=" + man},
		func(*crashRun) bool { return false })
	var tail, cp uint64
	if !scan(run.kill, "%d %d", &tail, &cp) {
		t.Fatalf("child: KILL %q", run.kill)
	}
	cfg := kernel.Config{Builtins: testBuiltins(), SnapshotEvery: -1, SnapshotInterval: -1}
	w, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer w.Close()
	_, snaps := checkNothingLost(t, w.World, run, "after a kill during a stalled snapshot")
	if len(snaps) < 3 {
		t.Fatalf("%d snapshots journaled before the kill, want at least 3", len(snaps))
	}
	info := w.OpenInfo()
	if info.Replayed > tailMaxTail+tailTurnMax {
		t.Fatalf("the open replayed %d records after checkpoint %d: over the bound of %d (SnapshotMaxTail) + %d (one loop turn); the child reported %s",
			info.Replayed, info.Checkpoint, tailMaxTail, tailTurnMax, run.kill)
	}
	if tail < tailMaxTail {
		t.Fatalf("the loop held for the snapshot of checkpoint %d at a tail of %d records, below SnapshotMaxTail %d", cp, tail, tailMaxTail)
	}
	if info.Snapshot != snaps[len(snaps)-1][0] || len(info.Skipped) != 0 {
		t.Fatalf("opened with %+v, want the newest journaled snapshot %v", info, snaps[len(snaps)-1])
	}
	if info.Checkpoint >= cp {
		t.Fatalf("opened from checkpoint %d, but the stalled snapshot's checkpoint %d had no record when the child was killed", info.Checkpoint, cp)
	}
	t.Logf("killed while snapshot of checkpoint %d was stalled, the loop holding at a tail of %d; reopened from checkpoint %d replaying %d records",
		cp, tail, info.Checkpoint, info.Replayed)
	ctx := context.Background()
	live, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Verify(ctx, w.db.Stores(), cfg, live)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Runs[0].Verified != len(snaps) {
		t.Fatalf("verify after the kill (%d snapshots journaled): %+v", len(snaps), rep)
	}
}

// tailObserver is the child's Observer: it hears the loop hold for a
// snapshot (kernel.TailObserver).
type tailObserver struct{ holding func(tail, checkpoint uint64) }

func (tailObserver) Ingested(int)                                  {}
func (tailObserver) Stepped(string, time.Duration, bool)           {}
func (tailObserver) Flushed(int, time.Duration, error)             {}
func (tailObserver) Snapshotted(time.Duration, time.Duration, int) {}
func (o tailObserver) SnapshotHolding(tail, checkpoint uint64)     { o.holding(tail, checkpoint) }

// tailCrashChild runs a counter world taking a snapshot every tailEvery
// records, fed by tailSubmitters clients printing "ACK seq key by" and
// "SNAP seq checkpoint" as in snapCrashChild. Once three snapshots are
// durable, the next snapshot's cell write stalls. When the loop holds for
// it (TailObserver), the child prints "KILL tail checkpoint" and stops; if
// the loop never holds, it prints KILL once tailStall more events were
// acknowledged, so the parent finds a tail over the bound and fails.
func tailCrashChild() {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "tail crash child: %s: %v\n", what, err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", a...)
		outMu.Unlock()
	}
	stop := func() { select {} } // until the parent's SIGKILL
	db, err := worldstore.Open(os.Getenv("AOS_TAILCRASH_WORLD"))
	if err != nil {
		fail("open store", err)
	}
	var snaps, acks, stalledAt atomic.Int64
	var lastCheckpoint atomic.Uint64
	var killed sync.Once
	kill := func(tail, cp uint64) {
		killed.Do(func() {
			say("KILL %d %d", tail, cp)
		})
		stop()
	}
	jn := &storefault.Journal{Log: db.Journal()}
	jn.AfterAppend = func(recs []journal.Record, err error) {
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Kind == journal.KindCheckpoint {
				lastCheckpoint.Store(r.Seq)
			}
			if r.Kind == journal.KindSnapshot {
				say("SNAP %d %d", r.Seq, snapshotRecOf(r).Checkpoint)
				snaps.Add(1)
			}
		}
	}
	// Only snapshots write cells in batches here (the deltas stay far
	// below MaterializeAt), so a batch write once armed is a snapshot's.
	cs := &storefault.CAS{Store: db.CAS(), BeforeWrite: func(op storefault.Op) {
		if op != storefault.CASPutBatch || snaps.Load() < 3 {
			return
		}
		stalledAt.CompareAndSwap(0, acks.Load()+1)
		select {} // stalled until the kill
	}}
	cfg := kernel.Config{Builtins: testBuiltins(), SnapshotEvery: tailEvery, SnapshotInterval: -1,
		Observer: tailObserver{holding: func(tail, cp uint64) { kill(tail, cp) }}}
	w, err := kernel.Open(kernel.Stores{CAS: cs, Journal: jn}, cfg)
	if err != nil {
		fail("open world", err)
	}
	ctx := context.Background()
	m, err := manifest.Load(os.Getenv("AOS_TAILCRASH_MANIFEST"))
	if err != nil {
		fail("load manifest", err)
	}
	if _, err := w.Apply(ctx, m, false); err != nil {
		fail("apply", err)
	}
	var wg sync.WaitGroup
	for g := range tailSubmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key, by := "g"+strconv.Itoa(g)+"-k"+strconv.Itoa(i%50), i%9+1
				seqs, err := w.Submit(ctx, countEvent(key, by))
				if err != nil {
					fail("submit", err)
				}
				say("ACK %d %s %d", seqs[0], key, by)
				if n := acks.Add(1); stalledAt.Load() > 0 && n-stalledAt.Load() >= tailStall {
					kill(0, lastCheckpoint.Load()) // the loop never held: the parent finds the tail
				}
			}
		}()
	}
	wg.Wait()
}

func snapshotRecOf(r journal.Record) records.SnapshotRec {
	var sr records.SnapshotRec
	if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
		fmt.Fprintf(os.Stderr, "tail crash child: snapshot record %d: %v\n", r.Seq, err)
		os.Exit(2)
	}
	return sr
}
