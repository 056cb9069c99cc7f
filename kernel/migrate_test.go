package kernel_test

import (
	"context"
	"crypto/ed25519"
	"errors"
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

// migManifest is pinManifest(1) moved to state schema com.test/PState@2
// ({"n", "m"}, both required), run by builtin test/mig-KIND, whose
// workflow declares the migration "migrate" from com.test/PState@1.
func migManifest(kind string) string {
	src := pinManifest(1)
	src = strings.Replace(src, `{"$kind":"defschema","name":"com.test/PKey@1"`,
		`{"$kind":"defschema","name":"com.test/PState@2","schema":{"type":"object","properties":{"n":{"type":"integer"},"m":{"type":"integer"}},"required":["n","m"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/PKey@1"`, 1)
	src = strings.Replace(src, `"com.test/pin_mod@1","runtime":{"kind":"builtin","builtin":"test/pin1","identity":"test/pin@1"}`,
		`"com.test/pin_mod@1","runtime":{"kind":"builtin","builtin":"test/mig-`+kind+`","identity":"test/mig@`+kind+`"}`, 1)
	src = strings.Replace(src, `"state":"com.test/PState@1"`, `"state":"com.test/PState@2"`, 1)
	src = strings.Replace(src, `"entrypoint":"step"}}`, `"entrypoint":"step"},"migrate":{"entrypoint":"migrate","from":["com.test/PState@1"]}}`, 1)
	return strings.Replace(src, `"name":"com.test/pins-v1"`, `"name":"com.test/mig-`+kind+`"`, 1)
}

// migStep is pinStep(1) keeping m = 2n ("bad": m = 3n, which does not
// commute with a migration to m = 2n).
func migStep(kind string) modules.StepFunc {
	v1 := pinStep(1)
	return func(in *modules.Input) (*modules.Output, error) {
		if in.State != nil {
			s := decodeMap(nil, in.State)
			if _, ok := s["m"]; !ok {
				return nil, errors.New("a state without m")
			}
		}
		out, err := v1(in)
		if err != nil {
			return nil, err
		}
		n := toInt(decodeMap(nil, out.State)["n"])
		m := 2 * n
		if kind == "bad" {
			m = 3 * n
		}
		out.State = schemas.MustMarshal(map[string]any{"n": n, "m": m})
		return out, nil
	}
}

// migMigrate migrates {"n"} to {"n", "m": 2n}; "fault" fails from n = 11
// on, "invalid" returns a state without m, "emits" opens an effect too,
// "drift" gives m = 2n + 1 (a build that is not the one journaled).
func migMigrate(kind string) modules.StepFunc {
	return func(in *modules.Input) (*modules.Output, error) {
		if in.State != nil || in.Event.Schema != "com.test/PState@1" {
			return nil, errors.New("the migration takes the old state as its event of PState@1")
		}
		n := toInt(decodeMap(nil, in.Event.Value)["n"])
		out := &modules.Output{State: schemas.MustMarshal(map[string]any{"n": n, "m": 2 * n})}
		switch kind {
		case "fault":
			if n >= 11 {
				return nil, errors.New("n is too large to migrate")
			}
		case "invalid":
			out.State = schemas.MustMarshal(map[string]any{"n": n})
		case "emits":
			out.Effects = []modules.EffectOut{{Effect: "com.test/pfx@1", Params: schemas.MustMarshal(map[string]any{})}}
		case "drift":
			out.State = schemas.MustMarshal(map[string]any{"n": n, "m": 2*n + 1})
		}
		return out, nil
	}
}

var migKinds = []string{"good", "bad", "fault", "invalid", "emits"}

// newMigHarness registers v1 and every test/mig-KIND; swap runs another
// kind's migration under a module's identity (a build that is not the one
// the journal was written with).
func newMigHarness(t *testing.T, swap map[string]string) *harness {
	kr := receipts.NewKeyring()
	if err := kr.Add("fx", pinExecutorKey.Public().(ed25519.PublicKey), []string{"com.test/pfx@1"}); err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, 37, true, func(h *harness) {
		h.builtins.MustRegister("test/pin1", "test/pin@1", "step", pinStep(1))
		for _, k := range migKinds {
			h.builtins.MustRegister("test/mig-"+k, "test/mig@"+k, "step", migStep(k))
			mk := k
			if s, ok := swap[k]; ok {
				mk = s
			}
			h.builtins.MustRegister("test/mig-"+k, "test/mig@"+k, "migrate", migMigrate(mk))
		}
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
}

// moveRecs decodes the move records after seq from.
func moveRecs(t *testing.T, h *harness, from uint64) []records.MoveRec {
	t.Helper()
	var out []records.MoveRec
	for _, r := range allRecords(t, h.w) {
		if r.Seq <= from || r.Kind != journal.KindMove {
			continue
		}
		var mr records.MoveRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			t.Fatal(err)
		}
		out = append(out, mr)
	}
	return out
}

func hashOf(v any) schemas.Hash { return schemas.HashBytes(schemas.MustMarshal(v)) }

// sameAfterReplay checks that a restart and a replay from genesis reach
// the state the world has now.
func sameAfterReplay(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
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
	h.w.Close()
	h.w = nil
	cfg := h.config()
	cfg.FromGenesis = true
	g, err := kernel.Open(h.db.Stores(), cfg)
	if err != nil {
		t.Fatalf("replay from genesis: %v", err)
	}
	defer g.Close()
	gs, err := g.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(want, gs); d != "" {
		t.Fatalf("genesis replay differs: %s", d)
	}
}

// TestMigrationAtRest, on disk: after an apply --pin of a manifest whose
// state schema refuses v1's states and whose workflow declares a
// migration, a waiting cell that comes to rest under its pin, and a cell
// at rest that takes its next input under the older manifest, each move
// through the migration: one move record (since "rest", the old and the
// new state's hashes), the migrated state in the cell, no pin; their next
// inputs run the new code. The world replays to the same state after a
// restart and from genesis.
func TestMigrationAtRest(t *testing.T) {
	ctx := context.Background()
	h := newMigHarness(t, nil)
	mustApply(t, h, pinManifest(1))
	v1 := loadManifest(t, pinManifest(1)).Hash
	for _, c := range [][2]string{{"a", "plain"}, {"w", "fx"}} {
		if err := pinSend(h, "com.test/PAct@1", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	res, err := h.w.ApplyWith(ctx, loadManifest(t, migManifest("good")), kernel.ApplyOptions{Pin: true})
	if err != nil || res.PinnedNow != 1 {
		t.Fatalf("apply --pin: %+v, %v", res, err)
	}
	v2 := res.ManifestHash
	height := h.w.Journal().Height()

	receiptFor(t, h, "w") // v1's code: n = 1 + 10; then at rest, migrated
	w := pinCell(t, h, "w")
	if w.Pin != "" || stateJSON(w) != `{"m":22,"n":11}` || w.Status != kernel.StatusCompleted {
		t.Fatalf("w after its receipt: pin %q (%s), state %s, %s", w.Pin, w.PinReason, stateJSON(w), w.Status)
	}
	if err := pinSend(h, "com.test/PAct@1", "a", "plain"); err != nil { // v1's code: n = 2; then migrated
		t.Fatal(err)
	}
	if a := pinCell(t, h, "a"); a.Pin != "" || stateJSON(a) != `{"m":4,"n":2}` {
		t.Fatalf("a after its input: pin %q (%s), state %s", a.Pin, a.PinReason, stateJSON(a))
	}
	moves := moveRecs(t, h, height)
	if len(moves) != 2 {
		t.Fatalf("%d move records, want 2: %+v", len(moves), moves)
	}
	for i, want := range []struct {
		key      string
		old, new any
	}{{"w", map[string]any{"n": 11}, map[string]any{"n": 11, "m": 22}}, {"a", map[string]any{"n": 2}, map[string]any{"n": 2, "m": 4}}} {
		mr := moves[i]
		if string(mr.Key) != string(schemas.MustMarshal(want.key)) || mr.From != v1 || mr.To != v2 || mr.Since != "rest" || len(mr.Inputs) != 0 ||
			mr.Migrated == nil || *mr.Migrated != hashOf(want.old) || mr.StateHash == nil || *mr.StateHash != hashOf(want.new) {
			t.Fatalf("move %d: %+v, want %s from %v to %v", i, mr, want.key, want.old, want.new)
		}
	}
	if err := pinSend(h, "com.test/PAct@1", "w", "plain"); err != nil { // the new code: n = 12, m = 24
		t.Fatal(err)
	}
	if w := pinCell(t, h, "w"); stateJSON(w) != `{"m":24,"n":12}` {
		t.Fatalf("w under the new code: %s", stateJSON(w))
	}
	if m := liveManifests(t, h)["com.test/pins-v1"]; !m.Drained {
		t.Fatalf("v1 after both cells moved: %+v", m)
	}
	sameAfterReplay(t, h)
}

// TestMigrationFailsLeavesPinned: a migration that fails, returns a state
// the new schema refuses, or emits anything journals nothing: the cell
// stays on its pin at rest, its pin_reason saying why, its state as it
// was; v1 is not drained. A restart and a replay from genesis reach the
// same pin and reason.
func TestMigrationFailsLeavesPinned(t *testing.T) {
	for _, tc := range []struct{ kind, why string }{
		{"fault", "failed: step returned an error: n is too large to migrate"},
		{"invalid", "returned a state that does not validate against com.test/PState@2"},
		{"emits", "emitted 0 domain events, 1 effects"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ctx := context.Background()
			h := newMigHarness(t, nil)
			mustApply(t, h, pinManifest(1))
			v1 := loadManifest(t, pinManifest(1)).Hash
			if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
				t.Fatal(err)
			}
			if _, err := h.w.ApplyWith(ctx, loadManifest(t, migManifest(tc.kind)), kernel.ApplyOptions{Pin: true}); err != nil {
				t.Fatal(err)
			}
			receiptFor(t, h, "w")
			height := h.w.Journal().Height()
			if last := allRecords(t, h.w)[height-1]; last.Kind != journal.KindStep {
				t.Fatalf("the receipt's step is followed by a %s record", last.Kind)
			}
			w := pinCell(t, h, "w")
			if w.Pin != v1.String() || stateJSON(w) != `{"n":11}` || !strings.Contains(w.PinReason, tc.why) {
				t.Fatalf("w: pin %q, state %s, reason %q; want pinned to v1 with %q", w.Pin, stateJSON(w), w.PinReason, tc.why)
			}
			if m := liveManifests(t, h)["com.test/pins-v1"]; m.Drained || m.PinnedAtRest != 1 {
				t.Fatalf("v1: %+v", m)
			}
			sameAfterReplay(t, h)
		})
	}
}

// TestMigrationReplayRunsItAgain: replay runs the migration of a journaled
// move again and must reach the state hash the record names; a build whose
// migration gives other bytes diverges at the move record, naming both
// hashes.
func TestMigrationReplayRunsItAgain(t *testing.T) {
	h := newMigHarness(t, nil)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.ApplyWith(context.Background(), loadManifest(t, migManifest("good")), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	receiptFor(t, h, "w")
	moveSeq := h.w.Journal().Height()
	if moves := moveRecs(t, h, moveSeq-1); len(moves) != 1 {
		t.Fatalf("the last record is not the move: %+v", moves)
	}
	h.w.Close()
	h.w = nil
	d := newMigHarness(t, map[string]string{"good": "drift"}) // same identities, a migration that drifted
	cfg := h.config()
	cfg.Builtins = d.builtins
	cfg.FromGenesis = true
	g, err := kernel.Open(h.db.Stores(), cfg)
	if err == nil {
		g.Close()
		t.Fatal("a replay whose migration gives other bytes opened")
	}
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != moveSeq || re.Kind != journal.KindMove || !strings.Contains(err.Error(), "the migration gave state") ||
		!strings.Contains(err.Error(), hashOf(map[string]any{"n": 11, "m": 22}).String()) {
		t.Fatalf("replay with a drifted migration: %v, want a divergence at the move %d", err, moveSeq)
	}
}

// TestMigrationReplayFollowsTheJournal: replay moves a cell through its
// migration only by the journaled move record. A migration that did not
// complete live (here it failed; a host's timeout journals nothing just
// the same) and completes on replay leaves the cell where the journal
// says: pinned, with the reason that does not depend on the host, and the
// world opens.
func TestMigrationReplayFollowsTheJournal(t *testing.T) {
	h := newMigHarness(t, nil)
	mustApply(t, h, pinManifest(1))
	v1 := loadManifest(t, pinManifest(1)).Hash
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.ApplyWith(context.Background(), loadManifest(t, migManifest("fault")), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	receiptFor(t, h, "w")
	h.w.Close()
	h.w = nil
	d := newMigHarness(t, map[string]string{"fault": "good"})
	cfg := h.config()
	cfg.Builtins = d.builtins
	cfg.FromGenesis = true
	g, err := kernel.Open(h.db.Stores(), cfg)
	if err != nil {
		t.Fatalf("replay where the migration now completes: %v", err)
	}
	defer g.Close()
	w, err := g.Cell(context.Background(), pinWorkflow, schemas.MustMarshal("w"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Pin != v1.String() || stateJSON(w) != `{"n":11}` || !strings.Contains(w.PinReason, "did not complete (not journaled") {
		t.Fatalf("w after replay: pin %q, %s, %q", w.Pin, stateJSON(w), w.PinReason)
	}
}

// TestMigrationAtRestRenamedEvent: a cell at rest with a v1 state whose
// next input is routed with a manifest that renamed the workflow's event
// variant takes it under v1, reshaped by arm, and then moves through the
// migration; it does not fail.
func TestMigrationAtRestRenamedEvent(t *testing.T) {
	h := newMigHarness(t, nil)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "a", "plain"); err != nil {
		t.Fatal(err)
	}
	src := migManifest("good")
	src = strings.Replace(src, `{"$kind":"defschema","name":"com.test/PKey@1"`,
		`{"$kind":"defschema","name":"com.test/PEvent@2","variant":{"Act":"com.test/PAct@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"com.test/PKey@1"`, 1)
	src = strings.Replace(src, `"event":"com.test/PEvent@1"`, `"event":"com.test/PEvent@2"`, 1)
	if _, err := h.w.ApplyWith(context.Background(), loadManifest(t, src), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	if err := pinSend(h, "com.test/PAct@1", "a", "plain"); err != nil {
		t.Fatal(err)
	}
	if a := pinCell(t, h, "a"); a.Status != kernel.StatusCompleted || a.Pin != "" || stateJSON(a) != `{"m":4,"n":2}` {
		t.Fatalf("a after its input: %s, pin %q (%s), state %s", a.Status, a.Pin, a.PinReason, stateJSON(a))
	}
	sameAfterReplay(t, h)
}

// TestUpgradeMigrationCommutes: an upgrade of a waiting cell whose new
// workflow migrates its state checks that the new code's state after each
// step is the migration of the journaled one: code that keeps m = 2n
// moves it (the record and report carry the old and the migrated state's
// hashes, the cell holds the migrated state, its intent keeps its hash and
// its receipt runs the new code); code with m = 3n diverges at the cell's
// first step, naming both hashes, and the cell stays as it was.
func TestUpgradeMigrationCommutes(t *testing.T) {
	ctx := context.Background()
	h := newMigHarness(t, nil)
	mustApply(t, h, pinManifest(1))
	v1 := loadManifest(t, pinManifest(1)).Hash
	for _, c := range [][2]string{{"w", "plain"}, {"w", "fx"}} {
		if err := pinSend(h, "com.test/PAct@1", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	var firstInput uint64
	for _, r := range allRecords(t, h.w) {
		if r.Kind == journal.KindEvent {
			firstInput = stepSeqOf(t, h, "w", r.Seq)
			break
		}
	}
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, migManifest("bad")), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	bad := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w"), DryRun: true})
	div := bad.Cells[0].Divergence
	if bad.Cells[0].Outcome != kernel.UpgradeDiverged || div.What != "state" || div.Seq != firstInput ||
		div.Want != hashOf(map[string]any{"n": 1, "m": 2}) || div.Got != hashOf(map[string]any{"n": 1, "m": 3}) ||
		!strings.Contains(div.Msg, "migrates to") {
		t.Fatalf("m = 3n: %s %+v", bad.Cells[0].Outcome, div)
	}

	res, err := h.w.ApplyWith(ctx, loadManifest(t, migManifest("good")), kernel.ApplyOptions{Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	wBefore := pinCell(t, h, "w")
	if wBefore.Pin != v1.String() || stateJSON(wBefore) != `{"n":2}` {
		t.Fatalf("w before the upgrade: pin %q, %s", wBefore.Pin, stateJSON(wBefore))
	}
	height := h.w.Journal().Height()
	dry := upgrade(t, h, kernel.UpgradeRequest{All: true, DryRun: true})
	if c := dry.Cells[0]; c.Outcome != kernel.UpgradeWouldMove || c.Migrated == nil || *c.Migrated != hashOf(map[string]any{"n": 2}) ||
		*c.StateHash != hashOf(map[string]any{"n": 2, "m": 4}) || h.w.Journal().Height() != height {
		t.Fatalf("dry run: %+v (%+v)", c, c.Divergence)
	}
	rep := upgrade(t, h, kernel.UpgradeRequest{All: true})
	if c := rep.Cells[0]; c.Outcome != kernel.UpgradeMoved {
		t.Fatalf("upgrade: %+v (%+v)", c, c.Divergence)
	}
	moves := moveRecs(t, h, height)
	if len(moves) != 1 || moves[0].To != res.ManifestHash || moves[0].Since != "creation" || len(moves[0].Inputs) != 2 ||
		*moves[0].Migrated != hashOf(map[string]any{"n": 2}) || *moves[0].StateHash != hashOf(map[string]any{"n": 2, "m": 4}) {
		t.Fatalf("move records %+v", moves)
	}
	w := pinCell(t, h, "w")
	if w.Pin != "" || stateJSON(w) != `{"m":4,"n":2}` || strings.Join(w.Inflight, ",") != strings.Join(wBefore.Inflight, ",") {
		t.Fatalf("w after the upgrade: pin %q, %s, %v (before %v)", w.Pin, stateJSON(w), w.Inflight, wBefore.Inflight)
	}
	receiptFor(t, h, "w")
	if w := pinCell(t, h, "w"); stateJSON(w) != `{"m":24,"n":12}` {
		t.Fatalf("w after its receipt under the new code: %s", stateJSON(w))
	}
	sameAfterReplay(t, h)
}
