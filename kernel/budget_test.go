package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// bombManifest: a keyed workflow whose every step emits `fan` Boom events,
// to its own key (spread=false) or to fresh keys (spread=true), and a
// counter that another client uses meanwhile.
const bombManifest = `[
 {"$kind":"defschema","name":"com.test/Boom@1","schema":{"type":"object","properties":{"key":{"type":"string"},"fan":{"type":"integer"},"spread":{"type":"boolean"},"pad":{"type":"string"}},"required":["key","fan"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/BoomState@1","schema":{"type":"object","properties":{"steps":{"type":"integer"}},"required":["steps"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountState@1","schema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/Total@1","schema":{"type":"object","properties":{"key":{"type":"string"},"count":{"type":"integer"}},"required":["key","count"]}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"com.test/bomb_mod@1","runtime":{"kind":"builtin","builtin":"test/bomb","identity":"test/bomb@1"}},
 {"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}},
 {"$kind":"defworkflow","name":"com.test/bomb@1","state":"com.test/BoomState@1","event":"com.test/Boom@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/bomb_mod@1","entrypoint":"step"}},
 {"$kind":"defworkflow","name":"com.test/counter@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/bomb","routing":{"subscriptions":[
   {"event":"com.test/Boom@1","workflow":"com.test/bomb@1","key_field":"key"},
   {"event":"com.test/CountEvent@1","workflow":"com.test/counter@1","key_field":"key"}]}}
]`

type boom struct {
	Key    string `cbor:"key"`
	Fan    int    `cbor:"fan"`
	Spread bool   `cbor:"spread,omitempty"`
	Pad    string `cbor:"pad,omitempty"`
}

func bombStep(in *modules.Input) (*modules.Output, error) {
	var ev boom
	if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
		return nil, err
	}
	var st struct {
		Steps int `cbor:"steps"`
	}
	if in.State != nil {
		if err := schemas.UnmarshalTrusted(in.State, &st); err != nil {
			return nil, err
		}
	}
	out := &modules.Output{State: schemas.MustMarshal(map[string]any{"steps": st.Steps + 1})}
	for i := range ev.Fan {
		next := ev
		if ev.Spread {
			next.Key = fmt.Sprintf("%s.%d", ev.Key, i)
		}
		out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Boom@1", Value: schemas.MustMarshal(&next)})
	}
	return out, nil
}

func newBombHarness(t *testing.T, lim kernel.Limits) *harness {
	t.Helper()
	h := newHarnessWith(t, 21, true, func(h *harness) {
		h.builtins.MustRegister("test/bomb", "test/bomb@1", "step", bombStep)
		h.extra = func(c *kernel.Config) { c.Limits = lim }
	})
	mustApply(t, h, bombManifest)
	return h
}

func recordsOf(t *testing.T, w *kernel.World, kind journal.Kind) []journal.Record {
	t.Helper()
	var out []journal.Record
	for _, r := range allRecords(t, w) {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

func faultsOf(t *testing.T, w *kernel.World) []records.FaultRec {
	t.Helper()
	var out []records.FaultRec
	for _, r := range recordsOf(t, w, journal.KindFault) {
		var f records.FaultRec
		if err := schemas.UnmarshalTrusted(r.Body, &f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// TestDoublingCascadeStoppedByBudget: a step that emits two events to its
// own key doubles its mailbox every generation. The per-input budget stops it
// after exactly MaxStepsPerInput steps with one journaled budget fault, while
// another client's events, sent concurrently, are all acknowledged and
// stepped; the world keeps serving; replay reproduces the fault.
func TestDoublingCascadeStoppedByBudget(t *testing.T) {
	const budget = 300
	// The cascade depth alone would allow 2^15 steps here: without the
	// budget the fault below is missing and the step count is far higher.
	h := newBombHarness(t, kernel.Limits{MaxStepsPerInput: budget, MaxCascadeDepth: 14})
	ctx := context.Background()

	var wg sync.WaitGroup
	const others = 200
	errs := make(chan error, others+1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/Boom@1", JSON: []byte(`{"key":"bomb","fan":2}`)}); err != nil {
			errs <- fmt.Errorf("bomb: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range others {
			if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("c%d", i%10), 1)); err != nil {
				errs <- fmt.Errorf("other client, event %d: %w", i, err)
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	steps := 0
	for _, r := range recordsOf(t, h.w, journal.KindStep) {
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			t.Fatal(err)
		}
		if s.Workflow == "com.test/bomb@1" {
			steps++
		}
	}
	if steps != budget {
		t.Fatalf("bomb ran %d steps, want exactly the budget %d", steps, budget)
	}
	faults := faultsOf(t, h.w)
	if len(faults) != 1 || faults[0].Class != kernel.FaultBudget || string(faults[0].Key) != string(schemas.MustMarshal("bomb")) ||
		!strings.Contains(faults[0].Reason, fmt.Sprintf("%d steps (limit %d)", budget, budget)) {
		t.Fatalf("faults = %+v, want one budget fault for the bomb naming the step limit", faults)
	}
	for i := range 10 {
		v, err := h.w.Cell(ctx, "com.test/counter@1", schemas.MustMarshal(fmt.Sprintf("c%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Count int `json:"count"`
		}
		if err := schemas.UnmarshalTrusted(v.State, &c); err != nil || c.Count != others/10 {
			t.Fatalf("counter c%d = %s (%v), want %d: the other client's events were not all stepped", i, stateJSON(v), err, others/10)
		}
	}
	st, err := h.w.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Instances.Failed != 1 || !st.Quiescent {
		t.Fatalf("status %+v: want one failed instance and a quiescent world", st)
	}

	// The world keeps serving, and the failed instance stays failed.
	height := h.w.Journal().Height()
	if _, err := h.send("com.test/CountEvent@1", `{"key":"after","by":3}`); err != nil {
		t.Fatal(err)
	}
	before := allRecords(t, h.w)
	h.reopen() // replays the cascade, recomputing the budget fault's record
	after := allRecords(t, h.w)
	if len(after) != len(before) {
		t.Fatalf("reopen with the same limits journaled %d records", len(after)-len(before))
	}
	if got := faultsOf(t, h.w); len(got) != 1 || got[0].Reason != faults[0].Reason {
		t.Fatalf("after replay faults = %+v", got)
	}
	if h.w.Journal().Height() <= height {
		t.Fatal("the event after the cascade was not journaled")
	}
}

// TestBudgetLimitsEach: the record and byte budgets stop a fan-out to fresh
// keys; every instance still holding work is failed with the same reason.
func TestBudgetLimitsEach(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  kernel.Limits
		ev   string
		want string
	}{
		{"records", kernel.Limits{MaxRecordsPerInput: 100, MaxCascadeDepth: 12}, `{"key":"r","fan":3,"spread":true}`, "journal records (limit 100)"},
		{"bytes", kernel.Limits{MaxBytesPerInput: 64 << 10, MaxCascadeDepth: 12}, `{"key":"b","fan":3,"spread":true,"pad":"` + strings.Repeat("x", 1000) + `"}`, "journal bytes (limit 65536)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newBombHarness(t, tc.lim)
			if _, err := h.send("com.test/Boom@1", tc.ev); err != nil {
				t.Fatal(err)
			}
			faults := faultsOf(t, h.w)
			if len(faults) < 2 {
				t.Fatalf("%d faults, want every instance with pending work failed", len(faults))
			}
			for _, f := range faults {
				if f.Class != kernel.FaultBudget || f.Reason != faults[0].Reason || !strings.Contains(f.Reason, tc.want) {
					t.Fatalf("fault %+v, want class budget naming %q", f, tc.want)
				}
			}
			h.reopen()
			if got := faultsOf(t, h.w); len(got) != len(faults) {
				t.Fatalf("replay: %d faults, want %d", len(got), len(faults))
			}
		})
	}
}

// TestLimitsAreJournaled: limits travel with the world. A reopen asking for
// other limits journals a config record after replay (which used the
// journaled ones, so it does not diverge), status shows them, and the next
// reopen without asking keeps them.
func TestLimitsAreJournaled(t *testing.T) {
	h := newBombHarness(t, kernel.Limits{MaxStepsPerInput: 50, MaxCascadeDepth: 10})
	if _, err := h.send("com.test/Boom@1", `{"key":"x","fan":2}`); err != nil {
		t.Fatal(err)
	}
	if got := h.w.Limits().MaxStepsPerInput; got != 50 {
		t.Fatalf("limit %d, want 50", got)
	}
	// Reopen with a larger budget: replay must still find the fault at 50.
	h.extra = func(c *kernel.Config) { c.Limits = kernel.Limits{MaxStepsPerInput: 5000} }
	height := h.w.Journal().Height()
	h.reopen()
	if h.w.Journal().Height() != height+1 {
		t.Fatalf("height %d, want one config record after %d", h.w.Journal().Height(), height)
	}
	cfg := recordsOf(t, h.w, journal.KindConfig)
	var cr records.ConfigRec
	if len(cfg) != 1 || schemas.UnmarshalTrusted(cfg[0].Body, &cr) != nil || cr.Limits.MaxStepsPerInput != 5000 || cr.Limits.MaxCascadeDepth != 10 {
		t.Fatalf("config records %v (%+v)", cfg, cr)
	}
	st, err := h.w.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Limits.MaxStepsPerInput != 5000 || st.Limits.MaxCascadeDepth != 10 {
		t.Fatalf("status limits %+v", st.Limits)
	}
	// Reopen asking for nothing: the journal's limits stay, nothing is journaled.
	h.extra = nil
	h.reopen()
	if h.w.Journal().Height() != height+1 || h.w.Limits().MaxStepsPerInput != 5000 {
		t.Fatalf("height %d limits %+v", h.w.Journal().Height(), h.w.Limits())
	}
	// SetLimits: journaled, applies to the next input, refuses nonsense.
	res, err := h.w.SetLimits(context.Background(), kernel.Limits{MaxStepsPerInput: 20})
	if err != nil || !res.Changed || res.Seq != height+2 || res.Limits.MaxCascadeDepth != 10 {
		t.Fatalf("SetLimits = %+v, %v", res, err)
	}
	if res, err := h.w.SetLimits(context.Background(), kernel.Limits{MaxStepsPerInput: 20}); err != nil || res.Changed {
		t.Fatalf("unchanged SetLimits = %+v, %v", res, err)
	}
	if _, err := h.w.SetLimits(context.Background(), kernel.Limits{MaxEffects: -1}); err == nil || !strings.Contains(err.Error(), "max_effects") {
		t.Fatalf("negative limit: %v", err)
	}
	if h.w.Journal().Height() != height+2 {
		t.Fatal("a refused or unchanged SetLimits journaled something")
	}
	if _, err := h.send("com.test/Boom@1", `{"key":"y","fan":2}`); err != nil {
		t.Fatal(err)
	}
	f := faultsOf(t, h.w)
	if len(f) != 2 || !strings.Contains(f[1].Reason, "20 steps (limit 20)") {
		t.Fatalf("faults %+v: the new limit did not apply", f)
	}
	h.reopen()
	if got := faultsOf(t, h.w); len(got) != 2 {
		t.Fatalf("replay: %+v", got)
	}
}

// TestForgedBudgetFaultDiverges: replay checks a budget fault against its own
// counts. A journal claiming an input ran out of budget when it had not
// (here: right after the event, before any step) does not replay.
func TestForgedBudgetFaultDiverges(t *testing.T) {
	h := newBombHarness(t, kernel.Limits{})
	man := h.w.Manifest().Hash
	height := h.w.Journal().Height()
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	key := schemas.MustMarshal("z")
	ev := records.EventRec{Schema: "com.test/Boom@1", Value: schemas.MustMarshal(&boom{Key: "z", Fan: 0}),
		Stamp:   records.Stamp{NowNs: 5, LogicalNs: 5, Entropy: make([]byte, 32), Height: height, ManifestHash: man},
		Targets: []records.TargetRec{{Workflow: "com.test/bomb@1", Key: key}}}
	fault := records.FaultRec{Input: height + 1, Workflow: "com.test/bomb@1", Key: key, Reason: "forged", Class: kernel.FaultBudget}
	if err := h.db.Journal().Append([]journal.Record{
		{Seq: height + 1, Kind: journal.KindEvent, Body: schemas.MustMarshal(&ev)},
		{Seq: height + 2, Kind: journal.KindFault, Body: schemas.MustMarshal(&fault)},
	}); err != nil {
		t.Fatal(err)
	}
	_, err := kernel.Open(h.db.Stores(), h.config())
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != height+2 || !strings.Contains(re.Msg, "work budget") {
		t.Fatalf("open = %v, want a replay divergence at the forged budget fault", err)
	}
}

// TestCascadeDepthLimit: a chain of emitted events (one per step, so the
// work budget is never near) is stopped at MaxCascadeDepth generations by a
// business fault on the step that would emit past it; replay agrees.
func TestCascadeDepthLimit(t *testing.T) {
	h := newBombHarness(t, kernel.Limits{MaxCascadeDepth: 5})
	if _, err := h.send("com.test/Boom@1", `{"key":"chain","fan":1}`); err != nil {
		t.Fatal(err)
	}
	steps := len(recordsOf(t, h.w, journal.KindStep))
	faults := faultsOf(t, h.w)
	if steps != 5 || len(faults) != 1 || faults[0].Class != "" || !strings.Contains(faults[0].Reason, "cascade depth limit 5") {
		t.Fatalf("%d steps, faults %+v: want 5 steps, then a business fault naming the depth limit", steps, faults)
	}
	h.reopen()
	if got := faultsOf(t, h.w); len(got) != 1 {
		t.Fatalf("replay: %+v", got)
	}
}
