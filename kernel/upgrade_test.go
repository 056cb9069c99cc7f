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

// upgManifest is pinManifest(1) with its module replaced by builtin mod
// (identity test/upg@mod), and, with receipt, the effect's receipt schema
// replaced (so the effect's def hash changes).
func upgManifest(mod string, receipt bool) string {
	src := pinManifest(1)
	src = strings.Replace(src, `"com.test/pin_mod@1","runtime":{"kind":"builtin","builtin":"test/pin1","identity":"test/pin@1"}`,
		`"com.test/pin_mod@1","runtime":{"kind":"builtin","builtin":"test/upg-`+mod+`","identity":"test/upg@`+mod+`"}`, 1)
	if receipt {
		src = strings.Replace(src, `"receipt":"com.test/PFx@1"}`, `"receipt":"com.test/PAct@1"}`, 1)
	}
	return strings.Replace(src, `"name":"com.test/pins-v1"`, `"name":"com.test/upg-`+mod+`"`, 1)
}

// upgStep is pinStep(1) changed as kind says: "late" adds 1000 for a
// receipt instead of 10 (the same as v1 on any history without a
// receipt), "params" opens its effect with other params.
func upgStep(kind string) modules.StepFunc {
	v1 := pinStep(1)
	return func(in *modules.Input) (*modules.Output, error) {
		out, err := v1(in)
		if err != nil {
			return nil, err
		}
		ev := decodeMap(nil, in.Event.Value)
		switch {
		case kind == "late" && ev["$tag"] == "Receipt":
			n := toInt(decodeMap(nil, out.State)["n"]) + 990
			out.State = schemas.MustMarshal(map[string]any{"n": n})
		case kind == "params":
			for i := range out.Effects {
				out.Effects[i].Params = schemas.MustMarshal(map[string]any{"v": 2})
			}
		case kind == "none":
			out.Effects = nil
		}
		return out, nil
	}
}

func newUpgHarness(t *testing.T) *harness {
	kr := receipts.NewKeyring()
	if err := kr.Add("fx", pinExecutorKey.Public().(ed25519.PublicKey), []string{"com.test/pfx@1"}); err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, 31, true, func(h *harness) {
		h.builtins.MustRegister("test/pin1", "test/pin@1", "step", pinStep(1))
		for _, k := range []string{"late", "params", "same", "none"} {
			h.builtins.MustRegister("test/upg-"+k, "test/upg@"+k, "step", upgStep(k))
		}
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
}

// receiptFor answers the intent of key's cell that is in flight (the only one).
func receiptFor(t *testing.T, h *harness, key string) {
	t.Helper()
	ctx := context.Background()
	c := pinCell(t, h, key)
	if len(c.Inflight) != 1 {
		t.Fatalf("cell %s has %d intents in flight, want 1", key, len(c.Inflight))
	}
	its, err := h.w.PendingIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Hash.String() == c.Inflight[0] {
			sr := receipts.Sign(pinExecutorKey, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: "fx",
				Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{}), Attempt: 1})
			if _, err := h.w.SubmitReceipt(ctx, sr); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("intent %s of %s is not pending", c.Inflight[0], key)
}

func upgrade(t *testing.T, h *harness, req kernel.UpgradeRequest) *kernel.UpgradeReport {
	t.Helper()
	if req.Workflow == "" {
		req.Workflow = pinWorkflow
	}
	rep, err := h.w.Upgrade(context.Background(), req)
	if err != nil {
		t.Fatalf("upgrade %+v: %v", req, err)
	}
	return rep
}

func keys(ks ...string) [][]byte {
	out := make([][]byte, len(ks))
	for i, k := range ks {
		out[i] = schemas.MustMarshal(k)
	}
	return out
}

func stepSeqOf(t *testing.T, h *harness, key string, input uint64) uint64 {
	t.Helper()
	for _, r := range allRecords(t, h.w) {
		var sr records.StepRec
		if r.Kind == journal.KindStep && schemas.UnmarshalTrusted(r.Body, &sr) == nil && sr.Input == input &&
			string(sr.Key) == string(schemas.MustMarshal(key)) {
			return r.Seq
		}
	}
	t.Fatalf("no step of %s consumed %d", key, input)
	return 0
}

// TestUpgradeMovesWaitingCells, on disk: cells waiting on their intents
// under v1 after an apply --pin of code that agrees with every step they
// took move (a dry run first moves nothing and journals nothing); one
// record per cell, their intents keep their hashes, and their receipts
// then run the new code. A cell whose history the new code does not
// reproduce (it took a receipt, which the new code counts otherwise)
// stays on v1, the report naming the step, its input and both state
// hashes, and its later receipt runs v1's code. The world replays to the
// same state after a restart and from genesis.
func TestUpgradeMovesWaitingCells(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	v1 := loadManifest(t, pinManifest(1)).Hash
	for _, c := range [][2]string{{"w", "fx"}, {"w", "plain"}, {"x", "fx"}, {"y", "fx"}} {
		if err := pinSend(h, "com.test/PAct@1", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	receiptFor(t, h, "y") // y: 1 + 10
	yReceipt := h.w.Journal().Height() - 1
	if err := pinSend(h, "com.test/PAct@1", "y", "fx"); err != nil {
		t.Fatal(err)
	}
	wBefore := pinCell(t, h, "w")
	res, err := h.w.ApplyWith(ctx, loadManifest(t, upgManifest("late", false)), kernel.ApplyOptions{Pin: true})
	if err != nil || res.PinnedNow != 3 {
		t.Fatalf("apply --pin: %+v, %v", res, err)
	}
	v2 := res.ManifestHash

	height := h.w.Journal().Height()
	dry := upgrade(t, h, kernel.UpgradeRequest{All: true, DryRun: true})
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("a dry run journaled %d records", got-height)
	}
	if len(dry.Cells) != 3 || dry.To != v2 || dry.Steps == 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	for i, want := range []string{kernel.UpgradeWouldMove, kernel.UpgradeWouldMove, kernel.UpgradeDiverged} {
		if c := dry.Cells[i]; c.Outcome != want || c.From != v1 {
			t.Fatalf("dry run cell %d (%s): %s from %s, want %s (%+v)", i, c.Key, c.Outcome, c.From, want, c.Divergence)
		}
	}
	if c := dry.Cells[0]; len(c.Inputs) != 2 || c.Since != "creation" {
		t.Fatalf("w checked %v since %s, want its two inputs since creation", c.Inputs, c.Since)
	}
	div := dry.Cells[2].Divergence
	wantSeq := stepSeqOf(t, h, "y", yReceipt)
	if div.What != "state" || div.Kind != journal.KindStep || div.Seq != wantSeq || div.Input != yReceipt || div.Want.IsZero() || div.Got.IsZero() || div.Want == div.Got {
		t.Fatalf("y's divergence: %+v, want the state of step %d (receipt %d)", div, wantSeq, yReceipt)
	}

	rep := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w", "y", "nobody", "x")})
	outcomes := []string{}
	for _, c := range rep.Cells {
		outcomes = append(outcomes, c.Outcome)
	}
	if strings.Join(outcomes, " ") != "moved diverged not_found moved" {
		t.Fatalf("upgrade: %v", outcomes)
	}
	recs := allRecords(t, h.w)
	var moves []records.MoveRec
	for _, r := range recs[height:] {
		if r.Kind != journal.KindMove {
			t.Fatalf("the upgrade journaled a %s record", r.Kind)
		}
		var mr records.MoveRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			t.Fatal(err)
		}
		moves = append(moves, mr)
	}
	if len(moves) != 2 || moves[0].From != v1 || moves[0].To != v2 || string(moves[0].Key) != string(schemas.MustMarshal("w")) ||
		*moves[0].StateHash != *wBefore.StateHash || rep.Cells[0].Seq != height+1 {
		t.Fatalf("moves %+v", moves)
	}
	w := pinCell(t, h, "w")
	if w.Pin != "" || w.Status != kernel.StatusWaiting || strings.Join(w.Inflight, ",") != strings.Join(wBefore.Inflight, ",") {
		t.Fatalf("w after its move: pin %q %s %v (before %v)", w.Pin, w.Status, w.Inflight, wBefore.Inflight)
	}
	if y := pinCell(t, h, "y"); y.Pin != v1.String() {
		t.Fatalf("y after a divergence: pin %q", y.Pin)
	}
	if again := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w")}); again.Cells[0].Outcome != kernel.UpgradeNotPinned {
		t.Fatalf("w again: %+v", again.Cells[0])
	}

	// The moved cells' receipts run the new code (+1000), y's the old (+10).
	receiptFor(t, h, "w")
	receiptFor(t, h, "y")
	if c := pinCell(t, h, "w"); stateJSON(c) != `{"n":1002}` || c.Status != kernel.StatusCompleted {
		t.Fatalf("w after its receipt: %s %s", stateJSON(c), c.Status)
	}
	if c := pinCell(t, h, "y"); stateJSON(c) != `{"n":22}` {
		t.Fatalf("y after its receipt: %s", stateJSON(c))
	}
	sameAfterReplay(t, h) // migrate_test.go
}

// TestReplayManifestComparesIntents: the offline check of a manifest
// whose code opens its intents with other params, or whose effect
// declares another receipt schema, names the field of the first intent
// that differs; code that agrees passes every cell; nothing is journaled.
func TestReplayManifestComparesIntents(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	for _, c := range [][2]string{{"a", "plain"}, {"a", "fx"}, {"b", "plain"}} {
		if err := pinSend(h, "com.test/PAct@1", c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	height := h.w.Journal().Height()
	for _, tc := range []struct {
		mod     string
		receipt bool
		field   string
	}{{"same", false, ""}, {"params", false, "params"}, {"same", true, "effect_hash"}, {"none", false, "(count)"}} {
		rep, err := kernel.ReplayManifest(ctx, h.db.Stores(), h.config(), loadManifest(t, upgManifest(tc.mod, tc.receipt)))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Cells) != 2 || rep.Cells[1].Outcome != kernel.UpgradeWouldMove || rep.Start != 0 {
			t.Fatalf("%s/%v: %+v", tc.mod, tc.receipt, rep)
		}
		a := rep.Cells[0]
		if tc.field == "" {
			if a.Outcome != kernel.UpgradeWouldMove || rep.Diverged() != 0 {
				t.Fatalf("%s: a %+v %+v", tc.mod, a, a.Divergence)
			}
			continue
		}
		if tc.field == "(count)" {
			if a.Outcome != kernel.UpgradeDiverged || a.Divergence.What != "intents" || !strings.Contains(a.Divergence.Msg, "opened 1 intents, the new code 0") {
				t.Fatalf("%s: a %s %+v, want the intents' count", tc.mod, a.Outcome, a.Divergence)
			}
			continue
		}
		if a.Outcome != kernel.UpgradeDiverged || a.Divergence.What != "intent" || a.Divergence.Field != tc.field || a.Divergence.Want == a.Divergence.Got {
			t.Fatalf("%s/%v: a %s %+v, want intent field %s", tc.mod, tc.receipt, a.Outcome, a.Divergence, tc.field)
		}
	}
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("the offline check journaled %d records", got-height)
	}
}

// TestUpgradeRefusals: bad requests are refused naming what is wrong and
// journal nothing.
func TestUpgradeRefusals(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	height := h.w.Journal().Height()
	for _, tc := range []struct {
		req  kernel.UpgradeRequest
		want string
	}{
		{kernel.UpgradeRequest{}, "no workflow named"},
		{kernel.UpgradeRequest{Workflow: "com.test/nope@1", All: true}, "workflow com.test/nope@1 is not in the current manifest"},
		{kernel.UpgradeRequest{Workflow: pinWorkflow}, "is keyed: name the keys"},
		{kernel.UpgradeRequest{Workflow: pinWorkflow, All: true, Keys: keys("a")}, "not both"},
		{kernel.UpgradeRequest{Workflow: pinWorkflow, All: true, Status: "asleep"}, `status "asleep"`},
	} {
		_, err := h.w.Upgrade(ctx, tc.req)
		if !errors.Is(err, kernel.ErrUpgrade) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("refused upgrades journaled %d records", got-height)
	}
}

// TestUpgradeBackAndForth: a cell moved once is checked over its whole
// life when it moves again (its intent in flight was opened by code older
// than both), across a snapshot taken between the two; the moves replay.
func TestUpgradeBackAndForth(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	for i, src := range []string{upgManifest("same", false), pinManifest(1), upgManifest("same", false)} {
		if _, err := h.w.ApplyWith(ctx, loadManifest(t, src), kernel.ApplyOptions{Pin: true}); err != nil {
			t.Fatal(err)
		}
		if err := pinSend(h, "com.test/PAct@1", "w", "plain"); err != nil {
			t.Fatal(err)
		}
		rep := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w")})
		if c := rep.Cells[0]; c.Outcome != kernel.UpgradeMoved || c.Since != "creation" || len(c.Inputs) != i+2 {
			t.Fatalf("move %d: %+v %+v", i, c, c.Divergence)
		}
		if i == 0 {
			if _, err := h.w.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
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

// TestUpgradeFromSnapshot: the check replays from the newest snapshot
// before the step that opened the cell's oldest intent in flight; a cell
// that existed there is checked from its state there, and only the steps
// since (which include every step that opened an intent in flight).
func TestUpgradeFromSnapshot(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "w", "big"); err != nil {
		t.Fatal(err)
	}
	snap, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, upgManifest("late", false)), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	rep := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w"), DryRun: true})
	if c := rep.Cells[0]; c.Outcome != kernel.UpgradeWouldMove || c.Since != "snapshot" || len(c.Inputs) != 1 || rep.Start == 0 || rep.Start > snap.Seq {
		t.Fatalf("check from the snapshot (%+v): %+v, started after %d", snap, c, rep.Start)
	}
}

// hookLog runs hook (once armed) when a reader reads the journal: the
// upgrade check's scratch world reads the live journal in the caller's
// goroutine, while the loop is free to take other inputs.
type hookLog struct {
	kernel.Log
	hook func()
}

func (l *hookLog) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	if h := l.hook; h != nil {
		l.hook = nil
		h()
	}
	return l.Log.Read(from, fn)
}

// TestUpgradeCellChangedDuringCheck: a cell that takes an input while its
// check replays is not moved (its check saw a history that is no longer
// all of it): outcome changed, nothing journaled for it; the next upgrade
// checks the new step too and moves it.
func TestUpgradeCellChangedDuringCheck(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	h.w.Close()
	hl := &hookLog{Log: h.db.Stores().Journal}
	h.mem = &kernel.Stores{CAS: h.db.Stores().CAS, Journal: hl}
	h.open()
	mustApply(t, h, pinManifest(1))
	for _, k := range []string{"w", "x"} {
		if err := pinSend(h, "com.test/PAct@1", k, "fx"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, upgManifest("same", false)), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	height := h.w.Journal().Height()
	hl.hook = func() {
		if err := pinSend(h, "com.test/PAct@1", "w", "plain"); err != nil {
			t.Error(err)
		}
	}
	rep := upgrade(t, h, kernel.UpgradeRequest{All: true})
	if w, x := rep.Cells[0], rep.Cells[1]; w.Outcome != kernel.UpgradeChanged || !strings.Contains(w.Reason, "took input") || x.Outcome != kernel.UpgradeMoved {
		t.Fatalf("upgrade while w takes an input: %+v, %+v", w, x)
	}
	recs := allRecords(t, h.w)
	if moves := kindsIn(recs[height:], journal.KindMove); moves != 1 {
		t.Fatalf("%d move records, want x's alone", moves)
	}
	if c := pinCell(t, h, "w"); c.Pin == "" || stateJSON(c) != `{"n":2}` {
		t.Fatalf("w: pin %q, state %s", c.Pin, stateJSON(c))
	}
	if again := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w")}); again.Cells[0].Outcome != kernel.UpgradeMoved || len(again.Cells[0].Inputs) != 2 {
		t.Fatalf("w again: %+v", again.Cells[0])
	}
}

func kindsIn(recs []journal.Record, k journal.Kind) int {
	n := 0
	for _, r := range recs {
		if r.Kind == k {
			n++
		}
	}
	return n
}

// TestReplayRefusesForgedMove: replay applies a move without checking the
// code again, but a move record that names a manifest the cell is not
// pinned to stops replay, naming the record.
func TestReplayRefusesForgedMove(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, upgManifest("same", false)), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	if rep := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w")}); rep.Cells[0].Outcome != kernel.UpgradeMoved {
		t.Fatalf("upgrade: %+v", rep.Cells[0])
	}
	recs := allRecords(t, h.w)
	forged := journal.NewMemory()
	var at uint64
	for _, r := range recs {
		if r.Kind == journal.KindMove {
			var mr records.MoveRec
			if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
				t.Fatal(err)
			}
			mr.From = schemas.HashBytes([]byte("another manifest"))
			r.Body, at = schemas.MustMarshal(&mr), r.Seq
		}
		if err := forged.Append([]journal.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := h.config()
	cfg.FromGenesis = true
	_, err := kernel.Open(kernel.Stores{CAS: h.db.Stores().CAS, Journal: forged}, cfg)
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != at || re.Kind != journal.KindMove || !strings.Contains(re.Msg, "not pinned to it") {
		t.Fatalf("replay of a forged move: %v", err)
	}
}

// TestUpgradeSelectsByStatus: --status keeps the cells with that status:
// a named cell with another is skipped, and all leaves it out.
func TestUpgradeSelectsByStatus(t *testing.T) {
	ctx := context.Background()
	h := newUpgHarness(t)
	mustApply(t, h, pinManifest(1))
	if err := pinSend(h, "com.test/PAct@1", "w", "fx"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.ApplyWith(ctx, loadManifest(t, upgManifest("same", false)), kernel.ApplyOptions{Pin: true}); err != nil {
		t.Fatal(err)
	}
	height := h.w.Journal().Height()
	if rep := upgrade(t, h, kernel.UpgradeRequest{Keys: keys("w"), Status: kernel.StatusCompleted}); rep.Cells[0].Outcome != kernel.UpgradeSkipped ||
		!strings.Contains(rep.Cells[0].Reason, "waiting, not completed") {
		t.Fatalf("w, status completed: %+v", rep.Cells[0])
	}
	if rep := upgrade(t, h, kernel.UpgradeRequest{All: true, Status: kernel.StatusCompleted}); len(rep.Cells) != 0 {
		t.Fatalf("all completed: %+v", rep.Cells)
	}
	if got := h.w.Journal().Height(); got != height {
		t.Fatalf("skipping journaled %d records", got-height)
	}
	if rep := upgrade(t, h, kernel.UpgradeRequest{All: true, Status: kernel.StatusWaiting}); len(rep.Cells) != 1 || rep.Cells[0].Outcome != kernel.UpgradeMoved {
		t.Fatalf("all waiting: %+v", rep.Cells)
	}
}
