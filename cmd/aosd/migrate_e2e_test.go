package main_test

import (
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// TestOrdersV2MigratesWaitingOrders: a real daemon runs the orders example
// (wasm built from source) with orders waiting on their charge and their
// 15-minute expiry timer, and one settled under v1. examples/manifests/
// orders-v2 (a new required state field, refund_due, set by a changed
// step and derived for v1 orders by a declared migration; its wasm built
// from source too) is applied with --pin: new orders start on v2; the
// settled order moves through the migration at its next input (a move
// record "since rest"); `aosd upgrade --all` checks the waiting ones
// (a dry run first journals nothing) and moves them with their migrated
// state, their intents unchanged; a timer then fires and a late charge
// succeeds, and v2's changed step marks the refund due. v1 drains and
// retires; replay --verify and journal check pass.
func TestOrdersV2MigratesWaitingOrders(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1")
	d := startDaemon(t, world)
	tok := token(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	for _, o := range []string{"o0", "o1", "o2"} {
		ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"`+o+`","amount_cents":500,"customer":"ada"}`)
	}
	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"max":10,"wait_ms":10000}`))
	var claim struct {
		World   string
		Intents []struct {
			Hash   string
			Params map[string]any
		}
	}
	if code != 200 || json.Unmarshal(body, &claim) != nil || len(claim.Intents) != 3 {
		t.Fatalf("claim: %d %s", code, body)
	}
	charges := map[string]string{}
	for _, it := range claim.Intents {
		charges[it.Params["order_id"].(string)] = it.Hash
	}
	builtin, err := host.Dir(world).LoadExecutorKey()
	if err != nil {
		t.Fatal(err)
	}
	answer := func(hash string, timer bool, chargeID string) {
		t.Helper()
		h, err := schemas.ParseHash(hash)
		if err != nil {
			t.Fatal(err)
		}
		rc := receipts.Receipt{World: claim.World, Intent: h, Effect: "com.example/payment.charge@1", Executor: "payments", Status: receipts.StatusOK,
			Payload: schemas.MustMarshal(map[string]any{"charge_id": chargeID, "status": "succeeded"}), Attempt: 1}
		key := ed25519.PrivateKey(priv)
		if timer { // the expiry timer, fired early with the built-in executor's key
			rc.Effect, rc.Executor, key = sys.EffectTimerSet, receipts.BuiltinExecutor, builtin
			rc.Payload = schemas.MustMarshal(&sys.TimerSetReceipt{DeliveredAtNs: 1})
		}
		rj, err := receipts.ToJSON(receipts.Sign(key, rc))
		if err != nil {
			t.Fatal(err)
		}
		if code, body := post(t, d, tok, "/v1/receipts", rj); code != 200 {
			t.Fatalf("receipt for %s: %d %s", hash, code, body)
		}
	}
	type cellJSON struct {
		Status   string         `json:"status"`
		Pin      string         `json:"pin"`
		Why      string         `json:"pin_reason"`
		Inflight []string       `json:"inflight"`
		State    map[string]any `json:"state"`
	}
	show := func(o string) cellJSON {
		t.Helper()
		var c cellJSON
		jsonOut(t, world, &c, "cells", "show", orderWF, o)
		return c
	}
	timerOf := func(o string) string {
		t.Helper()
		for _, h := range show(o).Inflight {
			if h != charges[o] {
				return h
			}
		}
		t.Fatalf("%s has no timer in flight", o)
		return ""
	}
	// o0 settles under v1: paid, its timer fired, at rest.
	answer(charges["o0"], false, "ch_0")
	answer(timerOf("o0"), true, "")
	if c := show("o0"); c.Status != "completed" || c.State["status"] != "paid" {
		t.Fatalf("o0 under v1: %+v", c)
	}

	out := ok(t, world, "apply", built.Path(t, "orders-v2"), "--pin")
	if !strings.Contains(out, "pinned: 2 instance(s) in flight stay on the previous manifest") {
		t.Fatalf("apply --pin:\n%s", out)
	}
	var ms manifestsJSON
	jsonOut(t, world, &ms, "manifests")
	if len(ms.Manifests) != 2 || ms.Manifests[1].Name != "com.example/orders-v2" || ms.Manifests[0].Pinned["waiting"] != 2 {
		t.Fatalf("manifests after apply --pin: %+v", ms)
	}
	v1Hash := ms.Manifests[0].Hash

	// New orders run on v2 and carry its new field.
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o3","amount_cents":900,"customer":"bob"}`)
	if c := show("o3"); c.Pin != "" || c.State["refund_due"] != false || len(c.Inflight) != 2 {
		t.Fatalf("o3 on v2: %+v", c)
	}
	// o0, at rest with a v1 state, takes its next input under v1 and then
	// moves through the migration.
	height := getStatus(t, world).JournalHeight
	ok(t, world, "send", "com.example/OrderCancel@1", `{"order_id":"o0"}`)
	if c := show("o0"); c.Pin != "" || c.State["status"] != "paid" || c.State["refund_due"] != false || c.State["charge_id"] != "ch_0" {
		t.Fatalf("o0 after its input: %+v", c)
	}
	type moveJSON struct {
		Seq  uint64 `json:"seq"`
		Kind string `json:"kind"`
		Body struct {
			Since     string   `json:"since"`
			Inputs    []uint64 `json:"inputs"`
			Migrated  string   `json:"migrated"`
			StateHash string   `json:"state_hash"`
			From      string   `json:"from"`
		} `json:"body"`
	}
	moves := func(from uint64) []moveJSON {
		t.Helper()
		var out []moveJSON
		for _, line := range strings.Split(strings.TrimSpace(ok(t, world, "journal", "--kind", "move", "--json")), "\n") {
			var m moveJSON
			if line == "" {
				continue
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("journal line %q: %v", line, err)
			}
			if m.Seq > from {
				out = append(out, m)
			}
		}
		return out
	}
	if mv := moves(height); len(mv) != 1 || mv[0].Body.Since != "rest" || mv[0].Body.Migrated == "" || mv[0].Body.From != v1Hash || len(mv[0].Body.Inputs) != 0 {
		t.Fatalf("o0's move: %+v", mv)
	}

	// The waiting orders: a dry run, then the upgrade.
	type upgradeJSON struct {
		Cells []struct {
			Key       string `json:"key"`
			Outcome   string `json:"outcome"`
			Migrated  string `json:"migrated"`
			StateHash string `json:"state_hash"`
			Seq       uint64 `json:"seq"`
		} `json:"cells"`
	}
	before := map[string][]string{"o1": show("o1").Inflight, "o2": show("o2").Inflight}
	height = getStatus(t, world).JournalHeight
	var dry upgradeJSON
	jsonOut(t, world, &dry, "upgrade", orderWF, "--all", "--dry-run")
	if len(dry.Cells) != 2 || getStatus(t, world).JournalHeight != height {
		t.Fatalf("dry run: %+v", dry)
	}
	for _, c := range dry.Cells {
		if c.Outcome != "would_move" || c.Migrated == "" || c.StateHash == "" || c.Migrated == c.StateHash {
			t.Fatalf("dry run: %+v", dry)
		}
	}
	var up upgradeJSON
	jsonOut(t, world, &up, "upgrade", orderWF, "--all")
	if len(up.Cells) != 2 || up.Cells[0].Outcome != "moved" || up.Cells[1].Outcome != "moved" {
		t.Fatalf("upgrade: %+v", up)
	}
	if mv := moves(height); len(mv) != 2 || mv[0].Body.Since != "creation" || mv[0].Body.Migrated != dry.Cells[0].Migrated {
		t.Fatalf("the upgrade's moves: %+v", mv)
	}
	for _, o := range []string{"o1", "o2"} {
		c := show(o)
		slices.Sort(c.Inflight)
		slices.Sort(before[o])
		if c.Pin != "" || c.State["refund_due"] != false || c.State["status"] != "awaiting_payment" || !slices.Equal(c.Inflight, before[o]) {
			t.Fatalf("%s after the upgrade: %+v (intents before %v)", o, c, before[o])
		}
	}

	// o1 is paid, then its timer fires; o2's timer fires first (expired)
	// and its charge succeeds late: v2's changed step marks the refund.
	answer(charges["o1"], false, "ch_1")
	answer(timerOf("o1"), true, "")
	answer(timerOf("o2"), true, "")
	answer(charges["o2"], false, "ch_2")
	if c := show("o1"); c.Status != "completed" || c.State["status"] != "paid" || c.State["refund_due"] != false {
		t.Fatalf("o1 under v2: %+v", c)
	}
	if c := show("o2"); c.Status != "completed" || c.State["status"] != "expired" || c.State["charge_id"] != "ch_2" || c.State["refund_due"] != true {
		t.Fatalf("o2 under v2: %+v", c)
	}

	ms = manifestsJSON{}
	jsonOut(t, world, &ms, "manifests")
	if len(ms.Manifests) != 2 || !ms.Manifests[0].Drained {
		t.Fatalf("manifests once everything moved: %+v", ms)
	}
	if out := ok(t, world, "manifests", "retire", v1Hash); !strings.Contains(out, "retired at seq") {
		t.Fatalf("retire v1: %s", out)
	}
	d.stop(t, world)
	if out := ok(t, world, "replay", "--verify"); !strings.Contains(out, "ok") {
		t.Fatalf("replay --verify:\n%s", out)
	}
	var jc struct {
		OK bool `json:"ok"`
	}
	jsonOut(t, world, &jc, "journal", "check")
	if !jc.OK {
		t.Fatalf("journal check: %+v", jc)
	}
}
