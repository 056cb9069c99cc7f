package kernel_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
	"github.com/aos-kernel/aos/storefault"
)

// The points TestSnapshotCrash kills its child at. The first three are
// reached through storefault hooks in the child once it has taken two
// snapshots; random is wherever the child happens to be after a number of
// acknowledged events the seed picks.
const (
	killCells   = "cells"   // the checkpoint is durable, the snapshot's cells are being written
	killRecord  = "record"  // the object is written, the snapshot record is about to be appended
	killDurable = "durable" // the snapshot record has just become durable
	killRandom  = "random"  // anywhere in a loop of events and snapshots
)

// armAtRound is the child's snapshot round whose snapshot it is killed in:
// the rounds before it leave a previous snapshot to fall back on.
const armAtRound = 3

// TestSnapshotCrash SIGKILLs a real process at each point of writing a
// snapshot (and at a random point of a loop of events and snapshots) and
// reopens its world: it opens from the latest snapshot whose record is
// durable (the previous one when the kill came before the new record),
// every acknowledged event is in the journal, the state equals a replay
// from genesis (which recomputes every journaled snapshot), and the world
// goes on: it takes events and a snapshot, and reopens from that.
func TestSnapshotCrash(t *testing.T) {
	if point := os.Getenv("AOS_SNAPCRASH_CHILD"); point != "" {
		snapCrashChild(point)
		return
	}
	seed := testSeed(t)
	dir := t.TempDir()
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(man, []byte(counterManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, point := range []string{killCells, killRecord, killDurable, killRandom} {
		// Not in parallel: a child forked by one subtest holds, until it
		// execs, a copy of every descriptor open in this process, the
		// Badger directory lock of another subtest's world included, so
		// that subtest's reopen could find its own world locked.
		t.Run(point, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			testSnapshotCrash(t, point, man, 5+r.IntN(300))
		})
	}
}

// crashAck is an event the child saw acknowledged.
type crashAck struct {
	seq uint64
	key string
	by  int64
}

// crashRun is what the parent read from a killed child.
type crashRun struct {
	acks  []crashAck
	snaps [][2]uint64 // snapshot records the child saw durable: seq, checkpoint
	kill  string      // the rest of the KILL line ("" when it printed none)
}

func testSnapshotCrash(t *testing.T, point, man string, killAfter int) {
	world := filepath.Join(t.TempDir(), "world")
	run := runCrashChild(t, "TestSnapshotCrash", []string{"AOS_SNAPCRASH_CHILD=" + point, "AOS_SNAPCRASH_WORLD=" + world, "AOS_SNAPCRASH_MANIFEST=" + man},
		func(run *crashRun) bool { return point == killRandom && len(run.acks) >= killAfter })
	if point != killRandom && run.kill == "" {
		t.Fatalf("child %s acknowledged %d events without reaching its kill point", point, len(run.acks))
	}
	var kill [2]uint64 // the KILL line: a seq and a checkpoint (see snapCrashChild)
	if run.kill != "" && !scan(run.kill, "%d %d", &kill[0], &kill[1]) {
		t.Fatalf("child %s: KILL %q", point, run.kill)
	}
	var prev [2]uint64 // the last snapshot the child saw durable
	if n := len(run.snaps); n > 0 {
		prev = run.snaps[n-1]
	}
	if point != killRandom && len(run.snaps) < armAtRound-1 {
		t.Fatalf("the child saw %d snapshots durable before its kill, want at least %d", len(run.snaps), armAtRound-1)
	}
	ctx := context.Background()
	cfg := kernel.Config{Builtins: testBuiltins(), SnapshotEvery: -1, SnapshotInterval: -1}
	w, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("reopen after SIGKILL at %s: %v", point, err)
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()

	recs, snaps := checkNothingLost(t, w.World, run, "at "+point) // every snapshot record in the journal, in order
	newest := func(cp uint64) bool {
		for _, s := range snaps {
			if s[1] == cp {
				return true
			}
		}
		return false
	}

	// Opened from the newest snapshot in the journal (genesis when there is
	// none), skipping none.
	info := w.OpenInfo()
	var latest [2]uint64
	if n := len(snaps); n > 0 {
		latest = snaps[n-1]
	}
	if info.Snapshot != latest[0] || info.Checkpoint != latest[1] || len(info.Skipped) != 0 {
		t.Fatalf("opened with %+v, want snapshot %d (checkpoint %d), none skipped", info, latest[0], latest[1])
	}
	switch point {
	case killCells:
		cp := kill[0]
		if r, ok := recs[cp]; !ok || r.Kind != journal.KindCheckpoint {
			t.Fatalf("the checkpoint %d the child reported durable is not in the journal", cp)
		}
		if newest(cp) || info.Snapshot != prev[0] {
			t.Fatalf("killed writing the cells of checkpoint %d: opened %+v, want the previous snapshot %d", cp, info, prev[0])
		}
	case killRecord:
		seq, cp := kill[0], kill[1]
		if h := w.Journal().Height(); h >= seq || newest(cp) {
			t.Fatalf("killed before appending snapshot record %d: the journal reaches %d", seq, h)
		}
		// Its checkpoint is durable unless the committer coalesced it into
		// the same append, which the kill lost too.
		if r, ok := recs[cp]; cp <= w.Journal().Height() && (!ok || r.Kind != journal.KindCheckpoint) {
			t.Fatalf("the killed snapshot's checkpoint %d is not a checkpoint record in the journal", cp)
		}
		if info.Snapshot != prev[0] {
			t.Fatalf("killed before the snapshot record of checkpoint %d: opened %+v, want the previous snapshot %d", cp, info, prev[0])
		}
	case killDurable:
		if info.Snapshot != kill[0] || info.Checkpoint != kill[1] {
			t.Fatalf("killed right after snapshot record %d was durable: opened %+v", kill[0], info)
		}
	}

	// The state equals a replay from genesis that recomputes every
	// journaled snapshot, and one from the latest snapshot.
	live, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Verify(ctx, w.db.Stores(), cfg, live)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Runs[0].Verified != len(snaps) || rep.Runs[1].Opened.Snapshot != info.Snapshot {
		t.Fatalf("verify after SIGKILL at %s (%d snapshots journaled): %+v", point, len(snaps), rep)
	}

	// The world goes on, and reopens from its new snapshot.
	for i := range 5 {
		if _, err := w.Submit(ctx, countEvent(fmt.Sprintf("after-%d", i), i+1)); err != nil {
			t.Fatalf("world does not continue after recovery: %v", err)
		}
	}
	res, err := w.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot after recovery: %v", err)
	}
	before, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = nil
	w2, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("reopen after the new snapshot: %v", err)
	}
	defer w2.Close()
	if info := w2.OpenInfo(); info.Snapshot != res.Seq || info.Checkpoint != res.Checkpoint || info.Replayed != 1 {
		t.Fatalf("reopened with %+v, want snapshot %d (checkpoint %d) and only its record replayed", info, res.Seq, res.Checkpoint)
	}
	after, err := w2.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(before, after); d != "" {
		t.Fatalf("state before close vs after reopen: %s", d)
	}
}

func snapshotRec(t *testing.T, r journal.Record) records.SnapshotRec {
	t.Helper()
	var sr records.SnapshotRec
	if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
		t.Fatalf("snapshot record %d: %v", r.Seq, err)
	}
	return sr
}

// runCrashChild runs the test binary as a child running test with env,
// reads the "ACK seq key by", "SNAP seq checkpoint" and "KILL ..." lines it
// prints, SIGKILLs it once it prints KILL or stop says so, and returns
// everything it wrote before it died. A child that never gets there would
// run for ever: far more acknowledgements than any run needs mean it
// missed its point, and it is killed too.
func runCrashChild(t *testing.T, test string, env []string, stop func(*crashRun) bool) crashRun {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	const lost = 500_000
	var run crashRun
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var a crashAck
		var s [2]uint64
		line := sc.Text()
		switch {
		case scan(line, "ACK %d %s %d", &a.seq, &a.key, &a.by):
			run.acks = append(run.acks, a)
		case scan(line, "SNAP %d %d", &s[0], &s[1]):
			run.snaps = append(run.snaps, s)
		case strings.HasPrefix(line, "KILL "):
			run.kill = strings.TrimPrefix(line, "KILL ")
		default:
			t.Errorf("child wrote %q", line)
		}
		if !killed && (run.kill != "" || stop(&run) || len(run.acks) > lost) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	// The pipe is at its end: the child is dead. Acknowledgements read
	// after the kill were printed before it, so they count too.
	err = cmd.Wait()
	waited = true
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child %s: want death by SIGKILL, got %v (see its stderr)", test, err)
	}
	return run
}

// checkNothingLost reads the reopened world's journal and fails unless it
// holds every event the child saw acknowledged (same key and by) and every
// snapshot record it saw durable. It returns the journal's records by seq,
// and its snapshot records (seq, checkpoint) in order.
func checkNothingLost(t *testing.T, w *kernel.World, run crashRun, where string) (map[uint64]journal.Record, [][2]uint64) {
	t.Helper()
	recs := map[uint64]journal.Record{}
	var snaps [][2]uint64
	for _, r := range allRecords(t, w) {
		recs[r.Seq] = r
		if r.Kind == journal.KindSnapshot {
			snaps = append(snaps, [2]uint64{r.Seq, snapshotRec(t, r).Checkpoint})
		}
	}
	for _, a := range run.acks {
		r, ok := recs[a.seq]
		if !ok || r.Kind != journal.KindEvent {
			t.Fatalf("acknowledged event seq %d (%s by %d) is missing after SIGKILL %s", a.seq, a.key, a.by, where)
		}
		var ev records.EventRec
		if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if got := decodeCount(ev.Value); got.Key != a.key || got.By != a.by {
			t.Fatalf("seq %d holds %s by %d, the child was acknowledged %s by %d", a.seq, got.Key, got.By, a.key, a.by)
		}
	}
	for _, s := range run.snaps {
		if r, ok := recs[s[0]]; !ok || r.Kind != journal.KindSnapshot || snapshotRec(t, r).Checkpoint != s[1] {
			t.Fatalf("snapshot record %d (checkpoint %d) was durable in the child and is not in the journal", s[0], s[1])
		}
	}
	return recs, snaps
}

func scan(line, format string, args ...any) bool {
	n, err := fmt.Sscanf(line, format, args...)
	return err == nil && n == len(args)
}

// snapCrashChild opens the world on storefault wrappers, applies the
// counter manifest, and submits events from three goroutines for ever,
// printing "ACK seq key by" once each is acknowledged. Its main goroutine
// submits ten events of its own (so every snapshot has dirty cells) and
// takes a snapshot, round after round; every snapshot record it sees
// durable it prints as "SNAP seq checkpoint". In round armAtRound it arms
// its kill point, prints "KILL a b" there and stops until it is killed:
//
//   - killCells: in the first CAS batch write of that snapshot, once its
//     checkpoint is durable; a is the checkpoint, b 0.
//   - killRecord: before the append that would hold its snapshot record; a
//     is that record's seq, b its checkpoint.
//   - killDurable: right after that append; a and b as for killRecord.
//
// killRandom arms nothing: automatic snapshots (SnapshotEvery 10) run
// besides the main goroutine's, and the parent kills it when it likes.
func snapCrashChild(point string) {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "snapshot crash child (%s): %s: %v\n", point, what, err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", a...)
		outMu.Unlock()
	}
	stop := func() { select {} } // until the parent's SIGKILL
	decodeSnap := func(r journal.Record) records.SnapshotRec {
		var sr records.SnapshotRec
		if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
			fail("decode snapshot record", err)
		}
		return sr
	}

	db, err := worldstore.Open(os.Getenv("AOS_SNAPCRASH_WORLD"))
	if err != nil {
		fail("open store", err)
	}
	var armed atomic.Bool
	checkpointDurable := make(chan uint64, 1) // the first checkpoint durable once armed
	jn := &storefault.Journal{Log: db.Journal()}
	jn.BeforeAppend = func(recs []journal.Record) {
		if point != killRecord || !armed.Load() {
			return
		}
		for _, r := range recs {
			if r.Kind == journal.KindSnapshot {
				say("KILL %d %d", r.Seq, decodeSnap(r).Checkpoint)
				stop()
			}
		}
	}
	jn.AfterAppend = func(recs []journal.Record, err error) {
		if err != nil {
			return
		}
		for _, r := range recs {
			switch r.Kind {
			case journal.KindCheckpoint:
				if armed.Load() {
					select {
					case checkpointDurable <- r.Seq:
					default:
					}
				}
			case journal.KindSnapshot:
				cp := decodeSnap(r).Checkpoint
				if point == killDurable && armed.Load() {
					say("KILL %d %d", r.Seq, cp)
					stop()
				}
				say("SNAP %d %d", r.Seq, cp)
			}
		}
	}
	// Only snapshots write cells in batches here (MaterializeAt and the
	// resident budget, whose excess is spilled in batches, are far above
	// this world's deltas), so an armed batch is the snapshot's.
	cs := &storefault.CAS{Store: db.CAS(), BeforeWrite: func(op storefault.Op) {
		if point != killCells || op != storefault.CASPutBatch || !armed.Load() {
			return
		}
		say("KILL %d 0", <-checkpointDurable)
		stop()
	}}

	cfg := kernel.Config{Builtins: testBuiltins(), SnapshotEvery: -1, SnapshotInterval: -1}
	if point == killRandom {
		cfg.SnapshotEvery = 10
	}
	w, err := kernel.Open(kernel.Stores{CAS: cs, Journal: jn}, cfg)
	if err != nil {
		fail("open world", err)
	}
	ctx := context.Background()
	m, err := manifest.Load(os.Getenv("AOS_SNAPCRASH_MANIFEST"))
	if err != nil {
		fail("load manifest", err)
	}
	if _, err := w.Apply(ctx, m, false); err != nil {
		fail("apply", err)
	}
	submit := func(key string, by int) {
		seqs, err := w.Submit(ctx, countEvent(key, by))
		if err != nil {
			fail("submit", err)
		}
		say("ACK %d %s %d", seqs[0], key, by)
	}
	for g := range 3 {
		go func() {
			for i := 0; ; i++ {
				submit(fmt.Sprintf("g%d-k%d", g, i%8), i%9+1)
			}
		}()
	}
	for round := 1; ; round++ {
		for i := range 10 {
			submit("m-k"+strconv.Itoa(i%4), round%9+1)
		}
		if point != killRandom && round == armAtRound {
			armed.Store(true)
		}
		_, err := w.Snapshot(ctx)
		if point == killRandom && errors.Is(err, kernel.ErrSnapshotBusy) {
			continue
		}
		if err != nil {
			fail("snapshot", err)
		}
		if armed.Load() {
			fail("snapshot", errors.New("finished although the kill point was armed"))
		}
	}
}
