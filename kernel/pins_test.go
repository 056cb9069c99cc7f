package kernel_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

const pinWorkflow = "com.test/p@1"

// pinManifest is version v (1, 2 or 3) of a world with one keyed workflow.
// v1 takes acts; v2 and v3 also take notes, run other code (test/pin@2)
// and bound the state's n (by 50, then 1000), so a cell with a large n
// fits v3 but not v2, and none of v1's cells carry v2's tag.
func pinManifest(v int) string {
	event := `"variant":{"Act":"com.test/PAct@1","Receipt":"sys/EffectReceiptEnvelope@1"}`
	subs := `{"event":"com.test/PAct@1","workflow":"com.test/p@1","key_field":"key"}`
	state := `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	mod := 1
	if v > 1 {
		event = `"variant":{"Act":"com.test/PAct@1","Note":"com.test/PNote@1","Receipt":"sys/EffectReceiptEnvelope@1"}`
		subs += `,{"event":"com.test/PNote@1","workflow":"com.test/p@1","key_field":"key"}`
		limit := map[int]int{2: 50, 3: 1000}[v]
		state = fmt.Sprintf(`{"type":"object","properties":{"n":{"type":"integer","maximum":%d},"tag":{"type":"string"}},"required":["n"]}`, limit)
		mod = 2
	}
	return `[
 {"$kind":"defschema","name":"com.test/PAct@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"]}},
 {"$kind":"defschema","name":"com.test/PNote@1","schema":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}},
 {"$kind":"defschema","name":"com.test/PEvent@1",` + event + `},
 {"$kind":"defschema","name":"com.test/PState@1","schema":` + state + `},
 {"$kind":"defschema","name":"com.test/PKey@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/PFx@1","schema":{"type":"object"}},
 {"$kind":"defeffect","name":"com.test/pfx@1","params":"com.test/PFx@1","receipt":"com.test/PFx@1"},
 {"$kind":"defmodule","name":"com.test/pin_mod@` + fmt.Sprint(mod) + `","runtime":{"kind":"builtin","builtin":"test/pin` + fmt.Sprint(mod) + `","identity":"test/pin@` + fmt.Sprint(mod) + `"}},
 {"$kind":"defworkflow","name":"com.test/p@1","state":"com.test/PState@1","event":"com.test/PEvent@1","key_schema":"com.test/PKey@1","effects_emitted":["com.test/pfx@1"],"impl":{"module":"com.test/pin_mod@` + fmt.Sprint(mod) + `","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/pins-v` + fmt.Sprint(v) + `","routing":{"subscriptions":[` + subs + `]}}
]`
}

// pinStep is the code of version mod: an act "plain" adds 1, "big" 100,
// "fx" adds 1 and opens an effect; a receipt adds 10; a note (v2 on) adds
// 20. Version 2 tags every state it writes.
func pinStep(mod int) modules.StepFunc {
	return func(in *modules.Input) (*modules.Output, error) {
		ev := decodeMap(nil, in.Event.Value)
		var n int64
		if in.State != nil {
			n = toInt(decodeMap(nil, in.State)["n"])
		}
		out := &modules.Output{}
		switch ev["$tag"] {
		case "Act":
			switch ev["$value"].(map[string]any)["act"] {
			case "big":
				n += 100
			case "fx":
				n++
				out.Effects = []modules.EffectOut{{Effect: "com.test/pfx@1", Params: schemas.MustMarshal(map[string]any{})}}
			default:
				n++
			}
		case "Receipt":
			n += 10
		case "Note":
			n += 20
		}
		st := map[string]any{"n": n}
		if mod == 2 {
			st["tag"] = "v2"
		}
		out.State = schemas.MustMarshal(st)
		return out, nil
	}
}

var pinExecutorKey = ed25519.NewKeyFromSeed([]byte("pins test executor key, 32 bytes"))

func newPinHarness(t *testing.T) *harness {
	kr := receipts.NewKeyring()
	if err := kr.Add("fx", pinExecutorKey.Public().(ed25519.PublicKey), []string{"com.test/pfx@1"}); err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, 29, true, func(h *harness) {
		h.builtins.MustRegister("test/pin1", "test/pin@1", "step", pinStep(1))
		h.builtins.MustRegister("test/pin2", "test/pin@2", "step", pinStep(2))
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
}

func pinApply(t *testing.T, h *harness, v int) *kernel.ApplyResult {
	t.Helper()
	res, err := h.w.ApplyWith(context.Background(), loadManifest(t, pinManifest(v)), kernel.ApplyOptions{Pin: true})
	if err != nil || !res.Applied || !res.Pinned {
		t.Fatalf("apply --pin v%d: %+v, %v", v, res, err)
	}
	return res
}

func pinSend(h *harness, schema, key, act string) error {
	v := fmt.Sprintf(`{"key":%q}`, key)
	if act != "" {
		v = fmt.Sprintf(`{"key":%q,"act":%q}`, key, act)
	}
	_, err := h.send(schema, v)
	return err
}

func pinCell(t *testing.T, h *harness, key string) *kernel.CellView {
	t.Helper()
	v, err := h.w.Cell(context.Background(), pinWorkflow, schemas.MustMarshal(key))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func liveManifests(t *testing.T, h *harness) map[string]kernel.ManifestInfo {
	t.Helper()
	ms, err := h.w.Manifests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kernel.ManifestInfo{}
	for i, m := range ms {
		out[m.Name] = m
		if m.Current != (i == len(ms)-1) {
			t.Fatalf("manifests %+v: the current one is not last", ms)
		}
	}
	return out
}

// TestPinnedUpgrade walks a world through two pinned applies on disk: what
// is in flight at an apply --pin steps, takes its receipt and its events
// under its pin; an event its pin cannot take is refused whole with nothing
// journaled; a cell at rest moves when its state fits the current state
// schema and stays pinned (saying why) when not; retire is refused while
// anything is pinned and journaled once drained. The world replays to the
// same state from genesis, from a snapshot taken with two live manifests,
// and after a restart.
func TestPinnedUpgrade(t *testing.T) {
	ctx := context.Background()
	h := newPinHarness(t)
	mustApply(t, h, pinManifest(1))
	for _, c := range [][2]string{{"w", "fx"}, {"r", "plain"}, {"b", "big"}} {
		if err := pinSend(h, "com.test/PAct@1", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	v1 := loadManifest(t, pinManifest(1)).Hash
	// A plain apply still waits for quiescence.
	if res, err := h.w.Apply(ctx, loadManifest(t, pinManifest(2)), false); !errors.Is(err, kernel.ErrNotQuiescent) || res.Applied {
		t.Fatalf("plain apply while w waits: %+v, %v", res, err)
	}
	res := pinApply(t, h, 2)
	if res.PinnedNow != 1 || *res.Previous != v1 {
		t.Fatalf("apply --pin: %+v, want w pinned to v1", res)
	}
	v2 := res.ManifestHash
	if mr := lastManifestRec(t, h); !mr.Pin {
		t.Fatalf("manifest record %+v has no pin flag", mr)
	}
	ms := liveManifests(t, h)
	if m := ms["com.test/pins-v1"]; m.Pinned.Waiting != 1 || m.Intents != 1 || m.Drained || m.Current || m.Hash != v1 {
		t.Fatalf("v1 while w waits: %+v", m)
	}
	if m := ms["com.test/pins-v2"]; !m.Current || m.Drained || m.Seq != res.Seq {
		t.Fatalf("v2: %+v (applied at %d)", m, res.Seq)
	}
	// Neither the current nor a manifest with instances pinned can go.
	if _, err := h.w.Retire(ctx, v2); !errors.Is(err, kernel.ErrRetireCurrent) {
		t.Fatalf("retire the current manifest: %v", err)
	}
	rr, err := h.w.Retire(ctx, v1)
	var nd *kernel.NotDrainedError
	if !errors.As(err, &nd) || len(rr.BlockedBy) != 1 || string(rr.BlockedBy[0].Key) != string(schemas.MustMarshal("w")) || rr.BlockedBy[0].Status != kernel.StatusWaiting {
		t.Fatalf("retire v1 while w waits: %+v, %v", rr, err)
	}

	// An event w's pin cannot take is refused whole, journaling nothing.
	height := h.w.Journal().Height()
	err = pinSend(h, "com.test/PNote@1", "w", "")
	var pe *kernel.PinnedError
	if !errors.As(err, &pe) || !errors.Is(err, kernel.ErrPinned) || pe.Pin != v1 || pe.Current != v2 || pe.Workflow != pinWorkflow ||
		!strings.Contains(pe.Why, "that manifest does not route com.test/PNote@1 to workflow com.test/p@1") {
		t.Fatalf("note for pinned w: %v", err)
	}
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("a refused event journaled %d records", got-height)
	}
	// What w's pin takes, it takes under v1's code: no tag.
	if err := pinSend(h, "com.test/PAct@1", "w", "plain"); err != nil {
		t.Fatal(err)
	}
	if c := pinCell(t, h, "w"); stateJSON(c) != `{"n":2}` || c.Status != kernel.StatusWaiting || c.Pin != v1.String() {
		t.Fatalf("w after an act under its pin: %s %s pin %q", stateJSON(c), c.Status, c.Pin)
	}
	// r, at rest with a state v2 accepts, moves at its next input.
	if err := pinSend(h, "com.test/PNote@1", "r", ""); err != nil {
		t.Fatal(err)
	}
	if c := pinCell(t, h, "r"); stateJSON(c) != `{"n":21,"tag":"v2"}` || c.Pin != "" {
		t.Fatalf("r after a note: %s pin %q %s %s", stateJSON(c), c.Pin, c.Status, c.Reason)
	}
	// b's state (n 100) breaks v2's maximum: b stays on v1, and says why.
	if err := pinSend(h, "com.test/PAct@1", "b", "plain"); err != nil {
		t.Fatal(err)
	}
	if c := pinCell(t, h, "b"); stateJSON(c) != `{"n":101}` || c.Status != kernel.StatusCompleted || c.Pin != v1.String() ||
		!strings.Contains(c.PinReason, "does not validate") || !strings.Contains(c.PinReason, "must be <= 50") {
		t.Fatalf("b after an act: %s %s pin %q (%s)", stateJSON(c), c.Status, c.Pin, c.PinReason)
	}
	if err := pinSend(h, "com.test/PNote@1", "b", ""); !errors.Is(err, kernel.ErrPinned) {
		t.Fatalf("note for b, pinned at rest: %v", err)
	}

	// A snapshot with two live manifests and two pinned instances.
	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Live) != 1 || s.Live[0].Hash != v1 || countPinned(s) != 2 {
		t.Fatalf("snapshot: live %+v, %d pinned instances", s.Live, countPinned(s))
	}

	// w's receipt is taken under v1 (+10, no tag); at rest, w fits v2 and moves.
	its, err := h.w.PendingIntents(ctx)
	if err != nil || len(its) != 1 {
		t.Fatalf("pending intents %v, %v", its, err)
	}
	sr := receipts.Sign(pinExecutorKey, receipts.Receipt{World: its[0].World, Intent: its[0].Hash, Effect: its[0].Effect, Executor: "fx",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{}), Attempt: 1})
	if _, err := h.w.SubmitReceipt(ctx, sr); err != nil {
		t.Fatal(err)
	}
	if c := pinCell(t, h, "w"); stateJSON(c) != `{"n":12}` || c.Status != kernel.StatusCompleted || c.Pin != "" {
		t.Fatalf("w after its receipt: %s %s pin %q", stateJSON(c), c.Status, c.Pin)
	}
	ms = liveManifests(t, h)
	if m := ms["com.test/pins-v1"]; m.Pinned.Completed != 1 || m.PinnedAtRest != 1 || m.Intents != 0 || m.Drained {
		t.Fatalf("v1 with b pinned at rest: %+v", m)
	}
	if rr, err := h.w.Retire(ctx, v1); !errors.Is(err, kernel.ErrNotDrained) || len(rr.BlockedBy) != 1 || rr.BlockedBy[0].Reason == "" {
		t.Fatalf("retire v1 while b stays on it: %+v, %v", rr, err)
	}
	// A plain apply waits for b too: it would leave b no manifest.
	if res, err := h.w.Apply(ctx, loadManifest(t, pinManifest(3)), false); !errors.Is(err, kernel.ErrNotQuiescent) ||
		len(res.BlockedBy) != 1 || res.BlockedBy[0].Kind != "pinned" || !strings.Contains(res.BlockedBy[0].Reason, "must be <= 50") {
		t.Fatalf("plain apply with b pinned at rest: %+v, %v", res, err)
	}
	h.reopen() // from the snapshot, then the tail
	if c := pinCell(t, h, "b"); c.Pin != v1.String() {
		t.Fatalf("b after reopen: pin %q", c.Pin)
	}

	// v3 accepts b's state: the apply moves it, and v1 and v2 drain.
	res3 := pinApply(t, h, 3)
	if c := pinCell(t, h, "b"); c.Pin != "" {
		t.Fatalf("b after v3: pin %q (%s)", c.Pin, c.PinReason)
	}
	ms = liveManifests(t, h)
	if !ms["com.test/pins-v1"].Drained || !ms["com.test/pins-v2"].Drained || len(ms) != 3 {
		t.Fatalf("after v3: %+v", ms)
	}
	rr, err = h.w.Retire(ctx, v1)
	if err != nil || rr.Seq == 0 {
		t.Fatalf("retire drained v1: %+v, %v", rr, err)
	}
	recs := allRecords(t, h.w)
	var ret records.RetireRec
	if last := recs[len(recs)-1]; last.Kind != journal.KindRetire || schemas.UnmarshalTrusted(last.Body, &ret) != nil || ret.Hash != v1 {
		t.Fatalf("last record %s, want the retire of v1", last.Kind)
	}
	if _, err := h.w.Retire(ctx, v1); !errors.Is(err, kernel.ErrNotLive) {
		t.Fatalf("retire v1 twice: %v", err)
	}
	if ms := liveManifests(t, h); len(ms) != 2 || !ms["com.test/pins-v3"].Current || ms["com.test/pins-v3"].Hash != res3.ManifestHash {
		t.Fatalf("after retire: %+v", ms)
	}
	// A plain apply is allowed again: nothing is pinned or in flight.
	if err := pinSend(h, "com.test/PNote@1", "b", ""); err != nil {
		t.Fatal(err)
	}
	want, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The same state after a restart (snapshot and tail) and from genesis,
	// the snapshot with two live manifests recomputed on the way.
	h.reopen()
	got, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(want, got); d != "" {
		t.Fatalf("reopened world differs: %s", d)
	}
	h.w.Close()
	h.w = nil
	cfg := h.config()
	cfg.FromGenesis, cfg.VerifySnapshots = true, true
	g, err := kernel.Open(h.db.Stores(), cfg)
	if err != nil {
		t.Fatalf("replay from genesis: %v", err)
	}
	defer g.Close()
	if g.VerifiedSnapshots() != 1 {
		t.Fatalf("replay from genesis verified %d snapshots, want 1", g.VerifiedSnapshots())
	}
	gs, err := g.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(want, gs); d != "" {
		t.Fatalf("genesis replay differs: %s", d)
	}
}

func countPinned(s *snapshot.State) int {
	n := 0
	for _, in := range s.Instances {
		if in.Pin != nil {
			n++
		}
	}
	return n
}

// emitManifest is version v of a world where com.test/src@1 opens an
// effect on an act and, on its receipt, emits a ping for com.test/dst@1;
// v2 does not route pings (and renames the manifest), v1 and v3 do.
func emitManifest(v int) string {
	subs := `{"event":"com.test/PAct@1","workflow":"com.test/src@1","key_field":"key"}`
	if v != 2 {
		subs += `,{"event":"com.test/PPing@1","workflow":"com.test/dst@1","key_field":"key"}`
	}
	return `[
 {"$kind":"defschema","name":"com.test/PAct@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"]}},
 {"$kind":"defschema","name":"com.test/PPing@1","schema":{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}},
 {"$kind":"defschema","name":"com.test/PEvent@1","variant":{"Act":"com.test/PAct@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"com.test/PState@1","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}},
 {"$kind":"defschema","name":"com.test/PKey@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/PFx@1","schema":{"type":"object"}},
 {"$kind":"defeffect","name":"com.test/pfx@1","params":"com.test/PFx@1","receipt":"com.test/PFx@1"},
 {"$kind":"defmodule","name":"com.test/emit_mod@1","runtime":{"kind":"builtin","builtin":"test/emit","identity":"test/emit@1"}},
 {"$kind":"defworkflow","name":"com.test/src@1","state":"com.test/PState@1","event":"com.test/PEvent@1","key_schema":"com.test/PKey@1","effects_emitted":["com.test/pfx@1"],"impl":{"module":"com.test/emit_mod@1","entrypoint":"src"}},
 {"$kind":"defworkflow","name":"com.test/dst@1","state":"com.test/PState@1","event":"com.test/PPing@1","key_schema":"com.test/PKey@1","effects_emitted":[],"impl":{"module":"com.test/emit_mod@1","entrypoint":"dst"}},
 {"$kind":"manifest","name":"com.test/emit-v` + fmt.Sprint(v) + `","routing":{"subscriptions":[` + subs + `]}}
]`
}

// TestPinnedStepEmits: a step under a pin validates and routes what it
// emits with its own manifest, and each target takes the event under its
// own: a ping the current manifest does not route to its target fails the
// emitting step with a fault naming the target and why (never a silent
// drop), and one it does route is delivered and stepped under it.
func TestPinnedStepEmits(t *testing.T) {
	ctx := context.Background()
	h := newHarnessWith(t, 31, true, func(h *harness) {
		kr := receipts.NewKeyring()
		if err := kr.Add("fx", pinExecutorKey.Public().(ed25519.PublicKey), []string{"com.test/pfx@1"}); err != nil {
			t.Fatal(err)
		}
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
		n := func(in *modules.Input) int64 {
			if in.State == nil {
				return 0
			}
			return toInt(decodeMap(nil, in.State)["n"])
		}
		h.builtins.MustRegister("test/emit", "test/emit@1", "src", func(in *modules.Input) (*modules.Output, error) {
			ev := decodeMap(nil, in.Event.Value)
			out := &modules.Output{State: schemas.MustMarshal(map[string]any{"n": n(in) + 1})}
			if ev["$tag"] == "Act" {
				out.Effects = []modules.EffectOut{{Effect: "com.test/pfx@1", Params: schemas.MustMarshal(map[string]any{})}}
			} else {
				var key string
				_ = schemas.UnmarshalTrusted(in.Event.Key, &key)
				out.DomainEvents = []modules.EventOut{{Schema: "com.test/PPing@1", Value: schemas.MustMarshal(map[string]any{"key": key})}}
			}
			return out, nil
		})
		h.builtins.MustRegister("test/emit", "test/emit@1", "dst", func(in *modules.Input) (*modules.Output, error) {
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"n": n(in) + 1})}, nil
		})
	})
	mustApply(t, h, emitManifest(1))
	for _, k := range []string{"s1", "s2"} {
		if _, err := h.send("com.test/PAct@1", fmt.Sprintf(`{"key":%q,"act":"fx"}`, k)); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := h.w.ApplyWith(ctx, loadManifest(t, emitManifest(2)), kernel.ApplyOptions{Pin: true}); err != nil || res.PinnedNow != 2 {
		t.Fatalf("apply --pin v2: %+v, %v", res, err)
	}
	its, err := h.w.PendingIntents(ctx)
	if err != nil || len(its) != 2 {
		t.Fatalf("pending intents %v, %v", its, err)
	}
	receipt := func(i int) {
		t.Helper()
		sr := receipts.Sign(pinExecutorKey, receipts.Receipt{World: its[i].World, Intent: its[i].Hash, Effect: its[i].Effect, Executor: "fx",
			Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{}), Attempt: 1})
		if _, err := h.w.SubmitReceipt(ctx, sr); err != nil {
			t.Fatal(err)
		}
	}
	key := func(i int) string {
		var k string
		_ = schemas.UnmarshalTrusted(its[i].OriginKey, &k)
		return k
	}
	// Under v1, src's ping routes to dst; dst is on v2, which does not
	// route pings: the emitting step fails, saying so.
	receipt(0)
	src, err := h.w.Cell(ctx, "com.test/src@1", schemas.MustMarshal(key(0)))
	if err != nil {
		t.Fatal(err)
	}
	if src.Status != kernel.StatusFailed || !strings.Contains(src.Reason, "domain event 0") ||
		!strings.Contains(src.Reason, "does not route com.test/PPing@1 to workflow com.test/dst@1") {
		t.Fatalf("src after a ping v2 cannot take: %s %q", src.Status, src.Reason)
	}
	if _, err := h.w.Cell(ctx, "com.test/dst@1", schemas.MustMarshal(key(0))); !errors.Is(err, kernel.ErrNoCell) {
		t.Fatalf("dst got the ping: %v", err)
	}
	// v3 routes pings again: the other src's ping reaches dst.
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, emitManifest(3)), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	receipt(1)
	dst, err := h.w.Cell(ctx, "com.test/dst@1", schemas.MustMarshal(key(1)))
	if err != nil || stateJSON(dst) != `{"n":1}` {
		t.Fatalf("dst after a ping v3 routes: %v %v", dst, err)
	}
	if src, _ := h.w.Cell(ctx, "com.test/src@1", schemas.MustMarshal(key(1))); src.Status != kernel.StatusCompleted || src.Pin != "" {
		t.Fatalf("second src: %s pin %q", src.Status, src.Pin)
	}
	// Re-applying v1, still live for the failed src, makes it current again.
	res, err := h.w.ApplyWith(ctx, loadManifest(t, emitManifest(1)), kernel.ApplyOptions{Pin: true})
	if err != nil || !res.Applied {
		t.Fatalf("apply --pin v1 again: %+v, %v", res, err)
	}
	ms, err := h.w.Manifests(ctx)
	if err != nil || len(ms) != 3 || ms[2].Name != "com.test/emit-v1" || !ms[2].Current {
		t.Fatalf("manifests after v1 again: %+v, %v", ms, err)
	}
	want, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.reopen()
	got, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(want, got); d != "" {
		t.Fatalf("reopened world differs: %s", d)
	}
}
