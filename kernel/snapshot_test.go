package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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

// mixedManifest joins the counter world (keyed, unkeyed, emitted events,
// failing steps) and the order world (effects and receipts), so one
// workload fills every table a snapshot holds.
func mixedManifest(countState string) string {
	c := strings.TrimSuffix(strings.TrimSpace(counterManifest), "]")
	o := strings.TrimPrefix(strings.TrimSpace(orderManifest), "[")
	c = strings.Replace(c, `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`, countState, 1)
	// One manifest def: the order world's subscriptions join the counter's.
	c = strings.Replace(c, ` {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[`,
		` {"$kind":"manifest","name":"com.test/mixed","routing":{"subscriptions":[
   {"event":"com.test/OrderCreated@1","workflow":"com.test/order@1","key_field":"order_id"},`, 1)
	o = strings.Replace(o, ` {"$kind":"manifest","name":"com.test/orders","routing":{"subscriptions":[{"event":"com.test/OrderCreated@1","workflow":"com.test/order@1","key_field":"order_id"}]}}`, "", 1)
	c = strings.TrimRight(strings.TrimSpace(c), ",")
	o = strings.TrimSpace(o)
	o = strings.TrimSuffix(o, "]")
	o = strings.TrimRight(strings.TrimSpace(o), ",")
	return c + ",\n" + o + "\n]"
}

const countStateV1 = `{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}`
const countStateV2 = `{"type":"object","properties":{"count":{"type":"integer"},"note":{"type":"string"}},"required":["count"],"additionalProperties":false}`

func newMixedHarness(t *testing.T, seed uint64, onDisk bool, extra func(*kernel.Config)) *harness {
	pub := &capture{}
	h := newHarnessWith(t, seed, onDisk, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.extra = func(c *kernel.Config) {
			c.Publisher, c.Keyring = pub, paymentsKeyring(t)
			c.SnapshotEvery, c.SnapshotInterval = -1, -1 // the workload decides
			if extra != nil {
				extra(c)
			}
		}
	})
	mustApply(t, h, mixedManifest(countStateV1))
	return h
}

// mixedOp is one step of the workload, drawn from r; reopen says whether
// the world under test is reopened after it (snapshotting first, unless
// the op is a crash-like reopen without one).
type mixedWorkload struct {
	r      *rand.Rand
	orders int
}

// step runs one random operation on h. It must do the same thing on any
// world that has the same journal, so it reads only the world's answers.
func (m *mixedWorkload) step(t *testing.T, h *harness, i int) {
	ctx := context.Background()
	switch op := m.r.IntN(20); {
	case op < 8:
		by := m.r.IntN(12) + 1
		if m.r.IntN(15) == 0 {
			by = 13 // panics: a failed instance with its input kept for retry
		}
		ev := countEvent(fmt.Sprintf("k%d", m.r.IntN(30)), by)
		if m.r.IntN(4) == 0 {
			ev.IdempotencyKey = fmt.Sprintf("idem-%d", m.r.IntN(40))
		}
		if _, err := h.w.Ingest(ctx, ev); err != nil && !errors.Is(err, kernel.ErrIdempotencyConflict) {
			t.Fatalf("op %d: %v", i, err)
		}
	case op < 11:
		m.orders++
		createOrder(t, h, fmt.Sprintf("o%d", m.orders))
	case op < 15:
		pend, err := h.w.PendingIntents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pend) == 0 {
			return
		}
		it := pend[m.r.IntN(len(pend))]
		if m.r.IntN(3) == 0 {
			f := receipts.SignFrame(executorKey, receipts.Frame{World: it.World, Intent: it.Hash, Effect: it.Effect, Seq: uint64(i + 1),
				Executor: "payments", Payload: schemas.MustMarshal("working")})
			if _, err := h.w.SubmitFrame(ctx, f); err != nil {
				t.Fatalf("op %d: frame: %v", i, err)
			}
			return
		}
		status := receipts.StatusOK
		if m.r.IntN(4) == 0 {
			status = receipts.StatusError
		}
		sr := chargeReceipt(it, status, map[string]any{"charge_id": fmt.Sprintf("c%d", i)})
		if _, err := h.w.SubmitReceipt(ctx, sr); err != nil {
			t.Fatalf("op %d: receipt: %v", i, err)
		}
		if m.r.IntN(3) == 0 { // a duplicate is refused and journals nothing
			if _, err := h.w.SubmitReceipt(ctx, sr); !errors.Is(err, kernel.ErrReceiptDuplicate) {
				t.Fatalf("op %d: duplicate receipt: %v", i, err)
			}
		}
	case op < 17:
		failed, _, err := h.w.Failed(ctx, "", 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) == 0 || m.r.IntN(4) != 0 {
			return
		}
		f := failed[m.r.IntN(len(failed))]
		action := []string{kernel.RecoverSkip, kernel.RecoverReset, kernel.RecoverRetry}[m.r.IntN(3)]
		if _, err := h.w.Recover(ctx, f.Workflow, f.Key, action, f.FaultSeq); err != nil {
			t.Fatalf("op %d: recover %s: %v", i, action, err)
		}
	default:
		// A burst that fans out to the unkeyed audit workflow.
		if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("k%d", m.r.IntN(30)), 11)); err != nil {
			t.Fatal(err)
		}
	}
}

// settleAll answers every pending intent, so an apply can go in.
func settleAll(t *testing.T, h *harness) {
	ctx := context.Background()
	pend, err := h.w.PendingIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range pend {
		if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(it, receipts.StatusOK, map[string]any{"charge_id": "settle"})); err != nil {
			t.Fatal(err)
		}
	}
}

func journalBytes(t *testing.T, w *kernel.World) []journal.Record { return allRecords(t, w) }

// TestSnapshotReopenEquivalence runs one random workload on two worlds. The
// first never restarts; the second is snapshotted and reopened (from its
// latest snapshot plus the tail) at random points, and sometimes reopened
// without a new snapshot. Both take snapshots at the same points. Whatever
// a snapshot failed to carry would change what the reopened world journals
// next, so the two journals must be byte-identical, snapshot records (and
// so snapshot objects) included; and a third world replaying the journal
// from genesis must recompute every snapshot byte for byte and reach the
// same final state.
func TestSnapshotReopenEquivalence(t *testing.T) {
	seed := testSeed(t)
	const ops = 400
	a := newMixedHarness(t, seed, false, nil)
	// The second world also drains its deltas in small background slices
	// with a tiny cell cache, so snapshots meet drains in flight; the
	// objects must not care.
	b := newMixedHarness(t, seed, true, func(c *kernel.Config) {
		c.MaterializeAt, c.MaterializeChunk, c.MaterializeInBackground = 8, 4, true
		c.Cells.CacheSize = 2
	})
	ma := &mixedWorkload{r: rand.New(rand.NewPCG(seed, 7))}
	mb := &mixedWorkload{r: rand.New(rand.NewPCG(seed, 7))}
	plan := rand.New(rand.NewPCG(seed, 8))
	ctx := context.Background()
	snaps, loaded := 0, 0
	var seen richness
	for i := range ops {
		ma.step(t, a, i)
		mb.step(t, b, i)
		if i == ops/2 {
			// A manifest change in the middle: the state schema changes
			// (an epoch), and the snapshot must carry the new manifest.
			settleAll(t, a)
			settleAll(t, b)
			mustApply(t, a, mixedManifest(countStateV2))
			mustApply(t, b, mixedManifest(countStateV2))
		}
		switch plan.IntN(25) {
		case 0, 1:
			ra, err := a.w.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.w.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ra.Object != rb.Object {
				t.Fatalf("op %d: snapshots of the same state differ: %s vs %s", i, ra.Object, rb.Object)
			}
			snaps++
			data, err := a.w.CAS().Get(ra.Object)
			if err != nil {
				t.Fatal(err)
			}
			st, err := snapshot.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			seen.note(st)
			b.reopen()
			if info := b.w.OpenInfo(); info.Snapshot != rb.Seq || info.Checkpoint != rb.Checkpoint || info.Replayed != 1 {
				t.Fatalf("op %d: reopened with %+v, want snapshot %d (checkpoint %d) and only its record replayed", i, info, rb.Seq, rb.Checkpoint)
			}
			loaded++
		case 2:
			b.reopen() // from the latest snapshot, replaying a longer tail
			if snaps > 0 && b.w.OpenInfo().Snapshot == 0 {
				t.Fatalf("op %d: reopened from genesis although a snapshot exists", i)
			}
		}
	}
	ja, jb := journalBytes(t, a.w), journalBytes(t, b.w)
	if len(ja) != len(jb) {
		t.Fatalf("journal lengths differ: %d vs %d", len(ja), len(jb))
	}
	for i := range ja {
		if ja[i].Kind != jb[i].Kind || !bytes.Equal(ja[i].Body, jb[i].Body) {
			t.Fatalf("journals differ at seq %d: %s vs %s", ja[i].Seq, ja[i].Kind, jb[i].Kind)
		}
	}
	if snaps < 5 || loaded < 5 {
		t.Fatalf("the plan took only %d snapshots; the test needs more to mean anything", snaps)
	}
	sa, err := a.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen.note(sa)
	seen.check(t)
	if d := snapshot.Diff(sa, sb); d != "" {
		t.Fatalf("final states differ: %s", d)
	}

	// From genesis, recomputing every snapshot on the way.
	b.w.Close()
	b.w = nil
	cfg := b.config()
	cfg.FromGenesis, cfg.VerifySnapshots = true, true
	g, err := kernel.Open(b.db.Stores(), cfg)
	if err != nil {
		t.Fatalf("replay from genesis: %v", err)
	}
	defer g.Close()
	if n := g.VerifiedSnapshots(); n != snaps {
		t.Fatalf("replay from genesis verified %d snapshots, %d were taken", n, snaps)
	}
	if info := g.OpenInfo(); info.Snapshot != 0 || info.Replayed != uint64(len(jb)) {
		t.Fatalf("genesis open: %+v, want all %d records replayed", info, len(jb))
	}
	sg, err := g.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(sa, sg); d != "" {
		t.Fatalf("genesis replay reached another state: %s", d)
	}
}

// richness counts what the snapshots of a workload held, so the test can
// fail when the workload did not reach the tables it is about.
type richness struct{ failed, retry, waiting, frames, settled, idem, epochs, unkeyed int }

func (r *richness) note(s *snapshot.State) {
	for _, in := range s.Instances {
		switch in.Status {
		case snapshot.StatusFailed:
			r.failed++
			if in.Fault.Retry != nil {
				r.retry++
			}
		case snapshot.StatusWaiting:
			r.waiting++
		}
	}
	for _, w := range s.Workflows {
		if w.State != nil {
			r.unkeyed++
		}
	}
	for _, it := range s.Intents {
		r.frames += int(it.Frames)
	}
	r.settled += len(s.Settled)
	r.idem += len(s.Idempotency)
	r.epochs += len(s.Epochs.Changes)
}

func (r *richness) check(t *testing.T) {
	t.Helper()
	if r.failed == 0 || r.retry == 0 || r.waiting == 0 || r.frames == 0 || r.settled == 0 || r.idem == 0 || r.epochs == 0 || r.unkeyed == 0 {
		t.Fatalf("the workload left a table of the snapshots empty: %+v", *r)
	}
}

// TestVerifyReplays: kernel.Verify replays a world's journal from genesis
// and from its latest snapshot and finds the live state; a live state that
// differs is named at its first difference.
func TestVerifyReplays(t *testing.T) {
	seed := testSeed(t)
	h := newMixedHarness(t, seed, true, nil)
	m := &mixedWorkload{r: rand.New(rand.NewPCG(seed, 3))}
	ctx := context.Background()
	for i := range 200 {
		m.step(t, h, i)
		if i%50 == 49 {
			if _, err := h.w.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Verify(ctx, h.db.Stores(), h.config(), live)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Runs) != 2 {
		t.Fatalf("verify failed: %+v", rep)
	}
	g, s := rep.Runs[0], rep.Runs[1]
	if g.Verified != 4 || g.Opened.Snapshot != 0 || g.State != rep.Live {
		t.Fatalf("genesis run: %+v (live %s)", g, rep.Live)
	}
	if s.Opened.Snapshot == 0 || s.Opened.Replayed >= g.Opened.Replayed || s.State != rep.Live {
		t.Fatalf("snapshot run: %+v", s)
	}
	// The live world is untouched by the scratch replays.
	if again, err := h.w.State(ctx); err != nil || snapshot.Diff(live, again) != "" {
		t.Fatalf("live state changed: %v", err)
	}
	forged := *live
	forged.Workflows = append([]snapshot.Workflow(nil), live.Workflows...)
	i := slices.IndexFunc(forged.Workflows, func(w snapshot.Workflow) bool { return w.Name == "com.test/counter@1" })
	forged.Workflows[i].Root = schemas.HashBytes([]byte("another index"))
	rep, err = kernel.Verify(ctx, h.db.Stores(), h.config(), &forged)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || !strings.Contains(rep.Runs[0].Diff, "workflow com.test/counter@1") || !strings.Contains(rep.Runs[1].Diff, "workflow com.test/counter@1") {
		t.Fatalf("a differing live state was not named: %+v", rep.Runs)
	}
}

// TestSnapshotChangedModuleNamed: code changed under the same identity
// after a snapshot stops the tail replay, naming the record, workflow, key
// and both state hashes.
func TestSnapshotChangedModuleNamed(t *testing.T) {
	dir := t.TempDir()
	clock, ent := &stepClock{}, newEntropy(1)
	h := &harness{t: t, clock: clock, entropy: ent, builtins: testBuiltins()}
	h.extra = func(c *kernel.Config) { c.SnapshotEvery, c.SnapshotInterval = -1, -1 }
	w, err := openDir(dir, h.config())
	if err != nil {
		t.Fatal(err)
	}
	h.w = w.World
	mustApply(t, h, counterManifest)
	if _, err := w.Submit(context.Background(), countEvent("a", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Snapshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Submit(context.Background(), countEvent("a", 2)); err != nil {
		t.Fatal(err)
	}
	w.Close()

	changed := modules.NewBuiltins()
	for _, name := range testBuiltins().Names() {
		b, _ := testBuiltins().Get(name)
		if name != "test/counter" {
			changed.MustRegister(b.Name, b.Identity, "step", b.Entrypoints["step"])
		}
	}
	changed.MustRegister("test/counter", "test/counter@1", "step", func(in *modules.Input) (*modules.Output, error) {
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": 99})}, nil
	})
	h.builtins = changed
	_, err = openDir(dir, h.config())
	var re *kernel.ReplayError
	if !errors.As(err, &re) {
		t.Fatalf("open with changed code: %v, want a ReplayError", err)
	}
	if re.Kind != journal.KindStep || re.Workflow != "com.test/counter@1" || string(re.Key) != string(schemas.MustMarshal("a")) ||
		re.Want.IsZero() || re.Got.IsZero() || re.Want == re.Got || !strings.Contains(re.Error(), "state hash") {
		t.Fatalf("report: %v (%+v)", err, re)
	}
}

// copyJournal appends src's records to a fresh memory journal, letting
// edit replace any record's body on the way.
func copyJournal(t *testing.T, src *kernel.World, edit func(r *journal.Record)) *journal.Memory {
	t.Helper()
	j := journal.NewMemory()
	for _, r := range allRecords(t, src) {
		if edit != nil {
			edit(&r)
		}
		if err := j.Append([]journal.Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	return j
}

// TestSnapshotForgedOrMissing: a journaled snapshot whose object is not the
// state replay computes at its checkpoint stops a verifying replay, naming
// the snapshot record, both hashes and the first differing part; an open
// whose newest snapshot object is gone falls back to the one before and
// says why.
func TestSnapshotForgedOrMissing(t *testing.T) {
	h := newMixedHarness(t, 5, false, nil)
	m := &mixedWorkload{r: rand.New(rand.NewPCG(5, 5))}
	ctx := context.Background()
	var snaps []kernel.SnapshotResult
	for i := range 120 {
		m.step(t, h, i)
		if i%40 == 39 {
			res, err := h.w.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, res)
		}
	}
	store := h.w.CAS()
	last := snaps[len(snaps)-1]

	// Forge the last snapshot: one more cell in some workflow's count.
	data, err := store.Get(last.Object)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	s.Logical++
	forged, err := snapshot.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := store.Put(forged)
	if err != nil {
		t.Fatal(err)
	}
	j := copyJournal(t, h.w, func(r *journal.Record) {
		if r.Seq == last.Seq {
			r.Body = schemas.MustMarshal(&records.SnapshotRec{Checkpoint: last.Checkpoint, Object: fh, Bytes: uint64(len(forged))})
		}
	})
	cfg := h.config()
	cfg.FromGenesis, cfg.VerifySnapshots = true, true
	_, err = kernel.Open(kernel.Stores{CAS: store, Journal: j}, cfg)
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != last.Seq || re.Kind != journal.KindSnapshot || re.Want != fh || re.Got != last.Object ||
		!strings.Contains(re.Msg, "logical time") {
		t.Fatalf("forged snapshot: %v", err)
	}

	// The newest snapshot's object is gone: open falls back to the one before.
	if err := store.Delete([]schemas.Hash{last.Object}); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	info := h.w.OpenInfo()
	prev := snaps[len(snaps)-2]
	if info.Snapshot != prev.Seq || info.Checkpoint != prev.Checkpoint || len(info.Skipped) != 1 ||
		!strings.Contains(info.Skipped[0], last.Object.String()) {
		t.Fatalf("open with the newest snapshot object missing: %+v, want snapshot %d", info, prev.Seq)
	}
	// And it replayed past the unusable snapshot to the same state.
	if _, err := h.w.State(ctx); err != nil {
		t.Fatal(err)
	}
}
