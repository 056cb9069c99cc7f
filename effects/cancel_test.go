package effects_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// recordingSink passes receipts and frames to the world and remembers the
// intents the built-in executors submitted receipts for.
type recordingSink struct {
	effects.Sink
	mu   sync.Mutex
	sent []schemas.Hash
}

func (s *recordingSink) SubmitReceipt(ctx context.Context, sr receipts.SignedReceipt) (kernel.ReceiptResult, error) {
	s.mu.Lock()
	s.sent = append(s.sent, sr.Intent)
	s.mu.Unlock()
	return s.Sink.SubmitReceipt(ctx, sr)
}

func (s *recordingSink) submitted(h schemas.Hash) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.sent, h)
}

// TestCancelWithdrawsTimerAndClaim: once an operator's cancel is answered,
// the dispatcher holds the cancelled intents no more: the cancelled timer's
// goroutine is stopped and never fires (a later timer of the same world
// fires, and no receipt was ever submitted for the cancelled one), and a
// cancelled external intent is never handed out by a claim, while the one
// beside it still is. On a real Badger world.
func TestCancelWithdrawsTimerAndClaim(t *testing.T) {
	ctx := context.Background()
	var rec *recordingSink
	wd := openSink(t, t.TempDir(), nil, func(s effects.Sink) effects.Sink {
		rec = &recordingSink{Sink: s}
		return rec
	})
	wd.job(t, `{"id":"t1","in_ms":200}`)
	wd.job(t, `{"id":"c1"}`)
	wd.job(t, `{"id":"c2"}`)
	intentOf := func(wf, id string) schemas.Hash {
		t.Helper()
		v, err := wd.w.Cell(ctx, wf, schemas.MustMarshal(id))
		if err != nil || len(v.Inflight) != 1 {
			t.Fatalf("%s %s: %+v %v", wf, id, v, err)
		}
		h, err := schemas.ParseHash(v.Inflight[0])
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	timer, c1, c2 := intentOf("com.test/timer@1", "t1"), intentOf("com.test/charger@1", "c1"), intentOf("com.test/charger@1", "c2")
	for _, h := range []schemas.Hash{timer, c1} {
		if _, err := wd.w.CancelIntent(ctx, kernel.CancelRequest{Intent: h, Reason: "test", By: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range wd.d.Pending() {
		if p.Hash == timer || p.Hash == c1 {
			t.Fatalf("the dispatcher still holds cancelled intent %s (%s)", p.Hash, p.Effect)
		}
	}
	got, err := wd.d.Claim(ctx, "payments", []string{"com.test/charge@1"}, 10, time.Minute, 0)
	if err != nil || len(got) != 1 || got[0].Hash != c2 {
		t.Fatalf("claim after the cancel: %v %v (want only %s)", got, err, c2)
	}
	// A second timer, due well after the cancelled one: once it has fired,
	// the cancelled one would have too.
	wd.job(t, `{"id":"t2","in_ms":1500}`)
	sr := receipts.Sign(externalKey, receipts.Receipt{World: got[0].World, Intent: c2, Effect: got[0].Effect, Executor: "payments",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_2"}), Attempt: 1})
	if _, err := wd.w.SubmitReceipt(ctx, sr); err != nil {
		t.Fatal(err)
	}
	wd.quiet(t)
	if st := wd.cell(t, "com.test/timer@1", "t2"); st["status"] != "ok" {
		t.Fatalf("the later timer: %v", st)
	}
	if rec.submitted(timer) {
		t.Fatalf("the cancelled timer fired: a receipt was submitted for %s", timer)
	}
	if st := wd.cell(t, "com.test/timer@1", "t1"); st["n_receipts"] != nil {
		t.Fatalf("the cancelled timer's cell took a receipt: %v", st)
	}
}
