package kernel_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// rejectedArm is the arm of orderManifest's event that carries a rejected
// receipt.
const rejectedArm = `,"Rejected":"sys/EffectReceiptRejected@1"`

// newReceiptFaultHarness is the order world on disk; without the Rejected
// arm unless withArm.
func newReceiptFaultHarness(t *testing.T, withArm bool) *harness {
	src := orderManifest
	if !withArm {
		if !strings.Contains(src, rejectedArm) {
			t.Fatal("orderManifest has no Rejected arm to remove")
		}
		src = strings.Replace(src, rejectedArm, "", 1)
	}
	kr := receipts.NewKeyring()
	if err := kr.Add("payments", executorKey.Public().(ed25519.PublicKey), []string{"com.test/payment.charge@1"}); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, 7, true, func(h *harness) {
		h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
	mustApply(t, h, src)
	return h
}

// rejectOrder creates order id, answers its charge with a payload that fails
// com.test/ChargeReceipt@1, and returns the intent and the receipt's result.
func rejectOrder(t *testing.T, h *harness, id string) (kernel.OpenIntent, kernel.ReceiptResult) {
	t.Helper()
	ctx := context.Background()
	createOrder(t, h, id)
	its, err := h.w.PendingIntents(ctx)
	if err != nil || len(its) != 1 {
		t.Fatalf("pending intents %v, %v", its, err)
	}
	res, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[0], receipts.StatusOK, map[string]any{"wrong": true}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Rejected, "payload does not validate against com.test/ChargeReceipt@1") {
		t.Fatalf("receipt result %+v, want rejected by the receipt schema", res)
	}
	return its[0], res
}

// recordAt is the journal record at seq.
func recordAt(t *testing.T, h *harness, seq uint64) journal.Record {
	t.Helper()
	for _, r := range allRecords(t, h.w) {
		if r.Seq == seq {
			return r
		}
	}
	t.Fatalf("no record at seq %d", seq)
	return journal.Record{}
}

// TestRejectedReceiptWithoutArmFails: a receipt whose payload fails the
// effect's receipt schema, for a workflow whose event has no arm for
// sys/EffectReceiptRejected@1, settles the intent and fails the instance
// with a journaled business fault right after the receipt record. Replay
// reproduces it.
func TestRejectedReceiptWithoutArmFails(t *testing.T) {
	ctx := context.Background()
	h := newReceiptFaultHarness(t, false)
	it, res := rejectOrder(t, h, "o1")

	wantReason := fmt.Sprintf("receipt for intent %s rejected (%s) and the workflow's event %s cannot carry %s",
		it.Hash, res.Rejected, "com.test/OrderEvent@1", "sys/EffectReceiptRejected@1")
	v, err := h.w.Cell(ctx, "com.test/order@1", schemas.MustMarshal("o1"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != kernel.StatusFailed || v.Reason != wantReason {
		t.Fatalf("cell: status %s, reason %q; want failed, %q", v.Status, v.Reason, wantReason)
	}
	if len(v.Inflight) != 0 {
		t.Fatalf("intents still in flight: %v", v.Inflight)
	}
	if p, err := h.w.PendingIntents(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending intents after the receipt: %v, %v", p, err)
	}
	if s, err := h.w.Status(ctx); err != nil || s.Inflight != 0 {
		t.Fatalf("status after the receipt: %+v, %v", s, err)
	}

	// The journal holds the receipt (with its rejection), then the fault on it.
	rr := recordAt(t, h, res.Seq)
	var rec records.ReceiptRec
	if rr.Kind != journal.KindReceipt || schemas.UnmarshalTrusted(rr.Body, &rec) != nil || rec.Rejected != res.Rejected {
		t.Fatalf("record %d is %s %+v, want the rejected receipt", res.Seq, rr.Kind, rec)
	}
	fr := recordAt(t, h, res.Seq+1)
	var fault records.FaultRec
	if fr.Kind != journal.KindFault || schemas.UnmarshalTrusted(fr.Body, &fault) != nil {
		t.Fatalf("record %d is %s, want the fault", res.Seq+1, fr.Kind)
	}
	if fault.Input != res.Seq || fault.Workflow != "com.test/order@1" || string(fault.Key) != string(schemas.MustMarshal("o1")) ||
		fault.Reason != wantReason || fault.Class != "" {
		t.Fatalf("fault record %+v", fault)
	}
	if hgt := h.w.Journal().Height(); hgt != res.Seq+1 {
		t.Fatalf("journal height %d, want %d (nothing after the fault)", hgt, res.Seq+1)
	}

	// The intent is settled: the same receipt again is dropped.
	if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(it, receipts.StatusOK, map[string]any{"wrong": true})); err == nil {
		t.Fatal("a second receipt for the settled intent was accepted")
	}

	before := len(allRecords(t, h.w))
	h.reopen()
	if after := len(allRecords(t, h.w)); after != before {
		t.Fatalf("%d records after reopen, %d before", after, before)
	}
	if v, err := h.w.Cell(ctx, "com.test/order@1", schemas.MustMarshal("o1")); err != nil || v.Status != kernel.StatusFailed || v.Reason != wantReason {
		t.Fatalf("after reopen: %+v, %v", v, err)
	}
}

// TestRejectedReceiptWithArmDelivered: the same receipt, for a workflow whose
// event has the arm, is delivered as sys/EffectReceiptRejected@1 and stepped.
func TestRejectedReceiptWithArmDelivered(t *testing.T) {
	h := newReceiptFaultHarness(t, true)
	_, res := rejectOrder(t, h, "o1")
	if got := orderState(t, h, "o1"); got["pc"] != "rejected" || got["status"] != kernel.StatusCompleted {
		t.Fatalf("after the rejected receipt: %v", got)
	}
	sr := recordAt(t, h, res.Seq+1)
	var step records.StepRec
	if sr.Kind != journal.KindStep || schemas.UnmarshalTrusted(sr.Body, &step) != nil || step.Input != res.Seq {
		t.Fatalf("record %d is %s %+v, want the step on the receipt", res.Seq+1, sr.Kind, step)
	}
	h.reopen()
	if got := orderState(t, h, "o1"); got["pc"] != "rejected" {
		t.Fatalf("after reopen: %v", got)
	}
}
