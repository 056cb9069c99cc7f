package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// checkJournal runs the journal check over a world's stores and fails the
// test on any violation: every journal a kernel test writes must keep the
// rules (the harness calls it at cleanup).
func checkJournal(t testing.TB, stores kernel.Stores) {
	t.Helper()
	rep, err := journalcheck.Check(context.Background(), stores.Journal, journalcheck.Options{Objects: stores.CAS.Get})
	if err != nil {
		t.Errorf("journal check: %v", err)
		return
	}
	for _, v := range rep.Violations {
		t.Errorf("journal check: %s (workflow %s key %s)", v, v.Workflow, records.KeyJSON(v.Key))
	}
	if rep.Omitted > 0 {
		t.Errorf("journal check: %d more violations", rep.Omitted)
	}
}

// TestJournalCheckPassesMixedWorkloads: journals of the mixed workload
// (failures, retries, resets and skips, receipts, rejected receipts, stream
// frames, idempotent resends, fan-out to the unkeyed audit, an apply that
// changes a state schema, snapshots, reopens) keep every rule, for several
// seeds. The harness also checks every other kernel test's journal at
// cleanup; this one asserts the report's counts too.
func TestJournalCheckPassesMixedWorkloads(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, testSeed(t)} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newMixedHarness(t, seed, true, nil)
			m := &mixedWorkload{r: rand.New(rand.NewPCG(seed, 7))}
			for i := range 300 {
				m.step(t, h, i)
				switch {
				case i == 150:
					settleAll(t, h)
					mustApply(t, h, mixedManifest(countStateV2))
				case i%70 == 69:
					if _, err := h.w.Snapshot(context.Background()); err != nil {
						t.Fatal(err)
					}
				case i%90 == 89:
					h.reopen()
				}
			}
			rep, err := journalcheck.Check(context.Background(), h.w.Journal(), journalcheck.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.From != 1 || rep.To != h.w.Journal().Height() || rep.Records != rep.To || rep.Snapshot != 0 {
				t.Fatalf("report %+v, want a clean check of records 1..%d", rep, h.w.Journal().Height())
			}
		})
	}
}

// checkBase is a real journal holding one of each thing the rules judge,
// with what the corruptions need to know about it.
type checkBase struct {
	recs []journal.Record
	h    *harness

	manifest     journal.Record // the current manifest's record
	logical      uint64         // the highest logical time stamped
	doneReceipt  uint64         // the receipt that settled o-done's intent
	doneKey      []byte         // o-done: a completed order
	failedKey    []byte         // d1: a failed order (never recovered)
	failedFault  uint64         // its fault
	failedInput  uint64         // the input that failed it
	failedIntent schemas.Hash   // its intent, settled by the fault
	drop         uint64         // the drop of d1's late receipt
	pendingKey   []byte         // p1: an order waiting on its intent, with frames 1 and 2
	pending      kernel.OpenIntent
	frame        uint64       // p1's second frame
	checkpoints  []uint64     // every checkpoint, in order
	emitted      uint64       // an event a step emitted
	intentStep   uint64       // a step that opened one intent
	intentRec    uint64       // that intent's record
	counterEvent uint64       // an ingress counter event
	counterKey   []byte       // the key it targets
	unrelated    uint64       // an ingress event that targets no order
	lastSnapshot uint64       // the newest snapshot record
	firstSnap    snapAt       // the oldest snapshot record and its checkpoint
	retried      uint64       // a recover retry
	manifestHash schemas.Hash // the current manifest
}

const checkOrderWF = "com.test/order@1"

// snapAt is a snapshot record and the checkpoint it names.
type snapAt struct{ seq, checkpoint uint64 }

// newCheckBase runs the mixed workload on a world whose order workflow
// also faults on a second Created of amount 13, then a scripted tail: a
// completed order, a failed order with a late (dropped) receipt, a counter
// fault retried and skipped, an order left waiting with two stream frames,
// and snapshots.
func newCheckBase(t *testing.T) *checkBase {
	ctx := context.Background()
	pub := &capture{}
	h := newHarnessWith(t, 21, false, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", func(in *modules.Input) (*modules.Output, error) {
			ev := decodeMap(nil, in.Event.Value)
			if v, ok := ev["$value"].(map[string]any); ok && ev["$tag"] == "Created" && in.State != nil && toInt(v["amount"]) == 13 {
				return nil, errors.New("amount 13 refused")
			}
			return orderStep(in)
		})
		h.extra = func(c *kernel.Config) {
			c.Publisher, c.Keyring = pub, paymentsKeyring(t)
			c.SnapshotEvery, c.SnapshotInterval = -1, -1
		}
	})
	mustApply(t, h, mixedManifest(countStateV1))
	m := &mixedWorkload{r: rand.New(rand.NewPCG(21, 7))}
	for i := range 160 {
		m.step(t, h, i)
		if i == 60 {
			if _, err := h.w.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if i == 100 {
			settleAll(t, h)
			mustApply(t, h, mixedManifest(countStateV2))
		}
	}
	b := &checkBase{h: h, doneKey: ckey("o-done"), failedKey: ckey("d1"), pendingKey: ckey("p1"), counterKey: ckey("kf")}
	onlyPending := func(key []byte) kernel.OpenIntent {
		t.Helper()
		pend, err := h.w.PendingIntents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range pend {
			if string(it.OriginKey) == string(key) {
				return it
			}
		}
		t.Fatalf("no intent of %s pending", key)
		return kernel.OpenIntent{}
	}
	settleAll(t, h)
	createOrder(t, h, "o-done")
	res, err := h.w.SubmitReceipt(ctx, chargeReceipt(onlyPending(b.doneKey), receipts.StatusOK, map[string]any{"charge_id": "done"}))
	if err != nil {
		t.Fatal(err)
	}
	b.doneReceipt = res.Seq
	createOrder(t, h, "d1")
	d1 := onlyPending(b.failedKey)
	b.failedIntent = d1.Hash
	if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/OrderCreated@1", JSON: []byte(`{"order_id":"d1","amount":13}`)}); err != nil {
		t.Fatal(err)
	}
	fi := failedOf(t, h, checkOrderWF, "d1")
	b.failedFault, b.failedInput = fi.FaultSeq, fi.Input
	drop, err := h.w.SubmitReceipt(ctx, chargeReceipt(d1, receipts.StatusOK, map[string]any{"charge_id": "late"}))
	if !errors.Is(err, kernel.ErrReceiptDropped) {
		t.Fatalf("late receipt: %v, want dropped", err)
	}
	b.drop = drop.Seq
	if _, err := h.w.Submit(ctx, countEvent("kf", 13)); err != nil {
		t.Fatal(err)
	}
	kf := failedOf(t, h, "com.test/counter@1", "kf")
	r1, err := h.w.Recover(ctx, kf.Workflow, kf.Key, kernel.RecoverRetry, kf.FaultSeq)
	if err != nil || r1.FaultSeq == 0 {
		t.Fatalf("retry: %+v %v (want it to fail again)", r1, err)
	}
	b.retried = r1.Seq
	if _, err := h.w.Recover(ctx, kf.Workflow, kf.Key, kernel.RecoverSkip, r1.FaultSeq); err != nil {
		t.Fatal(err)
	}
	createOrder(t, h, "p1")
	b.pending = onlyPending(b.pendingKey)
	for i := uint64(1); i <= 2; i++ {
		f := receipts.SignFrame(executorKey, receipts.Frame{World: b.pending.World, Intent: b.pending.Hash, Effect: b.pending.Effect, Seq: i,
			Executor: "payments", Payload: schemas.MustMarshal("working")})
		if b.frame, err = h.w.SubmitFrame(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(`{"key":"kz","by":1}`)}); err != nil {
		t.Fatal(err)
	}
	snap, err := h.w.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.lastSnapshot = snap.Seq
	b.recs = allRecords(t, h.w)
	b.scan(t)
	return b
}

// scan finds what the corruptions need in the journal.
func (b *checkBase) scan(t *testing.T) {
	for _, r := range b.recs {
		v, err := records.Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		switch rec := v.(type) {
		case *records.ManifestRec:
			b.manifest, b.manifestHash = r, rec.Hash
		case *records.CheckpointRec:
			b.checkpoints = append(b.checkpoints, r.Seq)
		case *records.SnapshotRec:
			if b.firstSnap.seq == 0 {
				b.firstSnap = snapAt{seq: r.Seq, checkpoint: rec.Checkpoint}
			}
		case *records.EventRec:
			b.logical = max(b.logical, rec.Stamp.LogicalNs)
			switch {
			case rec.Origin != nil:
				b.emitted = r.Seq
			case rec.Schema == "com.test/CountEvent@1" && len(rec.Targets) > 0:
				b.counterEvent = r.Seq
				if b.unrelated == 0 {
					b.unrelated = r.Seq
				}
			}
		case *records.StepRec:
			if len(rec.Intents) == 1 && len(rec.Emitted) == 0 {
				b.intentStep, b.intentRec = r.Seq, r.Seq+1
			}
		case *records.ReceiptRec:
			b.logical = max(b.logical, rec.Stamp.LogicalNs)
		case *records.FrameRec:
			b.logical = max(b.logical, rec.Stamp.LogicalNs)
		case *records.RecoverRec:
			b.logical = max(b.logical, rec.Stamp.LogicalNs)
		}
	}
	if b.emitted == 0 || b.intentStep == 0 || b.counterEvent == 0 || len(b.checkpoints) < 2 || b.firstSnap.seq == 0 || b.firstSnap.seq == b.lastSnapshot {
		t.Fatalf("the base journal lacks what the corruptions need: %+v", b)
	}
}

// forged is a copy of the base journal being corrupted.
type forged struct {
	t    *testing.T
	b    *checkBase
	recs []journal.Record
	// logical is the highest logical time stamped so far.
	logical uint64
}

func (b *checkBase) forge(t *testing.T) *forged {
	return &forged{t: t, b: b, recs: slices.Clone(b.recs), logical: b.logical}
}

// next is the seq the next appended record gets.
func (f *forged) next() uint64 { return uint64(len(f.recs)) + 1 }

// stamp is a fresh stamp for the record at f.next(): the kind the loop
// takes from its clock.
func (f *forged) stamp() records.Stamp {
	f.logical++
	return records.Stamp{NowNs: f.logical, LogicalNs: f.logical, Entropy: make([]byte, 32), Height: f.next() - 1, ManifestHash: f.b.manifestHash}
}

func (f *forged) add(kind journal.Kind, v any) uint64 {
	seq := f.next()
	var body []byte
	switch rec := v.(type) {
	case []byte:
		body = rec
	case *records.EventRec:
		body = records.EncodeEvent(rec)
	case *records.StepRec:
		body = records.EncodeStep(rec)
	default:
		body = schemas.MustMarshal(v)
	}
	f.recs = append(f.recs, journal.Record{Seq: seq, Kind: kind, Body: body})
	return seq
}

// edit decodes the record at seq into T, lets fn change it and stores it
// re-encoded.
func edit[T any](f *forged, seq uint64, fn func(*T)) {
	f.t.Helper()
	r := &f.recs[seq-1]
	var v T
	if err := schemas.UnmarshalTrusted(r.Body, &v); err != nil {
		f.t.Fatalf("decode record %d: %v", seq, err)
	}
	fn(&v)
	r.Body = schemas.MustMarshal(&v)
}

func (f *forged) memory() *journal.Memory {
	j := journal.NewMemory()
	for _, r := range f.recs {
		if err := j.Append([]journal.Record{r}); err != nil {
			f.t.Fatal(err)
		}
	}
	return j
}

// ingress appends an ingress event targeting the instances given.
func (f *forged) ingress(schema string, value any, targets ...records.TargetRec) uint64 {
	return f.add(journal.KindEvent, &records.EventRec{Schema: schema, Value: schemas.MustMarshal(value), Stamp: f.stamp(), Targets: targets})
}

func (f *forged) receipt(intent schemas.Hash, effect string) uint64 {
	sr := chargeReceipt(kernel.OpenIntent{World: f.b.h.w.Identity(), Hash: intent, Effect: effect}, receipts.StatusOK, map[string]any{"charge_id": "forged"})
	return f.add(journal.KindReceipt, &records.ReceiptRec{Receipt: sr, Stamp: f.stamp()})
}

func (f *forged) recover(key []byte, action string, fault, input, skipped uint64) uint64 {
	return f.add(journal.KindRecover, &records.RecoverRec{Workflow: checkOrderWF, Key: key, Action: action, Fault: fault, Input: input, Skipped: skipped, Stamp: f.stamp()})
}

// check runs the check and requires rule at seq, and no violation before
// it: what broke the journal there is named there, first.
func (f *forged) check(j journalcheck.Journal, rule string, seq uint64) *journalcheck.Report {
	f.t.Helper()
	rep, err := journalcheck.Check(context.Background(), j, journalcheck.Options{Objects: f.b.h.db.CAS().Get})
	if err != nil {
		f.t.Fatal(err)
	}
	found := false
	for _, v := range rep.Violations {
		if v.Seq < seq {
			f.t.Errorf("violation before the corruption at seq %d: %s", seq, v)
		}
		found = found || (v.Seq == seq && v.Rule == rule)
	}
	if !found {
		f.t.Fatalf("want %s at seq %d; got %v", rule, seq, rep.Violations)
	}
	return rep
}

// TestJournalCheckCatches corrupts one real journal once per rule and
// requires that rule at the seq of the corrupt record, and nothing before
// it. The base journal itself must pass.
func TestJournalCheckCatches(t *testing.T) {
	b := newCheckBase(t)
	ctx := context.Background()
	wf := func(key []byte) records.TargetRec { return records.TargetRec{Workflow: checkOrderWF, Key: key} }
	counter := func(key []byte) records.TargetRec { return records.TargetRec{Workflow: "com.test/counter@1", Key: key} }
	countValue := map[string]any{"key": "kq", "by": 1}
	t.Run("clean", func(t *testing.T) {
		f := b.forge(t)
		rep, err := journalcheck.Check(ctx, f.memory(), journalcheck.Options{})
		if err != nil || !rep.OK() || rep.Records != uint64(len(b.recs)) {
			t.Fatalf("the base journal: %+v %v", rep, err)
		}
	})
	cases := []struct {
		rule string
		// corrupt changes f and returns the seq the rule must name, and
		// the journal to check when it is not f's records (nil).
		corrupt func(f *forged) (journalcheck.Journal, uint64)
	}{
		{journalcheck.RuleSeqGap, func(f *forged) (journalcheck.Journal, uint64) {
			at := b.counterEvent
			f.recs = slices.Delete(f.recs, int(at-1), int(at))
			return sliceJournal(f.recs), at + 1
		}},
		{journalcheck.RuleUnreadable, func(f *forged) (journalcheck.Journal, uint64) {
			return corruptAfter{Journal: f.memory(), after: b.counterEvent}, b.counterEvent + 1
		}},
		{journalcheck.RuleRecordDecode, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindStep, []byte{0xa1, 0x61})
		}},
		{journalcheck.RuleManifestFirst, func(f *forged) (journalcheck.Journal, uint64) {
			// The first manifest (after the world record) becomes the event
			// after it.
			f.recs[1] = journal.Record{Seq: 2, Kind: f.recs[2].Kind, Body: f.recs[2].Body}
			return nil, 2
		}},
		{journalcheck.RuleStepInput, func(f *forged) (journalcheck.Journal, uint64) {
			// The event is consumed twice.
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq")})
			return nil, f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq")})
		}},
		{journalcheck.RuleStepAfterFailure, func(f *forged) (journalcheck.Journal, uint64) {
			ev := f.ingress("com.test/OrderCreated@1", map[string]any{"order_id": "d1", "amount": 1}, wf(b.failedKey))
			return nil, f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: checkOrderWF, Key: b.failedKey})
		}},
		{journalcheck.RuleStepOutput, func(f *forged) (journalcheck.Journal, uint64) {
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			step := f.next()
			f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq"), Emitted: []uint64{step + 1}})
			return nil, step // the journal ends inside its output
		}},
		{journalcheck.RuleUndelivered, func(f *forged) (journalcheck.Journal, uint64) {
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			f.ingress("com.test/CountEvent@1", countValue) // the next input, with the first not stepped
			return nil, ev
		}},
		{journalcheck.RuleEventOrigin, func(f *forged) (journalcheck.Journal, uint64) {
			edit(f, b.emitted, func(ev *records.EventRec) { ev.Origin.Key = ckey("someone-else") })
			return nil, b.emitted
		}},
		{journalcheck.RuleFaultClass, func(f *forged) (journalcheck.Journal, uint64) {
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			return nil, f.add(journal.KindFault, &records.FaultRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq"), Reason: "x", Class: "cosmic"})
		}},
		{journalcheck.RuleStampHeight, func(f *forged) (journalcheck.Journal, uint64) {
			s := f.stamp()
			s.Height--
			return nil, f.add(journal.KindEvent, &records.EventRec{Schema: "com.test/CountEvent@1", Value: schemas.MustMarshal(countValue), Stamp: s})
		}},
		{journalcheck.RuleStampTime, func(f *forged) (journalcheck.Journal, uint64) {
			s := f.stamp()
			s.LogicalNs = b.logical
			return nil, f.add(journal.KindEvent, &records.EventRec{Schema: "com.test/CountEvent@1", Value: schemas.MustMarshal(countValue), Stamp: s})
		}},
		{journalcheck.RuleStampManifest, func(f *forged) (journalcheck.Journal, uint64) {
			s := f.stamp()
			s.ManifestHash = schemas.HashBytes([]byte("another manifest"))
			return nil, f.add(journal.KindEvent, &records.EventRec{Schema: "com.test/CountEvent@1", Value: schemas.MustMarshal(countValue), Stamp: s})
		}},
		{journalcheck.RuleStampChild, func(f *forged) (journalcheck.Journal, uint64) {
			edit(f, b.emitted, func(ev *records.EventRec) { ev.Stamp.Entropy = make([]byte, 32) })
			return nil, b.emitted
		}},
		{journalcheck.RuleIntentHash, func(f *forged) (journalcheck.Journal, uint64) {
			edit(f, b.intentRec, func(it *records.IntentRec) { it.Params = schemas.MustMarshal(map[string]any{"amount": 999}) })
			return nil, b.intentRec
		}},
		{journalcheck.RuleIntentOrigin, func(f *forged) (journalcheck.Journal, uint64) {
			// Another index under a hash recomputed to match, listed so by
			// its step: only the origin is wrong.
			var h schemas.Hash
			edit(f, b.intentRec, func(it *records.IntentRec) {
				it.Index = 5
				h = schemas.HashBytes(records.EncodeIntentID(nil, &it.IntentID))
				it.Hash = h
			})
			edit(f, b.intentStep, func(st *records.StepRec) { st.Intents[0] = h })
			return nil, b.intentRec
		}},
		{journalcheck.RuleIntentDuplicate, func(f *forged) (journalcheck.Journal, uint64) {
			// p1 opens its pending intent a second time.
			ev := f.ingress("com.test/OrderCreated@1", map[string]any{"order_id": "p1", "amount": 1}, wf(b.pendingKey))
			var it records.IntentRec
			for _, r := range f.recs {
				if r.Kind == journal.KindIntent {
					var x records.IntentRec
					if schemas.UnmarshalTrusted(r.Body, &x) == nil && x.Hash == b.pending.Hash {
						it = x
					}
				}
			}
			f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: checkOrderWF, WorkflowHash: it.OriginWorkflowHash, Key: b.pendingKey, Intents: []schemas.Hash{it.Hash}})
			return nil, f.add(journal.KindIntent, &it)
		}},
		{journalcheck.RuleReceiptUnknownIntent, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.receipt(schemas.HashBytes([]byte("never opened")), b.pending.Effect)
		}},
		{journalcheck.RuleReceiptTwice, func(f *forged) (journalcheck.Journal, uint64) {
			var rr records.ReceiptRec
			if err := schemas.UnmarshalTrusted(b.recs[b.doneReceipt-1].Body, &rr); err != nil {
				t.Fatal(err)
			}
			rr.Stamp = f.stamp()
			return nil, f.add(journal.KindReceipt, &rr)
		}},
		{journalcheck.RuleReceiptAfterFailure, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.receipt(b.failedIntent, b.pending.Effect)
		}},
		{journalcheck.RuleReceiptEffect, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.receipt(b.pending.Hash, "com.test/refund@1")
		}},
		{journalcheck.RuleDropPending, func(f *forged) (journalcheck.Journal, uint64) {
			sr := chargeReceipt(b.pending, receipts.StatusOK, map[string]any{"charge_id": "x"})
			return nil, f.add(journal.KindDrop, &records.DropRec{Receipt: sr, Reason: "forged"})
		}},
		{journalcheck.RuleDropDelivered, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindStep, &records.StepRec{Input: b.drop, Workflow: checkOrderWF, Key: b.doneKey})
		}},
		{journalcheck.RuleFrameNotPending, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindFrame, &records.FrameRec{Intent: b.failedIntent, Seq: 1, Executor: "payments", Payload: schemas.MustMarshal(1), Stamp: f.stamp()})
		}},
		{journalcheck.RuleFrameSeqNotRising, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindFrame, &records.FrameRec{Intent: b.pending.Hash, Seq: 2, Executor: "payments", Payload: schemas.MustMarshal(1), Stamp: f.stamp()})
		}},
		{journalcheck.RuleFrameEffect, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindFrame, &records.FrameRec{Intent: b.pending.Hash, Seq: 3, Executor: "payments", Payload: schemas.MustMarshal(1), Stamp: f.stamp(), Effect: "com.test/refund@1"})
		}},
		{journalcheck.RuleCancelNotPending, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindCancel, &records.CancelRec{Intent: b.failedIntent, Effect: b.pending.Effect, Workflow: checkOrderWF,
				Key: b.failedKey, By: "ops", Stamp: f.stamp()})
		}},
		{journalcheck.RuleCancelMismatch, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindCancel, &records.CancelRec{Intent: b.pending.Hash, Effect: "com.test/refund@1", Workflow: checkOrderWF,
				Key: b.pendingKey, By: "ops", Stamp: f.stamp()})
		}},
		{journalcheck.RuleReceiptAfterCancel, func(f *forged) (journalcheck.Journal, uint64) {
			// p1's charge cancelled as the kernel journals it (its workflow
			// takes no cancellation, so a fault follows), then a receipt.
			c := f.add(journal.KindCancel, &records.CancelRec{Intent: b.pending.Hash, Effect: b.pending.Effect, Workflow: checkOrderWF,
				Key: b.pendingKey, By: "ops", Stamp: f.stamp()})
			f.add(journal.KindFault, &records.FaultRec{Input: c, Workflow: checkOrderWF, Key: b.pendingKey, Reason: "cannot carry the cancellation"})
			return nil, f.receipt(b.pending.Hash, b.pending.Effect)
		}},
		{journalcheck.RuleApplyNotQuiescent, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.add(journal.KindManifest, b.manifest.Body) // p1's intent is in flight
		}},
		{journalcheck.RuleRecoverNotFailed, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.recover(b.doneKey, "skip", b.failedFault, b.failedInput, 0)
		}},
		{journalcheck.RuleRecoverStaleFault, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.recover(b.failedKey, "skip", b.failedFault-1, b.failedInput, 0)
		}},
		{journalcheck.RuleRecoverMismatch, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.recover(b.failedKey, "skip", b.failedFault, b.failedInput, 7)
		}},
		{journalcheck.RuleRecoverAction, func(f *forged) (journalcheck.Journal, uint64) {
			return nil, f.recover(b.failedKey, "restart", b.failedFault, b.failedInput, 0)
		}},
		{journalcheck.RuleRecoverMismatch, func(f *forged) (journalcheck.Journal, uint64) {
			// d1 has nothing parked; the recover says it dropped 3.
			return nil, f.add(journal.KindRecover, &records.RecoverRec{Workflow: checkOrderWF, Key: b.failedKey, Action: "skip",
				Fault: b.failedFault, Input: b.failedInput, Parked: 3, DropParked: true, Stamp: f.stamp()})
		}},
		{journalcheck.RuleModuleAction, func(f *forged) (journalcheck.Journal, uint64) {
			// A resume of a module that was never set aside.
			s := f.stamp()
			return nil, f.add(journal.KindModule, &records.ModuleRec{Module: "com.test/nope@1", Action: records.ModuleResume,
				Workflows: []string{}, Reason: "forged", Stamp: &s})
		}},
		{journalcheck.RuleModuleAction, func(f *forged) (journalcheck.Journal, uint64) {
			aside := &records.ModuleRec{Module: "com.test/counter_mod@1", Action: records.ModuleAside,
				Workflows: []string{"com.test/counter@1"}, Reason: "forged"}
			f.add(journal.KindModule, aside)
			return nil, f.add(journal.KindModule, aside) // set aside twice
		}},
		{journalcheck.RuleModuleResume, func(f *forged) (journalcheck.Journal, uint64) {
			// The counter's module is set aside, an event for kq is
			// parked, and the resume says it delivers none.
			f.add(journal.KindModule, &records.ModuleRec{Module: "com.test/counter_mod@1", Action: records.ModuleAside,
				Workflows: []string{"com.test/counter@1"}, Reason: "forged"})
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			s := f.stamp()
			at := f.add(journal.KindModule, &records.ModuleRec{Module: "com.test/counter_mod@1", Action: records.ModuleResume,
				Workflows: []string{"com.test/counter@1"}, Reason: "forged", Stamp: &s})
			f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq")}) // it is delivered all the same
			return nil, at
		}},
		{journalcheck.RuleStepInput, func(f *forged) (journalcheck.Journal, uint64) {
			// A step of an event parked behind a module set aside.
			f.add(journal.KindModule, &records.ModuleRec{Module: "com.test/counter_mod@1", Action: records.ModuleAside,
				Workflows: []string{"com.test/counter@1"}, Reason: "forged"})
			ev := f.ingress("com.test/CountEvent@1", countValue, counter(ckey("kq")))
			return nil, f.add(journal.KindStep, &records.StepRec{Input: ev, Workflow: "com.test/counter@1", Key: ckey("kq")})
		}},
		{journalcheck.RuleSnapshotCheckpoint, func(f *forged) (journalcheck.Journal, uint64) {
			// Not the latest checkpoint (which has no snapshot yet).
			f.add(journal.KindCheckpoint, &records.CheckpointRec{Reason: records.CheckpointOperator})
			return nil, f.add(journal.KindSnapshot, &records.SnapshotRec{Checkpoint: b.checkpoints[0], Object: schemas.HashBytes(nil), Bytes: 1})
		}},
		{journalcheck.RuleSnapshotCheckpoint, func(f *forged) (journalcheck.Journal, uint64) {
			// The latest checkpoint, a second time.
			return nil, f.add(journal.KindSnapshot, &records.SnapshotRec{Checkpoint: b.checkpoints[len(b.checkpoints)-1], Object: schemas.HashBytes(nil), Bytes: 1})
		}},
		{journalcheck.RuleWorldRecord, func(f *forged) (journalcheck.Journal, uint64) {
			// A second identity for a world that has one.
			return nil, f.add(journal.KindWorld, &records.WorldRec{ID: "world:00112233445566778899aabbccddeeff"})
		}},
		{journalcheck.RuleWorldRecord, func(f *forged) (journalcheck.Journal, uint64) {
			// The world record's identity is not one.
			edit(f, 1, func(wr *records.WorldRec) { wr.ID = "tenant-7" })
			return nil, 1
		}},
		{journalcheck.RuleWorldBinding, func(f *forged) (journalcheck.Journal, uint64) {
			// A receipt signed for another world settles p1's intent.
			it := b.pending
			it.World = "world:00112233445566778899aabbccddeeff"
			return nil, f.add(journal.KindReceipt, &records.ReceiptRec{Receipt: chargeReceipt(it, receipts.StatusOK, map[string]any{"charge_id": "x"}), Stamp: f.stamp()})
		}},
		{journalcheck.RuleWorldBinding, func(f *forged) (journalcheck.Journal, uint64) {
			// An intent that binds no world, after the world record (its
			// hash made to match, so only the binding is wrong).
			edit(f, b.intentRec, func(it *records.IntentRec) {
				it.World = ""
				it.Hash = schemas.HashBytes(records.EncodeIntentID(nil, &it.IntentID))
			})
			edit(f, b.intentStep, func(st *records.StepRec) {
				var it records.IntentRec
				if err := schemas.UnmarshalTrusted(f.recs[b.intentRec-1].Body, &it); err != nil {
					t.Fatal(err)
				}
				st.Intents[0] = it.Hash
			})
			return nil, b.intentRec
		}},
		{journalcheck.RuleMove, func(f *forged) (journalcheck.Journal, uint64) {
			// A move from a manifest that was never applied.
			var mr records.ManifestRec
			if err := schemas.UnmarshalTrusted(b.manifest.Body, &mr); err != nil {
				t.Fatal(err)
			}
			return nil, f.add(journal.KindMove, &records.MoveRec{Workflow: "com.test/counter@1", Key: ckey("k1"),
				From: schemas.HashBytes([]byte("never applied")), To: mr.Hash, Inputs: []uint64{1}, Since: "creation"})
		}},
		{journalcheck.RuleMove, func(f *forged) (journalcheck.Journal, uint64) {
			// A move to a manifest that is not the current one.
			var mr records.ManifestRec
			if err := schemas.UnmarshalTrusted(b.manifest.Body, &mr); err != nil {
				t.Fatal(err)
			}
			return nil, f.add(journal.KindMove, &records.MoveRec{Workflow: "com.test/counter@1", Key: ckey("k1"),
				From: mr.Hash, To: schemas.HashBytes([]byte("elsewhere")), Inputs: []uint64{1}, Since: "creation"})
		}},
		{journalcheck.RuleTruncated, func(f *forged) (journalcheck.Journal, uint64) {
			// Retention drops everything up to the newest snapshot's
			// checkpoint and one record past it: no snapshot has its
			// checkpoint any more.
			j := f.memory()
			last := b.checkpoints[len(b.checkpoints)-1]
			if _, err := j.DropBefore(last+1, nil); err != nil {
				t.Fatal(err)
			}
			return j, last + 1
		}},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		tested[c.rule] = true
		t.Run(c.rule, func(t *testing.T) {
			f := b.forge(t)
			j, seq := c.corrupt(f)
			if j == nil {
				j = f.memory()
			}
			rep := f.check(j, c.rule, seq)
			t.Logf("%v", rep.Violations)
		})
	}
	for _, r := range journalcheck.Rules() {
		if !tested[r] {
			t.Errorf("rule %s has no corruption here", r)
		}
	}
}

// sliceJournal serves records as given, gaps included (no store would).
type sliceJournal []journal.Record

func (s sliceJournal) First() uint64 { return 1 }

func (s sliceJournal) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	for _, r := range s {
		if r.Seq < from {
			continue
		}
		if more, err := fn(r); err != nil || !more {
			return err
		}
	}
	return nil
}

func (s sliceJournal) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].Kind != k {
			continue
		}
		if more, err := fn(s[i].Seq); err != nil || !more {
			return err
		}
	}
	return nil
}

// corruptAfter is a journal whose store fails to read past a seq.
type corruptAfter struct {
	journalcheck.Journal
	after uint64
}

func (c corruptAfter) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	return c.Journal.Read(from, func(r journal.Record) (bool, error) {
		if r.Seq > c.after {
			return false, fmt.Errorf("%w: frame at seq %d does not decode", journal.ErrCorrupt, r.Seq)
		}
		return fn(r)
	})
}

// TestJournalCheckFromSnapshot: a journal retention cut starts the check
// from the oldest usable snapshot, seeded with its state (pending intents,
// failed instances, settled intents), so what the records after it do to
// that state is still judged.
func TestJournalCheckFromSnapshot(t *testing.T) {
	b := newCheckBase(t)
	ctx := context.Background()
	cut := func(f *forged) *journal.Memory {
		j := f.memory()
		if _, err := j.DropBefore(b.checkpoints[len(b.checkpoints)-1], nil); err != nil {
			t.Fatal(err)
		}
		return j
	}
	f := b.forge(t)
	rep, err := journalcheck.Check(ctx, cut(f), journalcheck.Options{Objects: b.h.db.CAS().Get})
	if err != nil || !rep.OK() || rep.Snapshot != b.lastSnapshot || rep.From != b.checkpoints[len(b.checkpoints)-1]+1 {
		t.Fatalf("cut journal: %+v %v", rep, err)
	}
	if _, err := journalcheck.Check(ctx, cut(f), journalcheck.Options{}); err == nil || !strings.Contains(err.Error(), "Objects") {
		t.Fatalf("a cut journal without objects: %v, want an error asking for them", err)
	}
	// With two usable snapshots left, the check starts from the older one:
	// it checks as much of the journal as it can.
	both := f.memory()
	if _, err := both.DropBefore(b.firstSnap.checkpoint, nil); err != nil {
		t.Fatal(err)
	}
	rep, err = journalcheck.Check(ctx, both, journalcheck.Options{Objects: b.h.db.CAS().Get})
	if err != nil || !rep.OK() || rep.Snapshot != b.firstSnap.seq || rep.From != b.firstSnap.checkpoint+1 {
		t.Fatalf("journal cut before both snapshots: %+v %v, want the check from snapshot record %d", rep, err, b.firstSnap.seq)
	}
	// The snapshot remembers: the receipt that settled o-done's intent,
	// d1's failure, p1's pending intent and its frames.
	for _, c := range []struct {
		rule    string
		corrupt func(f *forged) uint64
	}{
		{journalcheck.RuleReceiptTwice, func(f *forged) uint64 {
			var rr records.ReceiptRec
			if err := schemas.UnmarshalTrusted(b.recs[b.doneReceipt-1].Body, &rr); err != nil {
				t.Fatal(err)
			}
			rr.Stamp = f.stamp()
			return f.add(journal.KindReceipt, &rr)
		}},
		{journalcheck.RuleRecoverMismatch, func(f *forged) uint64 {
			return f.recover(b.failedKey, "skip", b.failedFault, b.failedInput, 9)
		}},
		{journalcheck.RuleFrameSeqNotRising, func(f *forged) uint64 {
			return f.add(journal.KindFrame, &records.FrameRec{Intent: b.pending.Hash, Seq: 1, Executor: "payments", Payload: schemas.MustMarshal(1), Stamp: f.stamp()})
		}},
		{journalcheck.RuleStampTime, func(f *forged) uint64 {
			s := f.stamp()
			s.LogicalNs = 1
			return f.add(journal.KindEvent, &records.EventRec{Schema: "com.test/CountEvent@1", Value: schemas.MustMarshal(map[string]any{"key": "a", "by": 1}), Stamp: s})
		}},
	} {
		t.Run(c.rule, func(t *testing.T) {
			f := b.forge(t)
			seq := c.corrupt(f)
			f.check(cut(f), c.rule, seq)
		})
	}
}
