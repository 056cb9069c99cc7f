package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// cancelManifest is orderManifest whose event takes sys/EffectCancelled@1
// as its "Cancelled" arm.
var cancelManifest = strings.Replace(orderManifest, `"Rejected":"sys/EffectReceiptRejected@1"}`,
	`"Rejected":"sys/EffectReceiptRejected@1","Cancelled":"sys/EffectCancelled@1"}`, 1)

// cancelOrderStep is orderStep that also takes a cancellation: the order
// is "cancelled", remembering who cancelled it, why and at which seq.
func cancelOrderStep(in *modules.Input) (*modules.Output, error) {
	ev := decodeMap(nil, in.Event.Value)
	if ev["$tag"] != "Cancelled" {
		return orderStep(in)
	}
	val := ev["$value"].(map[string]any)
	if string(val["origin_key"].([]byte)) != string(in.Event.Key) {
		return nil, fmt.Errorf("cancellation for cell %x delivered to %x", val["origin_key"], in.Event.Key)
	}
	st := decodeMap(nil, in.State)
	st["pc"], st["cancelled_by"], st["why"], st["cancel_seq"] = "cancelled", val["by"], val["reason"], val["cancel_seq"]
	return &modules.Output{State: schemas.MustMarshal(st)}, nil
}

// newCancelHarness is an order world on disk (real Badger) whose workflow
// takes the cancellation when admits, and cannot carry it otherwise.
func newCancelHarness(t *testing.T, admits bool) (*harness, *capture) {
	pub := &capture{}
	h := newHarnessWith(t, 3, true, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", cancelOrderStep)
		h.extra = func(c *kernel.Config) { c.Publisher = pub; c.Keyring = paymentsKeyring(t) }
	})
	src := orderManifest
	if admits {
		src = cancelManifest
	}
	mustApply(t, h, src)
	return h, pub
}

func (c *capture) settledHashes() []schemas.Hash {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]schemas.Hash(nil), c.settled...)
}

// refusedCancelled checks that what an executor says about a cancelled
// intent (a receipt, a frame) is refused naming the cancel's seq, and that
// nothing is journaled.
func refusedCancelled(t *testing.T, h *harness, it kernel.OpenIntent, cancelSeq uint64) {
	t.Helper()
	ctx := context.Background()
	before := h.w.Journal().Height()
	_, err := h.w.SubmitReceipt(ctx, chargeReceipt(it, receipts.StatusOK, map[string]any{"charge_id": "ch_late"}))
	if !errors.Is(err, kernel.ErrIntentCancelled) || !strings.Contains(err.Error(), fmt.Sprintf("cancelled by an operator at seq %d", cancelSeq)) ||
		!strings.Contains(err.Error(), it.Hash.String()) {
		t.Fatalf("late receipt for cancelled intent: %v (want ErrIntentCancelled naming the intent and seq %d)", err, cancelSeq)
	}
	f := receipts.SignFrame(executorKey, receipts.Frame{World: it.World, Intent: it.Hash, Effect: it.Effect, Seq: 1, Executor: "payments",
		Payload: schemas.MustMarshal(map[string]any{"progress": 1})})
	if _, err := h.w.SubmitFrame(ctx, f); !errors.Is(err, kernel.ErrFrameRefused) || !errors.Is(err, kernel.ErrIntentCancelled) {
		t.Fatalf("frame for cancelled intent: %v (want ErrFrameRefused and ErrIntentCancelled)", err)
	}
	_, err = h.w.CancelIntent(ctx, kernel.CancelRequest{Intent: it.Hash})
	if !errors.Is(err, kernel.ErrIntentCancelled) || !strings.Contains(err.Error(), fmt.Sprintf("at seq %d", cancelSeq)) {
		t.Fatalf("second cancel: %v (want ErrIntentCancelled naming seq %d)", err, cancelSeq)
	}
	if after := h.w.Journal().Height(); after != before {
		t.Fatalf("refusals journaled records: height %d -> %d", before, after)
	}
}

// verifyReplay: replay from genesis and from the latest snapshot reach the
// live state (`aosd replay --verify`).
func verifyReplay(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	live, err := h.w.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := kernel.Verify(ctx, h.db.Stores(), h.config(), live)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("replay does not reach the live state: %+v", rep)
	}
}

// TestCancelDeliveredToWorkflow: an operator's cancel is journaled, settles
// the intent (the publisher is told, so executors withdraw it), and the
// workflow that takes sys/EffectCancelled@1 steps on it with the reason,
// the canceller and the cancel's seq. Afterwards the executor's receipt and
// frame and a second cancel are refused, journaling nothing, and stay
// refused across a reopen (replay rebuilds the fence) and across a
// snapshot (the fence is in it); replay from genesis and from the snapshot
// reaches the live state.
func TestCancelDeliveredToWorkflow(t *testing.T) {
	ctx := context.Background()
	h, pub := newCancelHarness(t, true)
	createOrder(t, h, "o1")
	createOrder(t, h, "o2")
	its := pub.intents()
	it, other := its[0], its[1]
	before := h.w.Journal().Height()
	res, err := h.w.CancelIntent(ctx, kernel.CancelRequest{Intent: it.Hash, Reason: "customer changed their mind", By: "ops@example"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != before+1 || !res.Delivered || res.Status != kernel.StatusCompleted || res.Effect != "com.test/payment.charge@1" ||
		res.Workflow != "com.test/order@1" || string(res.Key) != string(schemas.MustMarshal("o1")) {
		t.Fatalf("cancel result: %+v (height before %d)", res, before)
	}
	recs := allRecords(t, h.w)
	if r := recs[res.Seq-1]; r.Kind != journal.KindCancel {
		t.Fatalf("record %d is %s, want cancel", res.Seq, r.Kind)
	} else {
		v, _ := records.Decode(r)
		cr := v.(*records.CancelRec)
		if cr.Intent != it.Hash || cr.Reason != "customer changed their mind" || cr.By != "ops@example" || cr.Stamp.Height != before {
			t.Fatalf("cancel record: %+v", cr)
		}
	}
	if got := orderState(t, h, "o1"); got["pc"] != "cancelled" || got["cancelled_by"] != "ops@example" ||
		got["why"] != "customer changed their mind" || got["cancel_seq"] != res.Seq {
		t.Fatalf("after cancel: %v", got)
	}
	if !slices.Contains(pub.settledHashes(), it.Hash) {
		t.Fatalf("the publisher was not told the intent settled: executors would keep it")
	}
	refusedCancelled(t, h, it, res.Seq)
	// The other order's intent is untouched: its receipt is delivered.
	if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(other, receipts.StatusOK, map[string]any{"charge_id": "ch_2"})); err != nil {
		t.Fatal(err)
	}
	if got := orderState(t, h, "o2"); got["pc"] != "done" {
		t.Fatalf("the other order: %v", got)
	}
	h.reopen() // replay from genesis rebuilds the fence
	refusedCancelled(t, h, it, res.Seq)
	if got := orderState(t, h, "o1"); got["pc"] != "cancelled" {
		t.Fatalf("after reopen: %v", got)
	}
	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	h.reopen() // from the snapshot: the fence is in it
	refusedCancelled(t, h, it, res.Seq)
	verifyReplay(t, h)
	tr, err := records.TraceIntent(ctx, h.w.Journal(), it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 2 || tr[1].Kind != journal.KindCancel || tr[1].By != "ops@example" || tr[1].Reason != "customer changed their mind" {
		t.Fatalf("intent trace: %+v", tr)
	}
	cell, err := records.Trace(ctx, h.w.Journal(), "com.test/order@1", schemas.MustMarshal("o1"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range cell {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, " "); got != "event step intent cancel step" {
		t.Fatalf("cell trace: %s", got)
	}
}

// TestCancelFailsWorkflowThatCannotTakeIt: a workflow whose event schema
// admits no sys/EffectCancelled@1 fails on the cancel, with a journaled
// business fault naming the intent and the cancel, which replay reaches
// again; the fence holds as for any cancel.
func TestCancelFailsWorkflowThatCannotTakeIt(t *testing.T) {
	ctx := context.Background()
	h, pub := newCancelHarness(t, false)
	createOrder(t, h, "o1")
	it := pub.intents()[0]
	res, err := h.w.CancelIntent(ctx, kernel.CancelRequest{Intent: it.Hash, Reason: "fraud"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered || res.Status != kernel.StatusFailed || res.FaultSeq != res.Seq+1 ||
		!strings.Contains(res.Reason, "cancelled by operator at seq") || !strings.Contains(res.Reason, "cannot carry sys/EffectCancelled@1") {
		t.Fatalf("cancel result: %+v", res)
	}
	recs := allRecords(t, h.w)
	if recs[res.Seq-1].Kind != journal.KindCancel || recs[res.FaultSeq-1].Kind != journal.KindFault {
		t.Fatalf("records %d, %d: %s, %s; want cancel, fault", res.Seq, res.FaultSeq, recs[res.Seq-1].Kind, recs[res.FaultSeq-1].Kind)
	}
	fi, err := h.w.FailedInstance(ctx, "com.test/order@1", schemas.MustMarshal("o1"))
	if err != nil || fi.Input != res.Seq || fi.FaultSeq != res.FaultSeq {
		t.Fatalf("failed instance: %+v %v", fi, err)
	}
	refusedCancelled(t, h, it, res.Seq)
	h.reopen()
	fi, err = h.w.FailedInstance(ctx, "com.test/order@1", schemas.MustMarshal("o1"))
	if err != nil || fi.Reason != res.Reason {
		t.Fatalf("after reopen: %+v %v", fi, err)
	}
	refusedCancelled(t, h, it, res.Seq)
	verifyReplay(t, h)
}

// TestCancelRefusals: a cancel for an intent never issued, settled by a
// receipt, settled by its instance's failure, cancelled already, or with a
// reason or name out of bounds is refused with an error that says so and
// journals nothing.
func TestCancelRefusals(t *testing.T) {
	ctx := context.Background()
	h, pub := newCancelHarness(t, false)
	createOrder(t, h, "paid")
	createOrder(t, h, "twice")
	createOrder(t, h, "twice") // a second charge: the instance has two intents in flight
	its := pub.intents()
	if len(its) != 3 {
		t.Fatalf("%d intents, want 3", len(its))
	}
	rr, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[0], receipts.StatusOK, map[string]any{"charge_id": "ch_1"}))
	if err != nil {
		t.Fatal(err)
	}
	// This workflow cannot take the cancellation: the instance fails, and
	// its other intent is settled by that failure.
	res, err := h.w.CancelIntent(ctx, kernel.CancelRequest{Intent: its[1].Hash})
	if err != nil || res.Status != kernel.StatusFailed {
		t.Fatalf("cancel: %+v %v", res, err)
	}
	cases := []struct {
		name string
		req  kernel.CancelRequest
		want error
		says string
	}{
		{"never issued", kernel.CancelRequest{Intent: schemas.HashBytes([]byte("never issued"))}, kernel.ErrIntentUnknown, "not among the"},
		{"settled by a receipt", kernel.CancelRequest{Intent: its[0].Hash}, kernel.ErrIntentNotInFlight, fmt.Sprintf("settled by the receipt at seq %d", rr.Seq)},
		{"settled by its instance's failure", kernel.CancelRequest{Intent: its[2].Hash}, kernel.ErrIntentNotInFlight, fmt.Sprintf("settled at seq %d, when its instance failed", res.FaultSeq)},
		{"cancelled already", kernel.CancelRequest{Intent: its[1].Hash}, kernel.ErrIntentCancelled, fmt.Sprintf("cancelled already, at seq %d", res.Seq)},
		{"reason too long", kernel.CancelRequest{Intent: its[2].Hash, Reason: strings.Repeat("x", kernel.MaxCancelReasonBytes+1)}, kernel.ErrInvalid, "reason is 1025 bytes; at most 1024"},
		{"name too long", kernel.CancelRequest{Intent: its[2].Hash, By: strings.Repeat("x", kernel.MaxCancelByBytes+1)}, kernel.ErrInvalid, "by is 129 bytes"},
		{"reason not UTF-8", kernel.CancelRequest{Intent: its[2].Hash, Reason: "\xff"}, kernel.ErrInvalid, "reason is not valid UTF-8"},
	}
	for _, c := range cases {
		before := h.w.Journal().Height()
		_, err := h.w.CancelIntent(ctx, c.req)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v (want %v saying %q)", c.name, err, c.want, c.says)
		}
		if after := h.w.Journal().Height(); after != before {
			t.Errorf("%s: journal grew %d -> %d", c.name, before, after)
		}
	}
	if n := countKind(t, h.w, journal.KindCancel); n != 1 {
		t.Fatalf("%d cancel records, want the one", n)
	}
}
