package kernel_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
)

// TestWorldOnMemoryStores drives a whole world (a manifest, events, the
// steps they cause, effects and their receipts, a replay) on journal.Memory
// and cas.Memory: the kernel needs no storage engine. The journal it writes
// is byte for byte the one the same inputs write on Badger.
func TestWorldOnMemoryStores(t *testing.T) {
	run := func(h *harness, pub *capture) []journal.Record {
		mustApply(t, h, orderManifest)
		for _, id := range []string{"o-ok", "o-err", "o-open"} {
			createOrder(t, h, id)
		}
		its := pub.intents()
		if len(its) != 3 {
			t.Fatalf("published %d intents, want 3", len(its))
		}
		ctx := context.Background()
		if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[0], receipts.StatusOK, map[string]any{"charge_id": "ch_1"})); err != nil {
			t.Fatal(err)
		}
		if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[1], receipts.StatusError, map[string]any{"error": "card declined"})); err != nil {
			t.Fatal(err)
		}
		return allRecords(t, h.w)
	}

	mem := &kernel.Stores{CAS: cas.NewMemory(), Journal: journal.NewMemory()}
	pub := &capture{}
	h := &harness{t: t, clock: &stepClock{}, entropy: newEntropy(3), builtins: testBuiltins(), mem: mem}
	h.builtins.MustRegister("test/order", "test/order@1", "step", orderStep)
	h.extra = func(c *kernel.Config) { c.Publisher = pub; c.Keyring = paymentsKeyring(t) }
	h.open()
	t.Cleanup(func() { h.w.Close() })
	got := run(h, pub)

	checkStates := func(when string) {
		t.Helper()
		for id, want := range map[string]string{"o-ok": "done", "o-err": "failed", "o-open": "awaiting"} {
			if st := orderState(t, h, id); st["pc"] != want {
				t.Fatalf("%s: order %s = %v, want pc %q", when, id, st, want)
			}
		}
		if p, err := h.w.PendingIntents(context.Background()); err != nil || len(p) != 1 {
			t.Fatalf("%s: pending intents %v, %v; want the open order's one", when, p, err)
		}
	}
	checkStates("live")
	counts := map[journal.Kind]int{}
	for _, r := range got {
		counts[r.Kind]++
	}
	if counts[journal.KindEvent] != 3 || counts[journal.KindIntent] != 3 || counts[journal.KindReceipt] != 2 || counts[journal.KindStep] != 5 {
		t.Fatalf("journal kinds %v; want 3 events, 5 steps, 3 intents, 2 receipts", counts)
	}
	if mem.Journal.Height() != uint64(len(got)) {
		t.Fatalf("journal height %d, %d records read", mem.Journal.Height(), len(got))
	}

	// The same inputs on Badger write the same journal.
	ref, refPub := newOrderWorld(t, false)
	want := run(ref, refPub)
	if len(got) != len(want) {
		t.Fatalf("memory stores journaled %d records, Badger %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Body, want[i].Body) {
			t.Fatalf("record %d differs between memory stores (%s) and Badger (%s)", want[i].Seq, got[i].Kind, want[i].Kind)
		}
	}

	// Replay from the memory journal rebuilds the same world.
	h.reopen()
	checkStates("after replay")
	if n := len(allRecords(t, h.w)); n != len(got) {
		t.Fatalf("replay changed the journal: %d records, want %d", n, len(got))
	}
}
