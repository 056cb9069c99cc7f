package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
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

// The points TestGCCrash kills its child at, all while a collection runs.
const (
	gcKillMark   = "mark"   // marking proves the leaves present: nothing is deleted yet
	gcKillSweep  = "sweep"  // the first chunk of garbage is deleted, the second about to be
	gcKillRandom = "random" // the k-th CAS operation made while collections run (k from the seed)
)

// The child's world: gcCells cells built, snapshotted, half deleted and the
// other half rewritten, snapshotted again; and gcStrays objects written to
// the CAS before the world opened, which nothing names. The strays alone
// are more than one sweep chunk (4096 deletes), so a sweep deletes in at
// least two calls, and which of them are still there after a kill says
// how far the sweep got.
const (
	gcCells  = 1000
	gcStrays = 5000
)

// gcRandomOps bounds the random kill's k: a few collections' worth of CAS
// operations (the child's first makes about 750, later ones more, as its
// world grows), so the kill falls in one of its first three or so.
const gcRandomOps = 2000

const gcCounter = "com.test/counter@1"

func gcCellKey(i int) string { return fmt.Sprintf("cell-%07d", i) }

// A cell's first state is {count: -(i+1)}; the odd cells are then moved
// to {count: -(i+1) - 2*gcCells}. The counts are negative so they never
// meet the states the child's background submitters make (positive
// counts), and so the counter emits no Total event for them.
func gcFirstBy(i int) int { return -(i + 1) }

const gcMoveBy = -2 * gcCells

func gcStray(i int) []byte { return []byte("gc crash stray object " + strconv.Itoa(i)) }

func countStateHash(count int) schemas.Hash {
	return schemas.HashBytes(schemas.MustMarshal(map[string]any{"count": count}))
}

// gcBusyKeys is how many keys each of the child's three background
// submitters cycles through: together more than gcMaterializeAt, so their
// cells are materialized, and the CAS written, while a collection runs.
const gcBusyKeys = 40

const gcMaterializeAt = 64

// gcCrashConfig is the configuration the child runs with and the parent
// reopens with: no automatic snapshots (the child takes its own), and a
// small MaterializeAt, so the live index moves on between snapshots and
// the background submitters write to the CAS while a collection runs.
func gcCrashConfig() kernel.Config {
	return kernel.Config{Builtins: testBuiltins(), SnapshotEvery: -1, SnapshotInterval: -1,
		MaterializeAt: gcMaterializeAt, MaterializeChunk: gcMaterializeAt}
}

// TestGCCrash SIGKILLs a real process while it collects its CAS (marking;
// between two chunks of the sweep; at a random CAS operation of a
// collection) and reopens its world: it opens from the newest snapshot,
// every acknowledged event is in the journal, every live cell reads back,
// the state equals a replay from genesis and one from the snapshot, and a
// collection run to completion afterwards frees what the killed one left
// and loses nothing: the world reopens into the same state.
func TestGCCrash(t *testing.T) {
	if point := os.Getenv("AOS_GCCRASH_CHILD"); point != "" {
		k, _ := strconv.ParseInt(os.Getenv("AOS_GCCRASH_K"), 10, 64)
		gcCrashChild(point, k)
		return
	}
	seed := testSeed(t)
	dir := t.TempDir()
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(man, []byte(counterManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, point := range []string{gcKillMark, gcKillSweep, gcKillRandom} {
		// Not in parallel, for the reason TestSnapshotCrash gives: a child
		// forked by one subtest may hold another's Badger directory lock.
		t.Run(point, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			testGCCrash(t, point, man, 1+r.Int64N(gcRandomOps))
		})
	}
}

func testGCCrash(t *testing.T, point, man string, k int64) {
	world := filepath.Join(t.TempDir(), "world")
	run := runCrashChild(t, "TestGCCrash", []string{"AOS_GCCRASH_CHILD=" + point, "AOS_GCCRASH_WORLD=" + world,
		"AOS_GCCRASH_MANIFEST=" + man, "AOS_GCCRASH_K=" + strconv.FormatInt(k, 10)}, func(*crashRun) bool { return false })
	var killOp string // the CAS operation the child was killed in
	var killAt int64  // its number among the operations made while collecting
	if !scan(run.kill, "%q %d", &killOp, &killAt) {
		t.Fatalf("child %s acknowledged %d events without reaching its kill point (KILL %q)", point, len(run.acks), run.kill)
	}
	t.Logf("killed in %s, CAS operation %d of the collections; %d acks", killOp, killAt, len(run.acks))
	switch {
	case point == gcKillMark && killOp != string(storefault.CASHas),
		point == gcKillSweep && killOp != string(storefault.CASDelete):
		t.Fatalf("child %s was killed in a %s", point, killOp)
	}
	if len(run.snaps) < 2 {
		t.Fatalf("the child saw %d snapshots durable before its kill, want at least 2", len(run.snaps))
	}
	ctx := context.Background()
	cfg := gcCrashConfig()
	w, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("reopen after SIGKILL during gc (%s): %v", point, err)
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()

	// Nothing acknowledged is lost.
	_, snaps := checkNothingLost(t, w.World, run, "during gc ("+point+")") // every snapshot record in the journal, in order

	// Opened from the newest snapshot, which the collection kept: it
	// skipped none.
	latest := snaps[len(snaps)-1]
	if info := w.OpenInfo(); info.Snapshot != latest[0] || info.Checkpoint != latest[1] || len(info.Skipped) != 0 {
		t.Fatalf("opened with %+v, want snapshot %d (checkpoint %d), none skipped", info, latest[0], latest[1])
	}

	// How far the collection got: the strays are garbage from the start,
	// and so is every cell's first state (no kept snapshot holds it).
	strays := gcPresent(t, w.World, gcStrays, func(i int) schemas.Hash { return schemas.HashBytes(gcStray(i)) })
	firsts := gcPresent(t, w.World, gcCells, func(i int) schemas.Hash { return countStateHash(gcFirstBy(i)) })
	switch point {
	case gcKillMark:
		if strays != gcStrays || firsts != gcCells {
			t.Fatalf("killed while marking, yet %d of %d strays and %d of %d first states remain", strays, gcStrays, firsts, gcCells)
		}
	case gcKillSweep:
		if strays == 0 || strays == gcStrays {
			t.Fatalf("killed between two sweep chunks, yet %d of %d strays remain", strays, gcStrays)
		}
	}

	// Every live cell reads back from the CAS (the reopened world's cache
	// is cold), and the cells the child left are the ones it should have.
	cells := gcReadBack(t, w.World)
	if point != gcKillRandom {
		gcExpectCells(t, cells)
	}

	// The state equals a replay from genesis that recomputes every
	// journaled snapshot, and one from the newest snapshot.
	live, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Verify(ctx, w.db.Stores(), cfg, live)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Runs[0].Verified != len(snaps) || rep.Runs[1].Opened.Snapshot != latest[0] {
		t.Fatalf("verify after SIGKILL during gc (%s), %d snapshots journaled: %+v", point, len(snaps), rep)
	}

	// A collection run to completion frees what the killed one left and
	// keeps every live cell.
	res, err := w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1})
	if err != nil {
		t.Fatalf("gc after SIGKILL during gc (%s): %v", point, err)
	}
	if len(res.Snapshots) != 1 || res.Snapshots[0] != latest[0] {
		t.Fatalf("gc after recovery kept snapshots %v, want [%d]", res.Snapshots, latest[0])
	}
	if n := gcPresent(t, w.World, gcStrays, func(i int) schemas.Hash { return schemas.HashBytes(gcStray(i)) }); n != 0 {
		t.Fatalf("%d strays survived a complete collection", n)
	}
	if n := gcPresent(t, w.World, gcCells, func(i int) schemas.Hash { return countStateHash(gcFirstBy(i)) }); n != 0 {
		t.Fatalf("%d first states survived a complete collection", n)
	}
	if again := gcReadBack(t, w.World); !mapsEqual(again, cells) {
		t.Fatalf("the cells changed across a collection: %d before, %d after", len(cells), len(again))
	}
	before, err := w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(live, before); d != "" {
		t.Fatalf("the state changed across a collection: %s", d)
	}

	// And the world reopens, from the same snapshot, into the same state.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = nil
	w2, err := openDir(world, cfg)
	if err != nil {
		t.Fatalf("reopen after the recovery gc: %v", err)
	}
	defer w2.Close()
	if info := w2.OpenInfo(); info.Snapshot != latest[0] || len(info.Skipped) != 0 {
		t.Fatalf("reopened after the recovery gc with %+v, want snapshot %d", info, latest[0])
	}
	after, err := w2.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(before, after); d != "" {
		t.Fatalf("state before close vs after reopen: %s", d)
	}
	if again := gcReadBack(t, w2.World); !mapsEqual(again, cells) {
		t.Fatalf("the cells changed across the reopen: %d before, %d after", len(cells), len(again))
	}
}

// gcPresent counts which of the n objects hash(0..n-1) the CAS holds.
func gcPresent(t *testing.T, w *kernel.World, n int, hash func(i int) schemas.Hash) int {
	t.Helper()
	present := 0
	for i := range n {
		ok, err := w.CAS().Has(hash(i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			present++
		}
	}
	return present
}

// gcReadBack lists the counter's cells and reads each one, its state bytes
// included; it returns their state hashes by key (canonical CBOR).
func gcReadBack(t *testing.T, w *kernel.World) map[string]schemas.Hash {
	t.Helper()
	ctx := context.Background()
	rows, err := w.Cells(ctx, gcCounter, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]schemas.Hash, len(rows))
	for _, r := range rows {
		c, err := w.Cell(ctx, gcCounter, r.Key)
		if err != nil {
			t.Fatalf("cell %x: %v", r.Key, err)
		}
		if !c.Exists || c.StateHash == nil || *c.StateHash != r.StateHash || schemas.HashBytes(c.State) != r.StateHash {
			t.Fatalf("cell %x reads back as %+v, listed with state %s", r.Key, c, r.StateHash)
		}
		out[string(r.Key)] = r.StateHash
	}
	return out
}

// gcExpectCells checks the built cells of a child killed in its first
// collection: the even ones deleted, the odd ones at their moved state.
func gcExpectCells(t *testing.T, cells map[string]schemas.Hash) {
	t.Helper()
	for i := range gcCells {
		key := string(schemas.MustMarshal(gcCellKey(i)))
		h, ok := cells[key]
		switch {
		case i%2 == 0 && ok:
			t.Fatalf("cell %s was deleted before the collection and is listed", gcCellKey(i))
		case i%2 == 1 && !ok:
			t.Fatalf("cell %s is missing", gcCellKey(i))
		case i%2 == 1 && h != countStateHash(gcFirstBy(i)+gcMoveBy):
			t.Fatalf("cell %s has state %s, want {count: %d}", gcCellKey(i), h, gcFirstBy(i)+gcMoveBy)
		}
	}
}

func mapsEqual(a, b map[string]schemas.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// gcCrashChild writes gcStrays unnamed objects to a fresh world's CAS,
// opens the world on storefault wrappers, applies the counter manifest and
// builds gcCells cells, a snapshot, deletes the even cells and moves the
// odd ones, and takes a second snapshot, printing "ACK seq key by" for
// every event acknowledged and "SNAP seq checkpoint" for every snapshot
// record it sees durable. Then three goroutines submit events for ever
// while the main one collects, keeping one snapshot. It prints
// "KILL "op" n" at its kill point and stops there until it is killed:
//
//   - mark: at the collection's first CAS Has (only marking asks Has: the
//     nodes are read, the leaves being proven present), once the
//     background submitters have written to the CAS during it.
//   - sweep: at its second CAS Delete (the first chunk is deleted). The
//     sweep lists its garbage only after the submitters have written
//     during the collection, so the Guard must spare what they wrote.
//   - random: at the k-th CAS operation, read or write, from any
//     goroutine, made while a collection runs; its collections repeat,
//     each after a round of new cells, deletions and a snapshot, until
//     the k-th comes.
func gcCrashChild(point string, k int64) {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "gc crash child (%s): %s: %v\n", point, what, err)
		os.Exit(2)
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		fmt.Printf(format+"\n", a...)
		outMu.Unlock()
	}
	stop := func() { select {} } // until the parent's SIGKILL

	db, err := worldstore.Open(os.Getenv("AOS_GCCRASH_WORLD"))
	if err != nil {
		fail("open store", err)
	}
	strays := make([][]byte, gcStrays)
	for i := range strays {
		strays[i] = gcStray(i)
	}
	if _, err := db.CAS().PutBatch(strays); err != nil {
		fail("write strays", err)
	}

	var collecting atomic.Bool // a collection is running
	var ops, deletes atomic.Int64
	wrote := make(chan struct{}) // closed at the first CAS write made while collecting
	var wroteOnce sync.Once
	hook := func(op storefault.Op) {
		if !collecting.Load() {
			return
		}
		if op == storefault.CASPut || op == storefault.CASPutBatch {
			wroteOnce.Do(func() { close(wrote) })
		}
		n := ops.Add(1)
		kill := false
		switch point {
		case gcKillMark:
			kill = op == storefault.CASHas
			if kill {
				<-wrote
			}
		case gcKillSweep:
			if op == storefault.CASIterate {
				<-wrote // before the sweep lists its garbage, so what was written is among it
			}
			kill = op == storefault.CASDelete && deletes.Add(1) == 2
		case gcKillRandom:
			kill = n == k
		}
		if kill {
			say("KILL %q %d", op, n)
			stop()
		}
	}
	cs := &storefault.CAS{Store: db.CAS(), BeforeRead: hook, BeforeWrite: hook}
	jn := &storefault.Journal{Log: db.Journal(), AfterAppend: func(recs []journal.Record, err error) {
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Kind != journal.KindSnapshot {
				continue
			}
			var sr records.SnapshotRec
			if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
				fail("decode snapshot record", err)
			}
			say("SNAP %d %d", r.Seq, sr.Checkpoint)
		}
	}}
	w, err := kernel.Open(kernel.Stores{CAS: cs, Journal: jn}, gcCrashConfig())
	if err != nil {
		fail("open world", err)
	}
	ctx := context.Background()
	m, err := manifest.Load(os.Getenv("AOS_GCCRASH_MANIFEST"))
	if err != nil {
		fail("load manifest", err)
	}
	if _, err := w.Apply(ctx, m, false); err != nil {
		fail("apply", err)
	}
	// submit submits the events key(i) by by(i) for i in [from, to), a
	// thousand at a time.
	submit := func(from, to int, key func(int) string, by func(int) int) {
		const batch = 1000
		for start := from; start < to; start += batch {
			evs := make([]kernel.Event, 0, batch)
			for i := start; i < min(start+batch, to); i++ {
				evs = append(evs, countEvent(key(i), by(i)))
			}
			seqs, err := w.Submit(ctx, evs...)
			if err != nil {
				fail("submit", err)
			}
			for j, seq := range seqs {
				say("ACK %d %s %d", seq, key(start+j), by(start+j))
			}
		}
	}
	snap := func() {
		if _, err := w.Snapshot(ctx); err != nil {
			fail("snapshot", err)
		}
	}
	collect := func() {
		collecting.Store(true)
		_, err := w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1})
		collecting.Store(false)
		if err != nil {
			fail("gc", err)
		}
	}

	submit(0, gcCells, gcCellKey, gcFirstBy)
	snap()
	submit(0, gcCells, gcCellKey, func(i int) int {
		if i%2 == 0 {
			return 0 // by 0: the counter deletes the cell
		}
		return gcMoveBy
	})
	snap()
	for g := range 3 {
		go func() {
			for i := 0; ; i++ {
				key, by := fmt.Sprintf("g%d-k%d", g, i%gcBusyKeys), i%9+1
				submit(0, 1, func(int) string { return key }, func(int) int { return by })
			}
		}()
	}
	if point != gcKillRandom {
		collect()
		fail("gc", errors.New("finished although its kill point was armed"))
	}
	// Each round adds 200 cells after the built ones and deletes the first
	// 100 of the round before's.
	for round := 0; ; round++ {
		collect()
		from := gcCells + round*200
		submit(from, from+200, gcCellKey, gcFirstBy)
		if round > 0 {
			submit(from-200, from-100, gcCellKey, func(int) int { return 0 })
		}
		snap()
	}
}
