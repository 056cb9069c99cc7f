package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The runaway world: the hostile wasm guest (testdata/guests/hostile, built
// from source), whose "loop" act never returns, beside two builtins: the
// counter, a healthy workflow, and fan, which emits one HostileEvent per
// key it is given (one input whose cascade reaches many guests).
const runawayDefs = `
 {"$kind":"defschema","name":"test/HostileEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/HostileState@1","schema":{"type":"object","properties":{"calls":{"type":"integer"},"global":{"type":"integer"},"note":{"type":"string"}},"required":["calls","global"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defschema","name":"com.test/CountEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountState@1","schema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/FanEvent@1","schema":{"type":"object","properties":{"keys":{"type":"array","items":{"type":"string"}}},"required":["keys"],"additionalProperties":false}},
 {"$kind":"defschema","name":"test/FanState@1","schema":{"type":"object","properties":{"fanned":{"type":"integer"}},"required":["fanned"]}},
 {"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}},
 {"$kind":"defmodule","name":"test/fan_mod@1","runtime":{"kind":"builtin","builtin":"test/fan","identity":"test/fan@1"}},
 {"$kind":"defworkflow","name":"com.test/counter@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"defworkflow","name":"test/fan@1","state":"test/FanState@1","event":"test/FanEvent@1","effects_emitted":[],"impl":{"module":"test/fan_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"test/runaway","routing":{"subscriptions":[
   {"event":"test/HostileEvent@1","workflow":"test/hostile@1","key_field":"key"},
   {"event":"com.test/CountEvent@1","workflow":"com.test/counter@1","key_field":"key"},
   {"event":"test/FanEvent@1","workflow":"test/fan@1"}]}}`

// runawayManifest runs the hostile workflow on the guest (%s: its hash).
const runawayManifest = `[` + runawayDefs + `,
 {"$kind":"defmodule","name":"test/hostile_mod@1","runtime":{"kind":"wasm","artifact":"hostile.wasm","hash":"%s","max_memory_mib":64}},
 {"$kind":"defworkflow","name":"test/hostile@1","state":"test/HostileState@1","event":"test/HostileEvent@1","key_schema":"test/Key@1","effects_emitted":[],"impl":{"module":"test/hostile_mod@1","entrypoint":"step"}}
]`

// fixedRunawayManifest replaces the guest with fixed native code.
const fixedRunawayManifest = `[` + runawayDefs + `,
 {"$kind":"defmodule","name":"test/hostile_fixed_mod@1","runtime":{"kind":"builtin","builtin":"test/hostile_fixed","identity":"test/hostile_fixed@1"}},
 {"$kind":"defworkflow","name":"test/hostile@1","state":"test/HostileState@1","event":"test/HostileEvent@1","key_schema":"test/Key@1","effects_emitted":[],"impl":{"module":"test/hostile_fixed_mod@1","entrypoint":"step"}}
]`

const (
	hostileWF  = "test/hostile@1"
	hostileMod = "test/hostile_mod@1"
)

// runawayStep is the step timeout of the tests whose guest loops until it
// is stopped: each of its loops costs that long, and every other step must
// finish within it on a loaded machine under -race too (at 150 ms a step of
// the "count" operation was once stopped in CI).
const runawayStep = time.Second

// runawayHarness is an on-disk world with the runaway manifest applied.
// Each wasm step is stopped after stepTimeout; cfg adjusts the rest.
func runawayHarness(t *testing.T, stepTimeout time.Duration, cfg func(*kernel.Config)) *harness {
	t.Helper()
	wasmPath, cache := hostileGuest(t)
	engine := wasmtest.Engine(t, cache)
	h := newHarnessWith(t, 17, true, func(h *harness) {
		h.builtins.MustRegister("test/fan", "test/fan@1", "step", func(in *modules.Input) (*modules.Output, error) {
			var ev struct {
				Keys []string `cbor:"keys"`
			}
			if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
				return nil, err
			}
			out := &modules.Output{State: schemas.MustMarshal(map[string]any{"fanned": len(ev.Keys)})}
			for _, k := range ev.Keys {
				out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "test/HostileEvent@1",
					Value: schemas.MustMarshal(map[string]any{"key": k, "act": "loop"})})
			}
			return out, nil
		})
		h.builtins.MustRegister("test/hostile_fixed", "test/hostile_fixed@1", "step", func(in *modules.Input) (*modules.Output, error) {
			var s hostileState
			if in.State != nil {
				if err := schemas.UnmarshalTrusted(in.State, &s); err != nil {
					return nil, err
				}
			}
			s.Calls++
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"calls": s.Calls, "global": 0})}, nil
		})
		h.extra = func(c *kernel.Config) {
			c.Wasm, c.StepTimeout = engine, stepTimeout
			if cfg != nil {
				cfg(c)
			}
		}
	})
	b, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hostile.wasm"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(fmt.Sprintf(runawayManifest, schemas.HashBytes(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	applyDir(t, h, dir)
	return h
}

// faultSeqs lists the fault records of the journal, decoded, with their seqs.
func faultSeqs(t *testing.T, h *harness) (seqs []uint64, faults []records.FaultRec) {
	t.Helper()
	for _, r := range recordsOf(t, h.w, journal.KindFault) {
		var f records.FaultRec
		if err := schemas.UnmarshalTrusted(r.Body, &f); err != nil {
			t.Fatal(err)
		}
		seqs, faults = append(seqs, r.Seq), append(faults, f)
	}
	return seqs, faults
}

// timeouts counts the step faults the wall clock stopped (a step timeout,
// not a cut-off input) among faults.
func timeouts(faults []records.FaultRec) int {
	n := 0
	for _, f := range faults {
		if f.Class == kernel.FaultEnvironmental && strings.Contains(f.Reason, "timeout") {
			n++
		}
	}
	return n
}

func moduleRecs(t *testing.T, h *harness) []records.ModuleRec {
	t.Helper()
	var out []records.ModuleRec
	for _, r := range recordsOf(t, h.w, journal.KindModule) {
		var m records.ModuleRec
		if err := schemas.UnmarshalTrusted(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func moduleInfo(t *testing.T, h *harness, name string) kernel.ModuleInfo {
	t.Helper()
	ms, err := h.w.Modules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("module %s is not listed: %+v", name, ms)
	return kernel.ModuleInfo{}
}

func loopEvents(prefix string, n int) []kernel.Event {
	evs := make([]kernel.Event, n)
	for i := range evs {
		evs[i] = hostileEvent(fmt.Sprintf("%s%d", prefix, i), "loop")
	}
	return evs
}

// TestRunawayModuleSetAside: a batch of 8 events for a guest that loops
// forever. Its first 3 steps are stopped by the step timeout (each an
// environmental fault of its own instance); then the module is set aside
// (a journaled module record), and the other 5 events are parked for their
// instances instead of being stepped, as the answer says. The module, its
// waiting inputs and the parked cells show in Modules, Status and Cell; a
// healthy workflow goes on. A reopened world adopts the set-aside from the
// journal. Applying a manifest that replaces the module resumes it: the 5
// parked events run on the new code, in order, and the failed instances
// keep their inputs for a retry.
func TestRunawayModuleSetAside(t *testing.T) {
	ctx := context.Background()
	h := runawayHarness(t, runawayStep, func(c *kernel.Config) { c.SetAsideAfter = 3 })
	res, err := h.w.Ingest(ctx, loopEvents("k", 8)...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := []kernel.Target(nil)
		if i >= 3 {
			want = []kernel.Target{{Workflow: hostileWF, Key: schemas.MustMarshal(fmt.Sprintf("k%d", i))}}
		}
		if !reflect.DeepEqual(r.Parked, want) {
			t.Errorf("event %d: parked for %+v, want %+v", i, r.Parked, want)
		}
	}
	_, faults := faultSeqs(t, h)
	if n := timeouts(faults); n != 3 || len(faults) != 3 {
		t.Fatalf("%d faults, %d of them step timeouts; want exactly 3 timed-out steps (the threshold), then none", len(faults), n)
	}
	mrs := moduleRecs(t, h)
	if len(mrs) != 1 || mrs[0].Action != records.ModuleAside || mrs[0].Module != hostileMod ||
		!reflect.DeepEqual(mrs[0].Workflows, []string{hostileWF}) || !strings.Contains(mrs[0].Reason, "3 steps in a row") {
		t.Fatalf("module records %+v: want one setting %s aside, holding %s", mrs, hostileMod, hostileWF)
	}
	check := func(when string) {
		t.Helper()
		mi := moduleInfo(t, h, hostileMod)
		if !mi.Aside || mi.Waiting != 5 || mi.Instances != 5 {
			t.Fatalf("%s: module %+v, want aside with 5 inputs waiting in 5 instances", when, mi)
		}
		st, err := h.w.Status(ctx)
		if err != nil || len(st.Aside) != 1 || st.Aside[0].Name != hostileMod || st.Instances.Parked != 5 || st.Instances.Failed != 3 || st.Parked != 5 {
			t.Fatalf("%s: status %+v %v", when, st, err)
		}
		for i := 3; i < 8; i++ {
			v, _ := hostileCell(t, h.w, fmt.Sprintf("k%d", i))
			if v.Status != kernel.StatusParked || v.Parked != 1 || v.AsideModule != hostileMod {
				t.Fatalf("%s: cell k%d %+v, want parked behind %s", when, i, v, hostileMod)
			}
		}
		if p, err := h.w.InstancePage(ctx, hostileWF, "", 100, []string{kernel.StatusParked}); err != nil || len(p.Cells) != 5 {
			t.Fatalf("%s: the listing of parked instances: %+v %v, want 5 rows", when, p, err)
		}
	}
	check("live")
	if seqs, err := h.w.Submit(ctx, countEvent("healthy", 2)); err != nil || len(seqs) != 1 {
		t.Fatalf("healthy event: %v %v", seqs, err)
	}
	if got := countOf(t, h, "healthy"); got != 2 {
		t.Fatalf("healthy count %d", got)
	}
	reopenSame(t, h) // replay adopts the set-aside: no step of the parked events, the same records
	check("after replay")

	applyFixed(t, h)
	mrs = moduleRecs(t, h)
	if len(mrs) != 2 || mrs[1].Action != records.ModuleResume || mrs[1].Parked != 5 || !strings.Contains(mrs[1].Reason, "drops it") {
		t.Fatalf("module records %+v: want the apply to resume the module with 5 parked", mrs)
	}
	for i := 3; i < 8; i++ {
		v, s := hostileCell(t, h.w, fmt.Sprintf("k%d", i))
		if v.Status != kernel.StatusCompleted || s.Calls != 1 || v.Parked != 0 {
			t.Fatalf("after the apply, cell k%d %+v (state %+v), want run once on the fixed code", i, v, s)
		}
	}
	if _, faults := faultSeqs(t, h); len(faults) != 3 {
		t.Fatalf("%d faults after the apply, want the 3 of before", len(faults))
	}
	if mi := moduleInfo(t, h, "test/hostile_fixed_mod@1"); mi.Aside {
		t.Fatalf("the new module is aside: %+v", mi)
	}
	fi := failedOf(t, h, hostileWF, "k0")
	if fi.Class != "environmental" || !fi.Retryable {
		t.Fatalf("k0 %+v: want an environmental fault with its input kept", fi)
	}
	if r, err := h.w.Recover(ctx, hostileWF, schemas.MustMarshal("k0"), kernel.RecoverRetry, fi.FaultSeq); err != nil || r.Status != kernel.StatusCompleted {
		t.Fatalf("retry k0 on the fixed code: %+v %v", r, err)
	}
	reopenSame(t, h)
	if st, err := h.w.Status(ctx); err != nil || len(st.Aside) != 0 || st.Parked != 0 || st.Instances.Failed != 2 {
		t.Fatalf("after replay: %+v %v", st, err)
	}
}

// applyFixed applies the manifest that runs the hostile workflow on fixed
// native code.
func applyFixed(t *testing.T, h *harness) {
	t.Helper()
	if _, err := h.applyJSON(fixedRunawayManifest); err != nil {
		t.Fatalf("apply the fixed manifest: %v", err)
	}
}

// TestResumeModuleRedelivers: an operator's resume of a module set aside
// delivers the inputs parked for it, in the order they were journaled, and
// is refused (journaling nothing) for a module that is not set aside.
func TestResumeModuleRedelivers(t *testing.T) {
	ctx := context.Background()
	h := runawayHarness(t, runawayStep, func(c *kernel.Config) { c.SetAsideAfter = 3 })
	for _, ev := range loopEvents("k", 3) {
		if _, err := h.w.Submit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if mi := moduleInfo(t, h, hostileMod); !mi.Aside {
		t.Fatalf("module %+v, want it set aside after 3 timeouts", mi)
	}
	var parked []uint64
	for _, k := range []string{"c1", "c2", "c1"} {
		res, err := h.w.Ingest(ctx, hostileEvent(k, "count"))
		if err != nil || len(res[0].Parked) != 1 {
			t.Fatalf("event for %s: %+v %v, want it parked", k, res, err)
		}
		parked = append(parked, res[0].Seq)
	}
	res, err := h.w.ResumeModule(ctx, hostileMod)
	if err != nil || res.Delivered != 3 || res.Instances != 2 {
		t.Fatalf("resume: %+v %v, want 3 events delivered to 2 instances", res, err)
	}
	inOrder(t, h, res.Seq, parked...)
	if _, s := hostileCell(t, h.w, "c1"); s.Calls != 2 {
		t.Fatalf("c1 took %d steps, want 2", s.Calls)
	}
	if mi := moduleInfo(t, h, hostileMod); mi.Aside || mi.Waiting != 0 {
		t.Fatalf("after the resume: %+v", mi)
	}
	height := h.w.Journal().Height()
	if _, err := h.w.ResumeModule(ctx, hostileMod); !errors.Is(err, kernel.ErrNotAside) {
		t.Fatalf("a second resume: %v, want ErrNotAside", err)
	}
	if h.w.Journal().Height() != height {
		t.Fatal("a refused resume journaled something")
	}
	reopenSame(t, h)
	if _, s := hostileCell(t, h.w, "c2"); s.Calls != 1 {
		t.Fatalf("after replay c2 took %d steps, want 1", s.Calls)
	}
}

// TestSlowBatchDoesNotHoldOthers: while a batch of 8 events for a looping
// guest is under way, another client's event for a healthy workflow is
// journaled and acknowledged after at most the one or two timed-out steps
// in progress when it arrived, not after the batch: the batch yields its
// turn. With set-aside on, the batch itself costs 3 timed-out steps, not 8.
// Counts of journaled faults are asserted, never wall time.
func TestSlowBatchDoesNotHoldOthers(t *testing.T) {
	for _, c := range []struct {
		name     string
		asideAt  int
		timeouts int // the batch's timed-out steps in all
	}{{"set aside after 3", 3, 3}, {"never set aside", -1, 8}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			h := runawayHarness(t, runawayStep, func(cfg *kernel.Config) { cfg.SetAsideAfter = c.asideAt })
			start := h.w.Journal().Height()
			var wg sync.WaitGroup
			var batchErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, batchErr = h.w.Submit(ctx, loopEvents("k", 8)...)
			}()
			// Wait, on the journal, for the batch's first timed-out step
			// to be durable: the batch is under way.
			seen := waitForKind(t, h, start, journal.KindFault)
			seqs, err := h.w.Submit(ctx, countEvent("healthy", 1))
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if batchErr != nil {
				t.Fatal(batchErr)
			}
			fseqs, faults := faultSeqs(t, h)
			if n := timeouts(faults); n != c.timeouts {
				t.Fatalf("the batch timed out %d steps, want %d", n, c.timeouts)
			}
			between := 0
			for _, s := range fseqs {
				if s > seen && s < seqs[0] {
					between++
				}
			}
			if between > 2 {
				t.Fatalf("%d timed-out steps were journaled between the healthy event's arrival (after fault %d) and its seq %d: it waited for the batch", between, seen, seqs[0])
			}
			if got := countOf(t, h, "healthy"); got != 1 {
				t.Fatalf("healthy count %d", got)
			}
			reopenSame(t, h)
		})
	}
}

// waitForKind waits, on the journal's durable height (no sleeping), for a
// record of kind after seq from, and returns its seq.
func waitForKind(t *testing.T, h *harness, from uint64, kind journal.Kind) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := from + 1
	for {
		height, err := h.w.Journal().Wait(ctx, next-1)
		if err != nil {
			t.Fatalf("waiting for a %s record: %v", kind, err)
		}
		var found uint64
		if err := h.w.Journal().Read(next, func(r journal.Record) (bool, error) {
			if r.Seq > height {
				return false, nil
			}
			if r.Kind == kind {
				found = r.Seq
				return false, nil
			}
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if found != 0 {
			return found
		}
		next = height + 1
	}
}

// TestInputWallTimeBudget: one input whose cascade reaches 5 looping
// guests is cut off once its wall-clock budget (InputTimeout) is spent: the
// step under way is stopped by what is left of the budget (an environmental
// timeout), and the 4 instances still holding the input's work are failed
// with an environmental fault saying so, each keeping its input for a
// retry. Replay adopts all of it; nothing is re-judged by wall time.
func TestInputWallTimeBudget(t *testing.T) {
	ctx := context.Background()
	h := runawayHarness(t, 20*time.Second, func(c *kernel.Config) {
		c.InputTimeout, c.SetAsideAfter = 300*time.Millisecond, -1
	})
	seqs, err := h.w.Submit(ctx, kernel.Event{Schema: "test/FanEvent@1", JSON: []byte(`{"keys":["a","b","c","d","e"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, faults := faultSeqs(t, h)
	if len(faults) != 5 || timeouts(faults) != 1 {
		t.Fatalf("%d faults, %d step timeouts; want 5: the one step under way stopped, 4 cut off", len(faults), timeouts(faults))
	}
	if want := fmt.Sprintf("what was left of input %d's wall-clock budget of 300ms", seqs[0]); !strings.Contains(faults[0].Reason, want) {
		t.Fatalf("the step under way was stopped by %q, want by %q (not the 20s step timeout)", faults[0].Reason, want)
	}
	for _, f := range faults[1:] {
		if f.Class != kernel.FaultEnvironmental || !strings.Contains(f.Reason, fmt.Sprintf("input %d ran past its wall-clock budget of 300ms", seqs[0])) {
			t.Fatalf("cut-off fault %+v: want environmental, naming the input and its budget", f)
		}
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if fi := failedOf(t, h, hostileWF, k); !fi.Retryable || fi.Class != "environmental" {
			t.Fatalf("%s: %+v, want an environmental fault with its input kept", k, fi)
		}
	}
	if st, err := h.w.Status(ctx); err != nil || len(st.Aside) != 0 {
		t.Fatalf("status %+v %v: nothing is set aside by a budget cut", st, err)
	}
	reopenSame(t, h)
	applyFixed(t, h)
	fi := failedOf(t, h, hostileWF, "c")
	if r, err := h.w.Recover(ctx, hostileWF, schemas.MustMarshal("c"), kernel.RecoverRetry, fi.FaultSeq); err != nil || r.Status != kernel.StatusCompleted {
		t.Fatalf("retry: %+v %v", r, err)
	}
	reopenSame(t, h)
}

// TestSetAsideCountsTimeoutsInARow: a step of the module that completes
// between timeouts starts the count again, so a module that only sometimes
// times out is not set aside; the threshold's worth of timeouts in a row
// does set it aside. Modules says how many timed out in a row so far.
func TestSetAsideCountsTimeoutsInARow(t *testing.T) {
	ctx := context.Background()
	h := runawayHarness(t, runawayStep, func(c *kernel.Config) { c.SetAsideAfter = 3 })
	send := func(key, act string) {
		t.Helper()
		if _, err := h.w.Submit(ctx, hostileEvent(key, act)); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "loop")
	send("b", "loop")
	if mi := moduleInfo(t, h, hostileMod); mi.Aside || mi.TimeoutsInARow != 2 {
		t.Fatalf("after 2 timeouts: %+v, want 2 in a row, not aside", mi)
	}
	send("ok", "count") // completes: the count starts again
	if mi := moduleInfo(t, h, hostileMod); mi.TimeoutsInARow != 0 {
		t.Fatalf("after a step that completed: %+v, want 0 in a row", mi)
	}
	send("c", "loop")
	send("d", "loop")
	if mi := moduleInfo(t, h, hostileMod); mi.Aside || len(moduleRecs(t, h)) != 0 {
		t.Fatalf("4 timeouts, never 3 in a row: %+v, want the module running", mi)
	}
	send("e", "loop")
	if mi := moduleInfo(t, h, hostileMod); !mi.Aside {
		t.Fatalf("3 timeouts in a row: %+v, want the module set aside", mi)
	}
	if _, faults := faultSeqs(t, h); timeouts(faults) != 5 {
		t.Fatalf("%d timed-out steps, want 5", timeouts(faults))
	}
	reopenSame(t, h)
}
