package kernel_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// notedOrderStep is the order workflow before it charged: it notes the
// order and opens no intent.
func notedOrderStep(in *modules.Input) (*modules.Output, error) {
	val := decodeMap(nil, in.Event.Value)["$value"].(map[string]any)
	return &modules.Output{State: schemas.MustMarshal(map[string]any{"pc": "noted", "order_id": val["order_id"]})}, nil
}

// notingManifest is orderManifest with the noting code and no effect
// allowed: the world a shadow of orderManifest adds the charge to.
func notingManifest(t *testing.T) string {
	t.Helper()
	src := strings.Replace(orderManifest, `"builtin":"test/order","identity":"test/order@1"`, `"builtin":"test/order0","identity":"test/order0@1"`, 1)
	src = strings.Replace(src, `"effects_emitted":["com.test/payment.charge@1"]`, `"effects_emitted":[]`, 1)
	if src == orderManifest || !strings.Contains(src, `"effects_emitted":[]`) {
		t.Fatal("orderManifest changed shape; cannot derive the noting manifest")
	}
	return src
}

func loadManifest(t *testing.T, src string) *manifest.Manifest {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// liveMark is what a shadow must leave as it was: the live journal's
// height and the objects of the live CAS.
type liveMark struct {
	height  uint64
	objects int
	bytes   int
}

func markLive(t *testing.T, h *harness) liveMark {
	t.Helper()
	m := liveMark{height: h.db.Journal().Height()}
	if err := h.db.CAS().Iterate(func(_ schemas.Hash, size int) error {
		m.objects++
		m.bytes += size
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

func cellHash(t *testing.T, h *harness, wf string, key any) schemas.Hash {
	t.Helper()
	v, err := h.w.Cell(context.Background(), wf, schemas.MustMarshal(key))
	if err != nil || v.StateHash == nil {
		t.Fatalf("cell %s %v: %+v %v", wf, key, v, err)
	}
	return *v.StateHash
}

// TestShadowAddsAnEffect: a live world notes orders without charging; the
// shadow of a manifest whose order workflow charges re-feeds the last three
// orders from a copy that opens from the live snapshot before them, and
// reports the allowlist change, the intents opened and still pending, the
// waiting instances and the cells created and changed, with their state
// hashes. The live world is untouched: its journal, its CAS and its
// publisher saw nothing.
func TestShadowAddsAnEffect(t *testing.T) {
	ctx := context.Background()
	pub := &capture{}
	h := newHarnessWith(t, 7, true, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.builtins.MustRegister("test/order0", "test/order0@1", "step", notedOrderStep)
		h.extra = func(c *kernel.Config) { c.Publisher = pub }
	})
	mustApply(t, h, notingManifest(t))
	createOrder(t, h, "o1")
	snap, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, id := range []string{"o2", "o3", "o1"} {
		seq, err := h.send("com.test/OrderCreated@1", `{"order_id":"`+id+`","amount":250}`)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	o1Noted := cellHash(t, h, "com.test/order@1", "o1")
	live := markLive(t, h)
	proposed := loadManifest(t, orderManifest)

	rep, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: proposed, Window: 3})
	if err != nil {
		t.Fatalf("shadow: %v", err)
	}
	if got := markLive(t, h); got != live {
		t.Fatalf("the live world changed: %+v, was %+v", got, live)
	}
	if n := len(pub.intents()); n != 0 {
		t.Fatalf("the live publisher was given %d intents", n)
	}
	if st, err := h.w.Status(ctx); err != nil || st.Inflight != 0 || !st.Quiescent {
		t.Fatalf("live status after the shadow: %+v %v", st, err)
	}

	if rep.Height != live.height || rep.Start != seqs[0]-1 || rep.Opened.Snapshot != snap.Seq || rep.Opened.Checkpoint != snap.Checkpoint {
		t.Fatalf("copy: height %d start %d opened %+v; want height %d, start %d, from snapshot %d", rep.Height, rep.Start, rep.Opened, live.height, seqs[0]-1, snap.Seq)
	}
	if !rep.Apply.Applied || rep.Apply.ManifestHash != proposed.Hash {
		t.Fatalf("apply in the copy: %+v", rep.Apply)
	}
	in := rep.Inputs
	if in.Source != "window" || in.Window != 3 || in.Events != 3 || in.From != seqs[0] || in.To != seqs[2] ||
		in.Submitted != 3 || in.RefusedTotal != 0 || len(in.NotReplayed) != 0 {
		t.Fatalf("inputs: %+v", in)
	}
	const charge, order = "com.test/payment.charge@1", "com.test/order@1"
	if len(rep.Allowlist) != 1 || rep.Allowlist[0].Workflow != order || len(rep.Allowlist[0].Old) != 0 ||
		!slices.Equal(rep.Allowlist[0].New, []string{charge}) || !slices.Equal(rep.Allowlist[0].Added, []string{charge}) || len(rep.Allowlist[0].Removed) != 0 {
		t.Fatalf("allowlist: %+v", rep.Allowlist)
	}
	if rep.EffectsTotal != 3 || len(rep.Effects) != 3 || !slices.Equal(rep.ByEffect, []kernel.EffectCount{{Effect: charge, Count: 3}}) {
		t.Fatalf("effects: %d %+v by effect %+v", rep.EffectsTotal, rep.Effects, rep.ByEffect)
	}
	for i, id := range []string{"o2", "o3", "o1"} {
		e := rep.Effects[i]
		if e.Effect != charge || e.Workflow != order || string(e.Key) != string(schemas.MustMarshal(id)) || e.Hash.IsZero() || e.Seq <= rep.Start {
			t.Errorf("effect %d: %+v, want a charge from %s", i, e, id)
		}
	}
	if rep.PendingTotal != 3 || len(rep.Pending) != 3 || rep.Pending[0].Hash != rep.Effects[0].Hash {
		t.Fatalf("pending: %d %+v", rep.PendingTotal, rep.Pending)
	}
	if rep.Instances.Waiting != 3 || rep.Instances.Failed != 0 || rep.NotCompletedTotal != 3 {
		t.Fatalf("instances: %+v, %d not completed", rep.Instances, rep.NotCompletedTotal)
	}
	for _, si := range rep.NotCompleted {
		if si.Status != kernel.StatusWaiting || !si.New || si.Workflow != order {
			t.Errorf("instance %+v", si)
		}
	}
	awaiting := func(id string) schemas.Hash {
		return schemas.HashBytes(schemas.MustMarshal(map[string]any{"pc": "awaiting", "order_id": id, "receipts": uint64(0)}))
	}
	if len(rep.Deltas) != 1 {
		t.Fatalf("deltas: %+v", rep.Deltas)
	}
	d := rep.Deltas[0]
	if d.Workflow != order || d.Stepped != 3 || d.Created != 2 || d.Changed != 1 || d.Deleted != 0 || d.Unchanged != 0 || len(d.Keys) != 3 {
		t.Fatalf("delta: %+v", d)
	}
	for i, want := range []struct {
		id     string
		change string
		before *schemas.Hash
	}{{"o2", kernel.CellCreated, nil}, {"o3", kernel.CellCreated, nil}, {"o1", kernel.CellChanged, &o1Noted}} {
		k := d.Keys[i]
		if string(k.Key) != string(schemas.MustMarshal(want.id)) || k.Change != want.change || k.After == nil || *k.After != awaiting(want.id) ||
			(k.Before == nil) != (want.before == nil) || (k.Before != nil && *k.Before != *want.before) {
			t.Errorf("key %d: %+v, want %s %s", i, k, want.id, want.change)
		}
	}

	// Lists are capped, totals are not.
	capped, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: proposed, Window: 3, List: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(capped.Effects) != 1 || capped.EffectsTotal != 3 || len(capped.Pending) != 1 || capped.PendingTotal != 3 ||
		len(capped.NotCompleted) != 1 || len(capped.Deltas[0].Keys) != 1 || capped.Deltas[0].Created != 2 {
		t.Fatalf("capped report: %+v", capped)
	}
	if got := markLive(t, h); got != live {
		t.Fatalf("the live world changed: %+v, was %+v", got, live)
	}
}

// TestShadowEvents: given events run at the live height under the
// proposed manifest (here the same one: apply is unchanged); one deletes a
// cell, one changes one, one creates one; a resend under a remembered
// idempotency key is a duplicate and steps nothing; invalid events are
// reported and the rest still run. A window re-feeds only ingress events,
// not those steps emitted.
func TestShadowEvents(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 3, true)
	mustApply(t, h, counterManifest)
	for _, ev := range []string{`{"key":"a","by":5}`, `{"key":"b","by":3}`, `{"key":"b","by":8}`} {
		if _, err := h.send("com.test/CountEvent@1", ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"d","by":1}`), IdempotencyKey: "idem-d"}); err != nil {
		t.Fatal(err)
	}
	live := markLive(t, h)
	bBefore := cellHash(t, h, "com.test/counter@1", "b")
	m := loadManifest(t, counterManifest)

	if _, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Window: 2, Events: []kernel.Event{{Schema: "x", JSON: []byte("{}")}}}); !errors.Is(err, kernel.ErrInvalid) {
		t.Fatalf("events and a window: %v, want ErrInvalid", err)
	}
	evs := []kernel.Event{
		{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"a","by":0}`)},
		{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"b","by":2}`)},
		{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"c","by":1}`)},
		{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"","by":1}`)},
		{Schema: "com.test/Nope@1", JSON: []byte(`{}`)},
		{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"d","by":1}`), IdempotencyKey: "idem-d"},
	}
	rep, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	if got := markLive(t, h); got != live {
		t.Fatalf("the live world changed: %+v, was %+v", got, live)
	}
	if rep.Start != live.height || !rep.Apply.Unchanged || rep.Apply.Applied || len(rep.Allowlist) != 0 {
		t.Fatalf("start %d apply %+v allowlist %+v", rep.Start, rep.Apply, rep.Allowlist)
	}
	in := rep.Inputs
	if in.Source != "events" || in.Events != 6 || in.Submitted != 4 || in.Duplicates != 1 || in.RefusedTotal != 2 || len(in.Refused) != 2 ||
		in.Refused[0].Index != 3 || in.Refused[1].Index != 4 || !strings.Contains(in.Refused[1].Reason, "com.test/Nope@1") {
		t.Fatalf("inputs: %+v", in)
	}
	if len(rep.Deltas) != 2 { // the counter, and the audit (b reached 13: a Total)
		t.Fatalf("deltas: %+v", rep.Deltas)
	}
	d := rep.Deltas[1]
	if d.Workflow != "com.test/counter@1" || d.Stepped != 3 || d.Created != 1 || d.Changed != 1 || d.Deleted != 1 || len(d.Keys) != 3 {
		t.Fatalf("counter delta: %+v", d)
	}
	if k := d.Keys[0]; k.Change != kernel.CellDeleted || k.Before == nil || k.After != nil {
		t.Errorf("a: %+v", k)
	}
	if k := d.Keys[1]; k.Change != kernel.CellChanged || *k.Before != bBefore ||
		*k.After != schemas.HashBytes(schemas.MustMarshal(map[string]any{"count": uint64(13)})) {
		t.Errorf("b: %+v", k)
	}
	if a := rep.Deltas[0]; a.Workflow != "com.test/audit@1" || a.Changed != 1 || a.Stepped != 1 {
		t.Errorf("audit delta: %+v", a)
	}
	if rep.EffectsTotal != 0 || rep.PendingTotal != 0 || rep.NotCompletedTotal != 0 {
		t.Fatalf("effects %d pending %d not completed %d", rep.EffectsTotal, rep.PendingTotal, rep.NotCompletedTotal)
	}

	// The window's four ingress events; b's Total (emitted) is not re-fed.
	win, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if win.Inputs.Window != kernel.DefaultShadowWindow || win.Inputs.Events != 4 || win.Inputs.Submitted != 4 || win.Start != 2 { // after the world record and the manifest
		t.Fatalf("window inputs: %+v, start %d", win.Inputs, win.Start)
	}
}

// ctxWorld routes com.test/Ping@1 by id to a workflow whose state is what
// its context said (the test/ctx builtin).
const ctxWorld = `[
 {"$kind":"defschema","name":"com.test/Ping@1","schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}},
 {"$kind":"defschema","name":"com.test/CtxState@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"com.test/Id@1","schema":{"type":"string"}},
 {"$kind":"defmodule","name":"com.test/ctx_mod@1","runtime":{"kind":"builtin","builtin":"test/ctx","identity":"test/ctx@1"}},
 {"$kind":"defworkflow","name":"com.test/ctx@1","state":"com.test/CtxState@1","event":"com.test/Ping@1","context":"sys/WorkflowContext@1","key_schema":"com.test/Id@1","effects_emitted":[],"impl":{"module":"com.test/ctx_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/ctx","routing":{"subscriptions":[{"event":"com.test/Ping@1","workflow":"com.test/ctx@1","key_field":"id"}]}}
]`

// TestStepContextCarriesHashes: a step's context names the manifest in
// force and its workflow's definition, before and after an apply that
// changes the manifest (a builtin that keeps the two as its state).
func TestStepContextCarriesHashes(t *testing.T) {
	h := newHarnessWith(t, 6, false, func(h *harness) {
		h.builtins.MustRegister("test/hashes", "test/hashes@1", "step", func(in *modules.Input) (*modules.Output, error) {
			c := decodeMap(nil, in.Ctx)
			return &modules.Output{State: schemas.MustMarshal(map[string]any{
				"manifest_hash": c["manifest_hash"], "workflow_hash": c["workflow_hash"]})}, nil
		})
	})
	world := strings.Replace(ctxWorld, `"builtin":"test/ctx","identity":"test/ctx@1"`, `"builtin":"test/hashes","identity":"test/hashes@1"`, 1)
	changed := strings.Replace(world, `{"$kind":"defschema","name":"com.test/Id@1"`,
		`{"$kind":"defschema","name":"com.test/Unused@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/Id@1"`, 1)
	for i, src := range []string{world, changed} {
		m := loadManifest(t, src)
		mustApply(t, h, src)
		if _, err := h.send("com.test/Ping@1", `{"id":"p"}`); err != nil {
			t.Fatal(err)
		}
		v, err := h.w.Cell(context.Background(), "com.test/ctx@1", schemas.MustMarshal("p"))
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		if err := schemas.UnmarshalTrusted(v.State, &st); err != nil {
			t.Fatal(err)
		}
		if got, want := st["manifest_hash"], m.Hash.String(); got != want {
			t.Errorf("manifest %d: the context's manifest_hash is %v, want %s", i, got, want)
		}
		if got, want := st["workflow_hash"], m.Workflows["com.test/ctx@1"].Hash.String(); got != want {
			t.Errorf("manifest %d: the context's workflow_hash is %v, want %s", i, got, want)
		}
	}
}

// TestShadowReplaysStamps: re-fed events carry their original time and
// entropy, so a workflow that reads its context computes in the shadow of
// the same manifest exactly the states it computed live.
func TestShadowReplaysStamps(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 5, true)
	src := ctxWorld
	mustApply(t, h, src)
	for _, id := range []string{"x", "y", "x"} {
		if _, err := h.send("com.test/Ping@1", `{"id":"`+id+`"}`); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: loadManifest(t, src), Window: 2})
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Deltas[0]
	if d.Created != 1 || d.Changed != 1 || len(d.Keys) != 2 {
		t.Fatalf("delta: %+v", d)
	}
	for _, k := range d.Keys {
		var id string
		if err := schemas.UnmarshalTrusted(k.Key, &id); err != nil {
			t.Fatal(err)
		}
		if live := cellHash(t, h, "com.test/ctx@1", id); *k.After != live {
			t.Errorf("cell %s: shadow state %s, live %s", id, k.After, live)
		}
	}
}

// TestShadowRefusedUnlessQuiescent: the apply in the copy is refused, with
// its blockers, where the copy is not quiescent: at the live height while
// an order awaits its charge, or just before a window whose start has one
// waiting. A window that starts where the world was quiescent runs; the
// receipt inside it is not replayed, and the report counts it.
func TestShadowRefusedUnlessQuiescent(t *testing.T) {
	ctx := context.Background()
	h, pub := newOrderHarness(t, true)
	createOrder(t, h, "o1")
	its := pub.intents()
	if len(its) != 1 {
		t.Fatalf("%d intents", len(its))
	}
	if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[0], receipts.StatusOK, map[string]any{"charge_id": "c1"})); err != nil {
		t.Fatal(err)
	}
	createOrder(t, h, "o2")
	createOrder(t, h, "o3")
	live := markLive(t, h)
	m := loadManifest(t, orderManifest)

	rep, err := h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Events: []kernel.Event{{Schema: "com.test/OrderCreated@1", JSON: []byte(`{"order_id":"o4","amount":1}`)}}})
	if !errors.Is(err, kernel.ErrNotQuiescent) || rep == nil || rep.Apply == nil || len(rep.Apply.BlockedBy) != 4 {
		t.Fatalf("shadow at the live height: %v %+v", err, rep)
	}
	rep, err = h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Window: 1})
	if !errors.Is(err, kernel.ErrNotQuiescent) || !strings.Contains(err.Error(), "just before the window's first ingress event") ||
		rep == nil || len(rep.Apply.BlockedBy) != 2 || rep.Apply.BlockedBy[0].Kind != "instance" || string(rep.Apply.BlockedBy[0].Key) != string(schemas.MustMarshal("o2")) {
		t.Fatalf("shadow of a window starting at a waiting order: %v %+v", err, rep)
	}
	rep, err = h.w.Shadow(ctx, kernel.ShadowRequest{Manifest: m, Window: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Inputs.NotReplayed, []kernel.KindCount{{Kind: journal.KindReceipt, Count: 1}}) || rep.PendingTotal != 3 || rep.Instances.Waiting != 3 {
		t.Fatalf("window of three orders: inputs %+v, pending %d, instances %+v", rep.Inputs, rep.PendingTotal, rep.Instances)
	}
	if got := markLive(t, h); got != live {
		t.Fatalf("the live world changed: %+v, was %+v", got, live)
	}
	if n := len(pub.intents()); n != 3 {
		t.Fatalf("the live publisher has %d intents, want the live world's 3", n)
	}
}
