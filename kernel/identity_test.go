package kernel_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// intentRecords are the intent records of a journal (from its first
// record retention kept), in order.
func intentRecords(t testing.TB, log kernel.Log) []records.IntentRec {
	t.Helper()
	var out []records.IntentRec
	err := log.Read(log.First(), func(r journal.Record) (bool, error) {
		if r.Kind == journal.KindIntent {
			var it records.IntentRec
			if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
				return false, err
			}
			out = append(out, it)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNewWorldIdentity: a new world's first record is its identity, made
// from the entropy port; the world keeps it across reopens and reports it
// in its status, and two worlds made with real entropy get different ones.
func TestNewWorldIdentity(t *testing.T) {
	h := newHarness(t, 9, true)
	first := allRecords(t, h.w)
	if len(first) != 1 || first[0].Seq != 1 || first[0].Kind != journal.KindWorld {
		t.Fatalf("a new world's journal: %+v, want one world record at seq 1", first)
	}
	var wr records.WorldRec
	if err := schemas.UnmarshalTrusted(first[0].Body, &wr); err != nil {
		t.Fatal(err)
	}
	id := h.w.Identity()
	if wr.ID != id || records.CheckWorldID(id) != nil || !strings.HasPrefix(id, "world:") || len(id) != len("world:")+32 {
		t.Fatalf("identity %q, world record %q", id, wr.ID)
	}
	h.reopen()
	st, err := h.w.Status(context.Background())
	if err != nil || h.w.Identity() != id || st.World != id || st.JournalHeight != 1 {
		t.Fatalf("after reopen: identity %q, status %+v %v; want %s and no new record", h.w.Identity(), st, err, id)
	}
	a, b := t.TempDir(), t.TempDir()
	var ids []string
	for _, dir := range []string{a, b} {
		w, err := openDir(dir, kernel.Config{}) // entropy from crypto/rand
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.Identity())
		checkJournal(t, w.db.Stores())
		w.Close()
	}
	if ids[0] == ids[1] {
		t.Fatalf("two new worlds share identity %s", ids[0])
	}
}

// TestSameInputsDistinctIntents: two worlds on disk with the same manifest
// and the same inputs open intents that are identical in every field but
// the world, so their hashes (and the idempotency keys executors derive
// from them) differ. A receipt signed for one world's intent, by a key
// both trust, is refused by the other and journals nothing there, and so
// is a frame; the other world's own receipt then settles its intent.
func TestSameInputsDistinctIntents(t *testing.T) {
	ctx := context.Background()
	// Two worlds made apart, as two `aosd init`s make them: their
	// identities come from different entropy; everything else is the same.
	a, pubA := newOrderHarnessSeeded(t, 3)
	b, pubB := newOrderHarnessSeeded(t, 4)
	if a.w.Identity() == b.w.Identity() {
		t.Fatalf("worlds a and b share identity %s", a.w.Identity())
	}
	createOrder(t, a, "o1")
	createOrder(t, b, "o1")
	ia, ib := intentRecords(t, a.w.Journal()), intentRecords(t, b.w.Journal())
	if len(ia) != 1 || len(ib) != 1 {
		t.Fatalf("intents: %d in a, %d in b", len(ia), len(ib))
	}
	if ia[0].Hash == ib[0].Hash {
		t.Fatalf("both worlds opened intent %s", ia[0].Hash)
	}
	if ia[0].World != a.w.Identity() || ib[0].World != b.w.Identity() {
		t.Fatalf("intents bind worlds %q and %q, want %q and %q", ia[0].World, ib[0].World, a.w.Identity(), b.w.Identity())
	}
	same := ia[0].IntentID
	same.World = ib[0].World
	if string(records.EncodeIntentID(nil, &same)) != string(records.EncodeIntentID(nil, &ib[0].IntentID)) {
		t.Fatalf("the intents differ in more than their world:\na %+v\nb %+v", ia[0].IntentID, ib[0].IntentID)
	}

	itA, itB := first(t, pubA.intents()), first(t, pubB.intents())
	if itA.World != a.w.Identity() || itB.World != b.w.Identity() {
		t.Fatalf("published intents name worlds %q and %q", itA.World, itB.World)
	}
	forA := chargeReceipt(itA, receipts.StatusOK, map[string]any{"charge_id": "ch-a"})
	height := b.w.Journal().Height()
	for name, sr := range map[string]receipts.SignedReceipt{
		"a's receipt":             forA,
		"a's receipt, b's intent": chargeReceipt(kernel.OpenIntent{World: itA.World, Hash: itB.Hash, Effect: itB.Effect}, receipts.StatusOK, map[string]any{"charge_id": "ch-a"}),
		"a receipt for no world":  chargeReceipt(kernel.OpenIntent{Hash: itB.Hash, Effect: itB.Effect}, receipts.StatusOK, map[string]any{"charge_id": "ch-?"}),
	} {
		_, err := b.w.SubmitReceipt(ctx, sr)
		if !errors.Is(err, kernel.ErrWrongWorld) {
			t.Fatalf("%s posted to b: %v, want ErrWrongWorld", name, err)
		}
		if sr.World != "" && (!strings.Contains(err.Error(), "signed for "+a.w.Identity()) || !strings.Contains(err.Error(), "this world is "+b.w.Identity())) {
			t.Fatalf("%s: the refusal does not name both worlds: %v", name, err)
		}
		if sr.World == "" && !strings.Contains(err.Error(), "update the executor") {
			t.Fatalf("%s: the refusal does not say how to update the executor: %v", name, err)
		}
	}
	if _, err := b.w.SubmitFrame(ctx, jobFrame(executorKey, "payments", itA.Effect, kernel.OpenIntent{World: itA.World, Hash: itB.Hash}, 1, "half")); !errors.Is(err, kernel.ErrWrongWorld) {
		t.Fatalf("a frame for a, posted to b: %v", err)
	}
	// Signed for b but for a's intent: b never issued it, as before.
	if _, err := b.w.SubmitReceipt(ctx, chargeReceipt(kernel.OpenIntent{World: itB.World, Hash: itA.Hash, Effect: itA.Effect}, receipts.StatusOK, map[string]any{"charge_id": "x"})); !errors.Is(err, kernel.ErrReceiptUnknown) {
		t.Fatalf("b's receipt for a's intent: %v, want ErrReceiptUnknown", err)
	}
	if got := b.w.Journal().Height(); got != height {
		t.Fatalf("refused receipts and frames changed b's journal: height %d -> %d", height, got)
	}
	if p, _ := b.w.PendingIntents(ctx); len(p) != 1 {
		t.Fatalf("b's intent is no longer pending: %v", p)
	}
	if _, err := b.w.SubmitFrame(ctx, jobFrame(executorKey, "payments", itB.Effect, itB, 1, "half")); err != nil {
		t.Fatalf("b's own frame: %v", err)
	}
	for _, c := range []struct {
		h  *harness
		sr receipts.SignedReceipt
	}{{a, forA}, {b, chargeReceipt(itB, receipts.StatusOK, map[string]any{"charge_id": "ch-b"})}} {
		if _, err := c.h.w.SubmitReceipt(ctx, c.sr); err != nil {
			t.Fatalf("a world's own receipt: %v", err)
		}
		if st := orderState(t, c.h, "o1"); st["pc"] != "done" {
			t.Fatalf("order o1 after its receipt: %v", st)
		}
	}
}

// newOrderHarnessSeeded is newOrderHarness on disk, its entropy (and so its
// identity) from seed.
func newOrderHarnessSeeded(t testing.TB, seed uint64) (*harness, *capture) {
	pub := &capture{}
	h := newHarnessWith(t, seed, true, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.extra = func(c *kernel.Config) { c.Publisher = pub; c.Keyring = paymentsKeyring(t) }
	})
	mustApply(t, h, orderManifest)
	return h, pub
}

func first(t testing.TB, its []kernel.OpenIntent) kernel.OpenIntent {
	t.Helper()
	if len(its) == 0 {
		t.Fatal("no intent published")
	}
	return its[0]
}

// copyDir copies the files of a closed store directory: a restored copy.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			t.Fatalf("%s: %s is not a regular file", src, e.Name())
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(out, in)
		if err := errors.Join(err, in.Close(), out.Close()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPreIdentityCopies: a world written before worlds had identities,
// copied twice (two restored copies, or one world per tenant cloned from
// it), then opened by this code. Each copy replays the old journal, whose
// pending intent keeps its old hash (the same in both copies, as the old
// code made it), and journals an identity of its own after it. A receipt
// for that intent signed for one copy is refused by the other with nothing
// journaled, although the hashes are equal; a receipt in the old layout (no
// world) is refused with a message saying how to update the executor; each
// copy's own receipt settles it; intents opened since bind each copy's
// identity.
func TestPreIdentityCopies(t *testing.T) {
	ctx := context.Background()
	old := t.TempDir()
	pub := &capture{}
	cfg := func(seed uint64) kernel.Config {
		c := kernel.Config{Clock: &stepClock{}, Entropy: newEntropy(seed), Builtins: testBuiltins(), Keyring: paymentsKeyring(t), Publisher: pub}
		c.Builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		return c
	}
	w, err := openDir(old, kernel.WithoutIdentity(cfg(5)))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, w: w.World}
	mustApply(t, h, orderManifest)
	createOrder(t, h, "o1")
	if w.Identity() != "" {
		t.Fatalf("a world without identity says %q", w.Identity())
	}
	oldIntents := intentRecords(t, w.Journal())
	if len(oldIntents) != 1 || oldIntents[0].World != "" {
		t.Fatalf("the old world's intents: %+v", oldIntents)
	}
	oldHeight := w.Journal().Height()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	copies := make([]*dirWorld, 2)
	for i := range copies {
		dir := t.TempDir()
		copyDir(t, old, dir)
		c, err := openDir(dir, cfg(uint64(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		copies[i] = c
		recs := allRecords(t, c.World)
		if uint64(len(recs)) != oldHeight+1 || recs[oldHeight].Kind != journal.KindWorld {
			t.Fatalf("copy %d: %d records after an old journal of %d, the last %s; want the world record after it", i, len(recs), oldHeight, recs[len(recs)-1].Kind)
		}
		if its := intentRecords(t, c.Journal()); len(its) != 1 || its[0].Hash != oldIntents[0].Hash || its[0].World != "" {
			t.Fatalf("copy %d: the old intent replayed as %+v, want %s without a world", i, its, oldIntents[0].Hash)
		}
	}
	a, b := copies[0], copies[1]
	if a.Identity() == b.Identity() || a.Identity() == "" {
		t.Fatalf("copies' identities %q and %q", a.Identity(), b.Identity())
	}
	pa, _ := a.PendingIntents(ctx)
	pb, _ := b.PendingIntents(ctx)
	if len(pa) != 1 || len(pb) != 1 || pa[0].Hash != pb[0].Hash || pa[0].World != a.Identity() || pb[0].World != b.Identity() {
		t.Fatalf("pending: a %+v, b %+v", pa, pb)
	}

	heightB := b.Journal().Height()
	forA := chargeReceipt(pa[0], receipts.StatusOK, map[string]any{"charge_id": "ch-a"})
	if _, err := b.SubmitReceipt(ctx, forA); !errors.Is(err, kernel.ErrWrongWorld) || !strings.Contains(err.Error(), "signed for "+a.Identity()) {
		t.Fatalf("a's receipt for the shared old intent, posted to b: %v, want ErrWrongWorld naming a", err)
	}
	v1 := chargeReceipt(kernel.OpenIntent{Hash: pb[0].Hash, Effect: pb[0].Effect}, receipts.StatusOK, map[string]any{"charge_id": "ch-v1"})
	if _, err := b.SubmitReceipt(ctx, v1); !errors.Is(err, kernel.ErrWrongWorld) || !strings.Contains(err.Error(), "aos/receipt/v1") ||
		!strings.Contains(err.Error(), "update the executor") {
		t.Fatalf("a receipt in the old layout: %v, want ErrWrongWorld saying how to update the executor", err)
	}
	if _, err := b.SubmitFrame(ctx, jobFrame(executorKey, "payments", pa[0].Effect, pa[0], 1, "half")); !errors.Is(err, kernel.ErrWrongWorld) {
		t.Fatalf("a's frame posted to b: %v", err)
	}
	if got := b.Journal().Height(); got != heightB {
		t.Fatalf("refused receipts changed b's journal: height %d -> %d", heightB, got)
	}
	for _, c := range []struct {
		w  *dirWorld
		it kernel.OpenIntent
	}{{a, pa[0]}, {b, pb[0]}} {
		if _, err := c.w.SubmitReceipt(ctx, chargeReceipt(c.it, receipts.StatusOK, map[string]any{"charge_id": "own"})); err != nil {
			t.Fatalf("a copy's own receipt for the old intent: %v", err)
		}
		createOrder(t, &harness{t: t, w: c.w.World}, "o2")
	}
	ia, ib := intentRecords(t, a.Journal()), intentRecords(t, b.Journal())
	if len(ia) != 2 || len(ib) != 2 || ia[1].World != a.Identity() || ib[1].World != b.Identity() || ia[1].Hash == ib[1].Hash {
		t.Fatalf("intents opened since the world records: a %+v, b %+v", ia[1:], ib[1:])
	}
	for _, c := range copies {
		checkJournal(t, c.db.Stores())
	}
}

// TestIdentityAfterRetention: the world record is dropped with the rest of
// the journal before a kept snapshot; the world opens from the snapshot
// with the same identity and binds it into its new intents.
func TestIdentityAfterRetention(t *testing.T) {
	ctx := context.Background()
	h, _ := newOrderHarness(t, true)
	id := h.w.Identity()
	createOrder(t, h, "o1")
	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	createOrder(t, h, "o2")
	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := h.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1, DropJournal: true})
	if err != nil || res.Journal == nil || res.Journal.First <= 1 {
		t.Fatalf("gc: %+v %v", res, err)
	}
	h.reopen()
	if h.w.Journal().First() <= 1 {
		t.Fatal("the world record is still in the journal")
	}
	if h.w.Identity() != id {
		t.Fatalf("identity after retention %q, was %q", h.w.Identity(), id)
	}
	createOrder(t, h, "o3")
	its := intentRecords(t, h.w.Journal())
	if last := its[len(its)-1]; last.OriginKey == nil || last.World != id {
		t.Fatalf("the intent opened after retention: %+v", last)
	}
}

// TestShadowOfPreIdentityWorld: a shadow whose window starts before the
// world record of a world made before identities runs on a copy that has
// no identity of its own; it journals none (its entropy is the window's
// recorded stamps) and binds the live world's into the intents it opens,
// as the live world's own intents would be now.
func TestShadowOfPreIdentityWorld(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := func(seed uint64) kernel.Config {
		c := kernel.Config{Clock: &stepClock{}, Entropy: newEntropy(seed), Builtins: testBuiltins(), Keyring: paymentsKeyring(t)}
		c.Builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		return c
	}
	w, err := openDir(dir, kernel.WithoutIdentity(cfg(6)))
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, &harness{t: t, w: w.World}, orderManifest)
	for _, o := range []string{"o1", "o2"} {
		createOrder(t, &harness{t: t, w: w.World}, o)
	}
	old := intentRecords(t, w.Journal())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = openDir(dir, cfg(7))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(p, []byte(orderManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := w.Shadow(ctx, kernel.ShadowRequest{Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Start != 1 || rep.Inputs.Submitted != 2 || len(rep.Pending) != 2 {
		t.Fatalf("shadow: start %d, inputs %+v, pending %+v", rep.Start, rep.Inputs, rep.Pending)
	}
	for _, sp := range rep.Pending {
		var want *records.IntentRec
		for i := range old {
			if string(old[i].OriginKey) == string(sp.Key) {
				want = &old[i]
			}
		}
		if want == nil {
			t.Fatalf("the shadow opened an intent for key %x, which the world never did", sp.Key)
		}
		id := want.IntentID
		id.World, id.EmittedAt = w.Identity(), sp.EmittedAt
		if h := schemas.HashBytes(records.EncodeIntentID(nil, &id)); sp.Hash != h {
			t.Fatalf("the shadow's intent for key %x is %s; bound to the world's identity %s it is %s", sp.Key, sp.Hash, w.Identity(), h)
		}
	}
	checkJournal(t, w.db.Stores())
}

// TestSecondWorldRecordRefused: a journal that gives the world a second
// identity does not open: replay names the record.
func TestSecondWorldRecordRefused(t *testing.T) {
	h := newHarness(t, 8, true)
	h.uncheckedJournal = true
	id := h.w.Identity()
	h.w.Close()
	h.w = nil
	next := h.db.Journal().Height() + 1
	forged := journal.Record{Seq: next, Kind: journal.KindWorld, Body: schemas.MustMarshal(&records.WorldRec{ID: "world:00112233445566778899aabbccddeeff"})}
	if err := h.db.Journal().Append([]journal.Record{forged}); err != nil {
		t.Fatal(err)
	}
	_, err := kernel.Open(h.db.Stores(), h.config())
	var re *kernel.ReplayError
	if !errors.As(err, &re) || re.Seq != next || re.Kind != journal.KindWorld || !strings.Contains(err.Error(), "the world's identity is "+id+" already") {
		t.Fatalf("open with a second world record: %v", err)
	}
}
