package main_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// worldClaim is one world's answer to a claim for the order's charge.
type worldClaim struct {
	World   string
	Intents []struct {
		Hash, Effect string
		EmittedAt    uint64 `json:"emitted_at"`
	}
}

// TestTwoWorldsKeepTheirReceipts: two worlds made by `aosd init`, each
// served by its own `aosd serve` on Badger, run the same manifest and the
// same order, and trust the same payments key. Their identities differ
// (`aosd init --json`, `aosd status`, the claim's answer), so the charge
// intents they open differ in hash although everything else about them is
// the same. A receipt and a frame signed for world A's intent, posted to
// world B over HTTP, are refused 403 wrong_world naming both worlds, and
// B's journal does not grow; B's own receipt then settles B's order.
func TestTwoWorldsKeepTheirReceipts(t *testing.T) {
	t.Parallel()
	priv, pubFile := newExecutorKey(t)
	type served struct {
		world, id string
		d         *daemon
		tok       string
		claim     worldClaim
	}
	var ws [2]*served
	for i := range ws {
		dir := filepath.Join(t.TempDir(), "world")
		var created struct{ World, Identity string }
		jsonOut(t, dir, &created, "init")
		checkJournalAtEnd(t, dir)
		ok(t, dir, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1")
		s := &served{world: dir, id: created.Identity, d: startDaemon(t, dir), tok: token(t, dir)}
		if st := getStatus(t, dir); st.World != s.id || !strings.HasPrefix(s.id, "world:") {
			t.Fatalf("world %d: init says identity %q, status %q", i, s.id, st.World)
		}
		if out := ok(t, dir, "journal", "--kind", "world"); !strings.Contains(out, "identity "+s.id) || !strings.HasPrefix(strings.TrimSpace(strings.SplitN(out, "\n", 2)[1]), "1 ") {
			t.Fatalf("world %d: journal --kind world:\n%s", i, out)
		}
		ok(t, dir, "apply", built.Path(t, "orders"))
		ok(t, dir, "send", "com.example/OrderCreated@1", `{"order_id":"o-1","amount_cents":1250,"customer":"ada"}`)
		code, body := post(t, s.d, s.tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"wait_ms":10000}`))
		if code != 200 || json.Unmarshal(body, &s.claim) != nil || len(s.claim.Intents) != 1 || s.claim.World != s.id {
			t.Fatalf("world %d: claim: %d %s (identity %s)", i, code, body, s.id)
		}
		ws[i] = s
	}
	a, b := ws[0], ws[1]
	if a.id == b.id {
		t.Fatalf("two worlds share identity %s", a.id)
	}
	ia, ib := a.claim.Intents[0], b.claim.Intents[0]
	if ia.Hash == ib.Hash || ia.EmittedAt != ib.EmittedAt || ia.Effect != ib.Effect {
		t.Fatalf("intents: a %+v, b %+v; want the same intent in all but its hash", ia, ib)
	}

	sign := func(world, hash string) receipts.SignedReceipt {
		h, err := schemas.ParseHash(hash)
		if err != nil {
			t.Fatal(err)
		}
		return receipts.Sign(priv, receipts.Receipt{World: world, Intent: h, Effect: ia.Effect, Executor: "payments", Status: receipts.StatusOK,
			Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_1", "status": "succeeded"}), Attempt: 1})
	}
	frame := func(world, hash string) []byte {
		h, _ := schemas.ParseHash(hash)
		js, err := receipts.FrameToJSON(receipts.SignFrame(priv, receipts.Frame{World: world, Intent: h, Effect: ia.Effect, Seq: 1,
			Executor: "payments", Payload: schemas.MustMarshal(map[string]any{"pct": 50})}))
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	forA, err := receipts.ToJSON(sign(a.id, ia.Hash))
	if err != nil {
		t.Fatal(err)
	}
	before := getStatus(t, b.world)
	for name, c := range map[string]struct {
		path string
		body []byte
	}{
		"a's receipt":                 {"/v1/receipts", forA},
		"a's frame":                   {"/v1/frames", frame(a.id, ia.Hash)},
		"a receipt for a, b's intent": {"/v1/receipts", must(receipts.ToJSON(sign(a.id, ib.Hash)))},
		"a frame for a, b's intent":   {"/v1/frames", frame(a.id, ib.Hash)},
	} {
		code, body := post(t, b.d, b.tok, c.path, c.body)
		if code != 403 || !strings.Contains(string(body), `"code":"wrong_world"`) ||
			!strings.Contains(string(body), "signed for "+a.id+", but this world is "+b.id) {
			t.Fatalf("%s posted to b: %d %s", name, code, body)
		}
	}
	if after := getStatus(t, b.world); after.JournalHeight != before.JournalHeight || after.Inflight != before.Inflight {
		t.Fatalf("b after the refusals: height %d (was %d), in flight %d (was %d)", after.JournalHeight, before.JournalHeight, after.Inflight, before.Inflight)
	}

	for _, c := range []struct {
		s  *served
		sr receipts.SignedReceipt
	}{{b, sign(b.id, ib.Hash)}, {a, sign(a.id, ia.Hash)}} {
		js, _ := receipts.ToJSON(c.sr)
		if code, body := post(t, c.s.d, c.s.tok, "/v1/receipts", js); code != 200 {
			t.Fatalf("world %s's own receipt: %d %s", c.s.id, code, body)
		}
		var cell struct{ State map[string]any }
		jsonOut(t, c.s.world, &cell, "cells", "show", "com.example/order.step@1", "o-1")
		if cell.State["status"] != "paid" {
			t.Fatalf("world %s's order after its receipt: %v", c.s.id, cell.State)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
