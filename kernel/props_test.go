package kernel_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: time-based, printed)")

func testSeed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

const counterManifest = `[
 {"$kind":"defschema","name":"com.test/CountEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountState@1","schema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/Total@1","schema":{"type":"object","properties":{"key":{"type":"string"},"count":{"type":"integer"}},"required":["key","count"]}},
 {"$kind":"defschema","name":"com.test/AuditState@1","schema":{"type":"object","properties":{"seen":{"type":"integer"}}}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}},
 {"$kind":"defmodule","name":"com.test/audit_mod@1","runtime":{"kind":"builtin","builtin":"test/audit","identity":"test/audit@1"}},
 {"$kind":"defworkflow","name":"com.test/counter@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"defworkflow","name":"com.test/audit@1","state":"com.test/AuditState@1","event":"com.test/Total@1","effects_emitted":[],"impl":{"module":"com.test/audit_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[
   {"event":"com.test/CountEvent@1","workflow":"com.test/counter@1","key_field":"key"},
   {"event":"com.test/Total@1","workflow":"com.test/audit@1"}]}}
]`

func mustApply(t testing.TB, h *harness, src string) {
	t.Helper()
	if _, err := h.applyJSON(src); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func countEvent(key string, by int) kernel.Event {
	return kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":%q,"by":%d}`, key, by))}
}

func allRecords(t testing.TB, w *kernel.World) []journal.Record {
	var out []journal.Record
	if err := w.Journal().Read(1, func(r journal.Record) (bool, error) {
		out = append(out, r)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeterminism runs the same random inputs on fresh worlds, submitted in
// different batch sizes, and requires byte-identical journals and states.
func TestDeterminism(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	var evs []kernel.Event
	for i := 0; i < 600; i++ {
		by := r.IntN(12) + 1
		if r.IntN(40) == 0 {
			by = []int{0, 13, 14, 15, 16, 17}[r.IntN(6)]
		}
		evs = append(evs, countEvent(fmt.Sprintf("k%d", r.IntN(50)), by))
	}
	run := func(batch int) ([]journal.Record, map[string]string) {
		h := newHarness(t, seed, false)
		mustApply(t, h, counterManifest)
		for i := 0; i < len(evs); i += batch {
			end := min(i+batch, len(evs))
			if _, err := h.w.Submit(context.Background(), evs[i:end]...); err != nil {
				t.Fatal(err)
			}
		}
		states := map[string]string{}
		for _, wf := range []string{"com.test/counter@1", "com.test/audit@1"} {
			rows, err := h.w.Cells(context.Background(), wf, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range rows {
				states[wf+" "+string(c.Key)] = c.StateHash.String() + " " + c.Status
			}
		}
		return allRecords(t, h.w), states
	}
	j1, s1 := run(1)
	j2, s2 := run(37)
	if len(j1) != len(j2) {
		t.Fatalf("journal lengths differ: %d vs %d", len(j1), len(j2))
	}
	for i := range j1 {
		if j1[i].Seq != j2[i].Seq || j1[i].Kind != j2[i].Kind || !bytes.Equal(j1[i].Body, j2[i].Body) {
			t.Fatalf("journals differ at seq %d (%s vs %s)", j1[i].Seq, j1[i].Kind, j2[i].Kind)
		}
	}
	if fmt.Sprint(s1) != fmt.Sprint(s2) {
		t.Fatalf("states differ:\n%v\n%v", s1, s2)
	}
	if len(s1) < 10 {
		t.Fatalf("suspiciously few cells: %d", len(s1))
	}
}

// TestNoMisrouting: 1,000 keys, concurrent submitters; every step sees only
// its own key's events, and every cell's count is the sum of its own events.
func TestNoMisrouting(t *testing.T) {
	seed := testSeed(t)
	h := newHarness(t, seed, false)
	var mu sync.Mutex
	var wrong []string
	h.builtins.MustRegister("test/checked", "test/checked@1", "step", func(in *modules.Input) (*modules.Output, error) {
		ev := decodeMap(nil, in.Event.Value)
		if got := schemas.MustMarshal(ev["key"]); !bytes.Equal(got, in.Event.Key) {
			mu.Lock()
			wrong = append(wrong, fmt.Sprintf("event key %v delivered to cell %x", ev["key"], in.Event.Key))
			mu.Unlock()
		}
		var count int64
		if in.State != nil {
			count = toInt(decodeMap(nil, in.State)["count"])
		}
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": count + toInt(ev["by"])})}, nil
	})
	mustApply(t, h, strings.ReplaceAll(counterManifest, `"builtin":"test/counter","identity":"test/counter@1"`, `"builtin":"test/checked","identity":"test/checked@1"`))
	const keys, workers, per = 1000, 8, 500
	want := make([]int64, keys)
	var wantMu sync.Mutex
	var wg sync.WaitGroup
	for wkr := 0; wkr < workers; wkr++ {
		wg.Add(1)
		go func(wkr int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(wkr)))
			for i := 0; i < per; i++ {
				k, by := r.IntN(keys), r.IntN(100)+1
				if _, err := h.w.Submit(context.Background(), countEvent(fmt.Sprintf("key-%04d", k), by)); err != nil {
					t.Error(err)
					return
				}
				wantMu.Lock()
				want[k] += int64(by)
				wantMu.Unlock()
			}
		}(wkr)
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("%d misrouted deliveries, first: %s", len(wrong), wrong[0])
	}
	for k := 0; k < keys; k++ {
		if want[k] == 0 {
			continue
		}
		v, err := h.w.Cell(context.Background(), "com.test/counter@1", schemas.MustMarshal(fmt.Sprintf("key-%04d", k)))
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Count int64 }
		if err := schemas.UnmarshalTrusted(v.State, &st); err != nil {
			t.Fatal(err)
		}
		if st.Count != want[k] {
			t.Fatalf("key-%04d: count %d, want %d", k, st.Count, want[k])
		}
	}
}

// TestHotKeyCannotStarve: one step makes a hot cell emit a long chain to
// itself and a cold cell one event; round-robin steps the cold cell before
// the hot chain is a few steps in.
func TestHotKeyCannotStarve(t *testing.T) {
	h := newHarness(t, 1, false)
	h.builtins.MustRegister("test/chain", "test/chain@1", "step", func(in *modules.Input) (*modules.Output, error) {
		ev := decodeMap(nil, in.Event.Value)
		left := toInt(ev["left"])
		out := &modules.Output{State: schemas.MustMarshal(map[string]any{"left": left})}
		if left > 0 {
			out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Chain@1",
				Value: schemas.MustMarshal(map[string]any{"key": ev["key"], "left": left - 1, "also": ""})})
		}
		if also := ev["also"].(string); also != "" {
			for i := 0; i < 3; i++ { // three events queue up in the hot mailbox too
				out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Chain@1",
					Value: schemas.MustMarshal(map[string]any{"key": ev["key"], "left": 0, "also": ""})})
			}
			out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Chain@1",
				Value: schemas.MustMarshal(map[string]any{"key": also, "left": 0, "also": ""})})
		}
		return out, nil
	})
	mustApply(t, h, `[
 {"$kind":"defschema","name":"com.test/Chain@1","schema":{"type":"object","properties":{"key":{"type":"string"},"left":{"type":"integer"},"also":{"type":"string"}},"required":["key","left","also"]}},
 {"$kind":"defschema","name":"com.test/ChainState@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string"}},
 {"$kind":"defmodule","name":"com.test/chain_mod@1","runtime":{"kind":"builtin","builtin":"test/chain","identity":"test/chain@1"}},
 {"$kind":"defworkflow","name":"com.test/chain@1","state":"com.test/ChainState@1","event":"com.test/Chain@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/chain_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/chain","routing":{"subscriptions":[{"event":"com.test/Chain@1","workflow":"com.test/chain@1","key_field":"key"}]}}
]`)
	if _, err := h.w.Submit(context.Background(), kernel.Event{Schema: "com.test/Chain@1",
		JSON: []byte(`{"key":"hot","left":40,"also":"cold"}`)}); err != nil {
		t.Fatal(err)
	}
	var hotSteps []uint64
	var coldStep uint64
	for _, r := range allRecords(t, h.w) {
		if r.Kind != journal.KindStep {
			continue
		}
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			t.Fatal(err)
		}
		switch string(records.KeyJSON(s.Key)) {
		case `"hot"`:
			hotSteps = append(hotSteps, r.Seq)
		case `"cold"`:
			coldStep = r.Seq
		}
	}
	if len(hotSteps) != 44 || coldStep == 0 {
		t.Fatalf("hot steps %d (want 44), cold step at %d", len(hotSteps), coldStep)
	}
	if coldStep > hotSteps[2] {
		t.Fatalf("cold cell stepped at seq %d, after hot steps %v: starved", coldStep, hotSteps[:3])
	}
}

// TestReopenAfterCleanStop: state and journal survive Close and reopen on disk,
// and the world continues.
func TestReopenAfterCleanStop(t *testing.T) {
	h := newHarness(t, 7, true)
	mustApply(t, h, counterManifest)
	for i := 0; i < 100; i++ {
		if _, err := h.w.Submit(context.Background(), countEvent(fmt.Sprintf("k%d", i%10), 1)); err != nil {
			t.Fatal(err)
		}
	}
	before := allRecords(t, h.w)
	h.reopen()
	after := allRecords(t, h.w)
	if len(before) != len(after) {
		t.Fatalf("journal %d records before reopen, %d after", len(before), len(after))
	}
	if _, err := h.w.Submit(context.Background(), countEvent("k0", 5)); err != nil {
		t.Fatal(err)
	}
	v, err := h.w.Cell(context.Background(), "com.test/counter@1", schemas.MustMarshal("k0"))
	if err != nil {
		t.Fatal(err)
	}
	if stateJSON(v) != `{"count":15}` {
		t.Fatalf("k0 state %s, want count 15", stateJSON(v))
	}
}

// TestCrashRecovery SIGKILLs a real process that is submitting events and
// checks every acknowledged event survived and the world goes on.
func TestCrashRecovery(t *testing.T) {
	if os.Getenv("AOS_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	dir := t.TempDir()
	man := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(man, []byte(counterManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	world := filepath.Join(dir, "world")
	acked := map[uint64]string{}
	for round := 0; round < 2; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$", "-test.v=false")
		cmd.Env = append(os.Environ(), "AOS_CRASH_CHILD=1", "AOS_CRASH_WORLD="+world, "AOS_CRASH_MANIFEST="+man,
			"AOS_CRASH_ROUND="+strconv.Itoa(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() && n < 300 {
			var seq uint64
			var key string
			if _, err := fmt.Sscanf(sc.Text(), "ACK %d %s", &seq, &key); err == nil {
				acked[seq] = key
				n++
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if n < 300 {
			t.Fatalf("round %d: child acknowledged only %d events", round, n)
		}
	}
	// Reopen in this process: every acknowledged event is in the journal.
	w, err := openDir(world, kernel.Config{Builtins: testBuiltins()})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer w.Close()
	recs := map[uint64]journal.Record{}
	for _, r := range allRecords(t, w.World) {
		recs[r.Seq] = r
	}
	for seq, key := range acked {
		r, ok := recs[seq]
		if !ok || r.Kind != journal.KindEvent {
			t.Fatalf("acknowledged event seq %d (key %s) is missing after SIGKILL", seq, key)
		}
		var ev records.EventRec
		if err := schemas.UnmarshalTrusted(r.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ev.Value), key) {
			t.Fatalf("seq %d holds another event than the one acknowledged for %s", seq, key)
		}
	}
	if _, err := w.Submit(context.Background(), countEvent("after", 1)); err != nil {
		t.Fatalf("world does not continue after recovery: %v", err)
	}
}

// crashChild opens the world, applies the manifest if needed and submits
// events forever, printing each acknowledged seq.
func crashChild() {
	world, manPath := os.Getenv("AOS_CRASH_WORLD"), os.Getenv("AOS_CRASH_MANIFEST")
	w, err := openDir(world, kernel.Config{Builtins: testBuiltins()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	if w.Manifest() == nil {
		m, err := manifest.Load(manPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child manifest:", err)
			os.Exit(2)
		}
		if _, err := w.Apply(context.Background(), m, false); err != nil {
			fmt.Fprintln(os.Stderr, "child apply:", err)
			os.Exit(2)
		}
	}
	var wg sync.WaitGroup
	var outMu sync.Mutex
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("r%s-g%d-%d", os.Getenv("AOS_CRASH_ROUND"), g, i)
				seqs, err := w.Submit(context.Background(), countEvent(key, 1))
				if err != nil {
					fmt.Fprintln(os.Stderr, "child submit:", err)
					os.Exit(2)
				}
				outMu.Lock()
				fmt.Printf("ACK %d %s\n", seqs[0], key)
				outMu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

// TestMaterializeInSlices: with a small MaterializeAt the kernel drains cell
// deltas in MaterializeChunk slices between inputs. The dirty count stays
// bounded — and only slices can have bounded it, since the keyspace is below
// the whole-delta fallback (4 x MaterializeAt) — every cell reads back right
// (including deleted ones), reopening gives the same cells, and the journal
// is byte-identical to a world that never materialized.
//
// Both ways of writing a slice are run: on the loop, and in the background
// (Config.MaterializeInBackground), where slices are installed at later
// checks, so how far the delta overshoots depends on timing.
func TestMaterializeInSlices(t *testing.T) {
	for _, bg := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", bg), func(t *testing.T) { testMaterializeInSlices(t, bg) })
	}
}

func testMaterializeInSlices(t *testing.T, bg bool) {
	const at, chunk, keys, inputs = 4096, 256, 12000, 24000
	sliced := newHarnessWith(t, 11, true, func(h *harness) {
		h.extra = func(c *kernel.Config) {
			c.MaterializeAt, c.MaterializeChunk, c.MaterializeInBackground = at, chunk, bg
		}
	})
	plain := newHarness(t, 11, true) // default threshold: never reached here
	for _, h := range []*harness{sliced, plain} {
		mustApply(t, h, counterManifest)
	}
	r := rand.New(rand.NewPCG(5, 5))
	want := map[string]int{}
	ctx := context.Background()
	maxDirty, drains := 0, uint64(0)
	for i := 0; i < inputs; i += 100 {
		batch := make([]kernel.Event, 0, 100)
		for j := 0; j < 100; j++ {
			key := fmt.Sprintf("k%d", r.IntN(keys))
			by := 1 + r.IntN(3)
			if r.IntN(10) == 0 {
				by = 0 // deletes the cell
			}
			batch = append(batch, countEvent(key, by))
			if by == 0 {
				delete(want, key)
			} else {
				want[key] += by
			}
		}
		for _, h := range []*harness{sliced, plain} {
			if _, err := h.w.Submit(ctx, batch...); err != nil {
				t.Fatal(err)
			}
		}
		stats, err := sliced.w.CellStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			maxDirty = max(maxDirty, s.Dirty)
			drains = max(drains, s.DrainsTotal)
		}
	}
	t.Logf("dirty cells peaked at %d (threshold %d); %d slices installed in the background", maxDirty, at, drains)
	// On the loop, a slice per check keeps the delta within one check's
	// growth of the threshold. In the background the overshoot depends on
	// timing, but slices must have been installed: the keyspace stays under
	// the whole-delta fallback (4 x threshold), so nothing else shrinks it.
	bound := at + 512
	if bg {
		bound = keys
		if drains == 0 {
			t.Fatal("no slice of the delta was ever written in the background")
		}
	} else if drains != 0 {
		t.Fatalf("%d background slices with MaterializeInBackground off", drains)
	}
	if maxDirty > bound || maxDirty < at {
		t.Fatalf("dirty cells peaked at %d; want the delta to reach %d and stay under %d", maxDirty, at, bound)
	}
	check := func(h *harness, when string) {
		t.Helper()
		for i := 0; i < keys; i++ {
			key := fmt.Sprintf("k%d", i)
			v, err := h.w.Cell(ctx, "com.test/counter@1", schemas.MustMarshal(key))
			n, ok := want[key]
			switch {
			case !ok && err == nil:
				t.Fatalf("%s: deleted cell %s reads %s", when, key, stateJSON(v))
			case ok && err != nil:
				t.Fatalf("%s: cell %s: %v", when, key, err)
			case ok && stateJSON(v) != fmt.Sprintf(`{"count":%d}`, n):
				t.Fatalf("%s: cell %s is %s, want count %d", when, key, stateJSON(v), n)
			}
		}
	}
	check(sliced, "live")
	a, b := allRecords(t, sliced.w), allRecords(t, plain.w)
	if len(a) != len(b) {
		t.Fatalf("journals differ in length: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || !bytes.Equal(a[i].Body, b[i].Body) {
			t.Fatalf("journals differ at seq %d", a[i].Seq)
		}
	}
	sliced.reopen()
	check(sliced, "after reopen")
}
