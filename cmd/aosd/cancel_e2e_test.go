package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

const (
	reminderSet = "com.example/ReminderSet@1"
	chargeFX    = "com.example/payment.charge@1"
)

// cancelOut is `aosd cancel --json`.
type cancelOut struct {
	Seq       uint64          `json:"seq"`
	Intent    string          `json:"intent"`
	Effect    string          `json:"effect"`
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	Delivered bool            `json:"delivered"`
	Status    string          `json:"status"`
	FaultSeq  uint64          `json:"fault_seq"`
	Reason    string          `json:"reason"`
}

// cellIntents is what `aosd cells show --json` says of a cell's state and
// intents in flight.
func cellIntents(t *testing.T, world, wf, key string) (map[string]any, []string) {
	t.Helper()
	var cell struct {
		Status   string         `json:"status"`
		State    map[string]any `json:"state"`
		Inflight []string       `json:"inflight"`
	}
	jsonOut(t, world, &cell, "cells", "show", wf, key)
	if cell.State != nil {
		cell.State["$status"] = cell.Status
	}
	return cell.State, cell.Inflight
}

// lateReceipt posts a receipt for the intent signed by the world's own
// built-in executor key, as the timer executor would if it fired, and
// returns the answer.
func lateTimerReceipt(t *testing.T, world string, d *daemon, intent string) (int, string) {
	t.Helper()
	key, err := host.Dir(world).LoadExecutorKey()
	if err != nil {
		t.Fatal(err)
	}
	h, err := schemas.ParseHash(intent)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		World string `json:"world"`
	}
	jsonOut(t, world, &st, "status")
	sr := receipts.Sign(key, receipts.Receipt{World: st.World, Intent: h, Effect: "sys/timer.set@1", Executor: receipts.BuiltinExecutor,
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"delivered_at_ns": uint64(1)}), Attempt: 1})
	body, err := receipts.ToJSON(sr)
	if err != nil {
		t.Fatal(err)
	}
	code, ans := post(t, d, token(t, world), "/v1/receipts", body)
	return code, string(ans)
}

// TestCancelTimer: on a real daemon with the reminders example's wasm
// (built from source; its event takes sys/EffectCancelled@1), `aosd
// cancel` cancels durable timers: each reminder is cancelled (who and why
// in its state, and in the trace), a cancelled timer never fires (a later
// timer of the same world fires, and the daemon verified no receipt but
// the two that fired), and its late receipt is refused 409 naming the
// cancel, journaling nothing. A cancel of an unknown, settled or cancelled
// intent is refused, exit 1, journaling nothing. The fence and the states
// survive a restart and a snapshot, and `replay --verify` is ok.
func TestCancelTimer(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "reminders"))
	// r2's timer is due in 10 s and r4's in 13 s; r2's is cancelled at
	// once, over HTTP (the CLI under -race on a busy machine may take
	// seconds a command).
	tok := token(t, world)
	for _, ev := range []string{`{"reminder_id":"r2","text":"soon","delay_ms":10000}`, `{"reminder_id":"r4","text":"later","delay_ms":13000}`} {
		if code, ans := post(t, d, tok, "/v1/events", []byte(`{"schema":"`+reminderSet+`","value":`+ev+`}`)); code != 200 {
			t.Fatalf("send %s: %d %s", ev, code, ans)
		}
	}
	in2 := []string{apiCellIntent(t, d, tok, "r2")}
	code, ans := post(t, d, tok, "/v1/intents/"+in2[0]+"/cancel", []byte(`{"reason":"not needed","by":"ana"}`))
	var c2 cancelOut
	if err := json.Unmarshal(ans, &c2); err != nil || code != 200 {
		t.Fatalf("cancel r2: %d %s", code, ans)
	}
	if c2.Intent != in2[0] || c2.Effect != "sys/timer.set@1" || c2.Workflow != reminderWF || string(c2.Key) != `"r2"` ||
		!c2.Delivered || c2.Status != "completed" {
		t.Fatalf("cancel r2: %+v", c2)
	}
	ok(t, world, "send", reminderSet, `{"reminder_id":"r1","text":"stand up","delay_ms":3600000}`)
	_, in1 := cellIntents(t, world, reminderWF, "r1")
	if len(in1) != 1 {
		t.Fatalf("intents in flight: r1 %v", in1)
	}

	out := ok(t, world, "cancel", in1[0], "--by", "ops", "--reason", "meeting moved")
	want1 := fmt.Sprintf("intent %s (sys/timer.set@1 of %s key \"r1\") cancelled at seq", in1[0], reminderWF)
	if !strings.Contains(out, want1) || !strings.Contains(out, "by ops") ||
		!strings.Contains(out, "the workflow took sys/EffectCancelled@1; the instance is completed") {
		t.Fatalf("cancel r1 said:\n%s", out)
	}
	for key, who := range map[string][2]string{"r1": {"ops", "meeting moved"}, "r2": {"ana", "not needed"}} {
		st, in := cellIntents(t, world, reminderWF, key)
		if st["status"] != "cancelled" || st["cancelled_by"] != who[0] || st["cancel_reason"] != who[1] || st["$status"] != "completed" || len(in) != 0 {
			t.Fatalf("reminder %s after the cancel: %v (in flight %v)", key, st, in)
		}
	}
	// r3 fires at once; --wait returns once the world is quiescent: r4
	// has fired too, three seconds after r2 was due.
	ok(t, world, "send", reminderSet, `{"reminder_id":"r3","text":"now","delay_ms":0}`, "--wait", "120s")
	for _, key := range []string{"r3", "r4"} {
		if st, _ := cellIntents(t, world, reminderWF, key); st["status"] != "fired" {
			t.Fatalf("reminder %s: %v, want fired", key, st)
		}
	}
	if body := metricsText(t, d, world); !strings.Contains(body, "aos_receipt_verify_receipts_total 2\n") {
		t.Fatalf("the daemon verified other receipts than r3's and r4's (did a cancelled timer fire?):\n%s", grepLines(body, "aos_receipt_verify"))
	}
	if st, _ := cellIntents(t, world, reminderWF, "r2"); st["status"] != "cancelled" {
		t.Fatalf("r2: %v", st)
	}

	// Refusals journal nothing.
	height := getStatus(t, world).JournalHeight
	code, late := lateTimerReceipt(t, world, d, in2[0])
	if ans := late; code != 409 || !strings.Contains(ans, `"code":"cancelled"`) || !strings.Contains(ans, in2[0]) ||
		!strings.Contains(ans, fmt.Sprintf("cancelled by an operator at seq %d", c2.Seq)) {
		t.Fatalf("late receipt for the cancelled timer: %d %s", code, ans)
	}
	if r := aosd(t, world, "cancel", in2[0]); r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("was cancelled already, at seq %d", c2.Seq)) {
		t.Fatalf("second cancel: exit %d: %s", r.code, r.stderr)
	}
	ghost := "sha256:" + strings.Repeat("0", 64)
	if r := aosd(t, world, "cancel", ghost); r.code != 1 || !strings.Contains(r.stderr, "is not among the") {
		t.Fatalf("cancel of an unknown intent: exit %d: %s", r.code, r.stderr)
	}
	tr3 := ok(t, world, "trace", reminderWF, "r3", "--json")
	var es3 []struct {
		Kind    string   `json:"kind"`
		Intents []string `json:"intents"`
	}
	if err := json.Unmarshal([]byte(tr3), &es3); err != nil {
		t.Fatal(err)
	}
	var fired string
	for _, e := range es3 {
		if e.Kind == "intent" {
			fired = e.Intents[0]
		}
	}
	if r := aosd(t, world, "cancel", fired); r.code != 1 || !strings.Contains(r.stderr, "was settled by the receipt at seq") {
		t.Fatalf("cancel of a fired timer: exit %d: %s", r.code, r.stderr)
	}
	if r := aosd(t, world, "cancel", "nope"); r.code != 1 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("cancel of a malformed hash: exit %d: %s", r.code, r.stderr)
	}
	if r := aosd(t, world, "cancel"); r.code != 2 {
		t.Fatalf("cancel without an intent: exit %d, want 2 (usage)", r.code)
	}
	if after := getStatus(t, world).JournalHeight; after != height {
		t.Fatalf("refusals journaled records: height %d -> %d", height, after)
	}
	// The trace shows who cancelled, why and at which seq.
	tr := ok(t, world, "trace", "--intent", in2[0])
	if !strings.Contains(tr, fmt.Sprintf("%d", c2.Seq)) || !strings.Contains(tr, "sys/timer.set@1 "+in2[0]+" cancelled by ana: not needed") {
		t.Fatalf("trace --intent:\n%s", tr)
	}
	if tr := ok(t, world, "trace", reminderWF, "r1"); !strings.Contains(tr, "cancelled by ops: meeting moved") {
		t.Fatalf("trace of r1:\n%s", tr)
	}
	if j := ok(t, world, "journal", "--kind", "cancel"); strings.Count(j, "cancelled by") != 2 {
		t.Fatalf("journal --kind cancel:\n%s", j)
	}

	// Restart and snapshot: the fence holds, replay agrees.
	d.stop(t, world)
	ok(t, world, "replay", "--verify")
	ok(t, world, "snapshot")
	d = startDaemon(t, world)
	if code, ans := lateTimerReceipt(t, world, d, in1[0]); code != 409 || !strings.Contains(ans, `"code":"cancelled"`) {
		t.Fatalf("late receipt after a snapshot and a restart: %d %s", code, ans)
	}
	if r := aosd(t, world, "cancel", in1[0]); r.code != 1 || !strings.Contains(r.stderr, "cancelled already") {
		t.Fatalf("cancel after a restart: exit %d: %s", r.code, r.stderr)
	}
	if st, _ := cellIntents(t, world, reminderWF, "r1"); st["status"] != "cancelled" {
		t.Fatalf("r1 after the restart: %v", st)
	}
	ok(t, world, "replay", "--verify")
}

// TestCancelEffectClaim: on a real daemon with the orders example's wasm
// (its event takes no sys/EffectCancelled@1) and an external executor
// whose key is trusted, cancelling an order's charge fails the order with a
// journaled reason (listed by `aosd failed`); a claim never hands the
// cancelled charge out (the other order's charge is), and the executor's
// receipt and frame for it are refused 409 cancelled. `replay --verify` is
// ok across a restart.
func TestCancelEffectClaim(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", chargeFX)
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o-1","amount_cents":1250,"customer":"ada"}`)
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o-2","amount_cents":990,"customer":"bob"}`)
	charge := func(order string) string {
		t.Helper()
		var es []struct {
			Kind    string   `json:"kind"`
			Effect  string   `json:"effect"`
			Intents []string `json:"intents"`
		}
		jsonOut(t, world, &es, "trace", orderWF, order)
		for _, e := range es {
			if e.Kind == "intent" && e.Effect == chargeFX {
				return e.Intents[0]
			}
		}
		t.Fatalf("order %s opened no charge", order)
		return ""
	}
	c1, c2 := charge("o-1"), charge("o-2")
	var res cancelOut
	jsonOut(t, world, &res, "cancel", c1, "--reason", "fraud suspected", "--by", "risk")
	if res.Delivered || res.Status != "failed" || res.FaultSeq != res.Seq+1 ||
		!strings.Contains(res.Reason, "was cancelled by risk at seq") || !strings.Contains(res.Reason, "cannot carry sys/EffectCancelled@1") {
		t.Fatalf("cancel of o-1's charge: %+v", res)
	}
	var failed struct {
		Failed []struct {
			Key      json.RawMessage `json:"key"`
			Input    uint64          `json:"input"`
			FaultSeq uint64          `json:"fault_seq"`
			Reason   string          `json:"reason"`
		} `json:"failed"`
	}
	jsonOut(t, world, &failed, "failed", "ls", orderWF)
	if len(failed.Failed) != 1 || string(failed.Failed[0].Key) != `"o-1"` || failed.Failed[0].Input != res.Seq || failed.Failed[0].FaultSeq != res.FaultSeq {
		t.Fatalf("failed instances: %+v", failed)
	}
	tok := token(t, world)
	height := getStatus(t, world).JournalHeight
	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["`+chargeFX+`"],"max":10}`))
	var claim struct {
		World   string `json:"world"`
		Intents []struct {
			Hash string `json:"hash"`
		} `json:"intents"`
	}
	if err := json.Unmarshal(body, &claim); err != nil || code != 200 {
		t.Fatalf("claim: %d %s", code, body)
	}
	if len(claim.Intents) != 1 || claim.Intents[0].Hash != c2 {
		t.Fatalf("claim handed out %s, want only o-2's charge %s (o-1's %s is cancelled)", body, c2, c1)
	}
	h1, _ := schemas.ParseHash(c1)
	sr := receipts.Sign(priv, receipts.Receipt{World: claim.World, Intent: h1, Effect: chargeFX, Executor: "payments",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_1", "status": "succeeded"}), Attempt: 1})
	rb, _ := receipts.ToJSON(sr)
	if code, ans := post(t, d, tok, "/v1/receipts", rb); code != 409 || !strings.Contains(string(ans), `"code":"cancelled"`) {
		t.Fatalf("receipt for the cancelled charge: %d %s", code, ans)
	}
	sf := receipts.SignFrame(priv, receipts.Frame{World: claim.World, Intent: h1, Effect: chargeFX, Seq: 1, Executor: "payments",
		Payload: schemas.MustMarshal(map[string]any{"step": "authorizing"})})
	fb, _ := receipts.FrameToJSON(sf)
	if code, ans := post(t, d, tok, "/v1/frames", fb); code != 409 || !strings.Contains(string(ans), `"code":"cancelled"`) {
		t.Fatalf("frame for the cancelled charge: %d %s", code, ans)
	}
	if after := getStatus(t, world).JournalHeight; after != height {
		t.Fatalf("refused receipt and frame journaled records: height %d -> %d", height, after)
	}
	d.stop(t, world)
	ok(t, world, "replay", "--verify")
	d = startDaemon(t, world)
	if code, ans := post(t, d, tok, "/v1/receipts", rb); code != 409 || !strings.Contains(string(ans), `"code":"cancelled"`) {
		t.Fatalf("receipt for the cancelled charge after a restart: %d %s", code, ans)
	}
}

// apiCellIntent is the one intent reminder key has in flight, read over
// HTTP.
func apiCellIntent(t *testing.T, d *daemon, tok, key string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/v1/cells/"+url.PathEscape(reminderWF)+"/"+key, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var cell struct {
		Inflight []string `json:"inflight"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cell); err != nil || len(cell.Inflight) != 1 {
		t.Fatalf("cell %s: %v %+v", key, err, cell)
	}
	return cell.Inflight[0]
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
