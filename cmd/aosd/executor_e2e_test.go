package main_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func post(t *testing.T, d *daemon, tok, path string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+d.addr+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestExternalExecutor drives the executor protocol over HTTP: a payments
// executor whose key was trusted with `aosd keys add` claims the charge
// intent, signs a receipt, and the order is paid; a duplicate is refused
// (409 duplicate), a forged receipt is refused (403), and neither journals
// anything; `aosd trace --intent` shows the intent's life. `keys add`
// without --effects, or for a built-in effect, is refused.
func TestExternalExecutor(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	if r := aosd(t, world, "keys", "add", "payments", pubFile); r.code != 2 || !strings.Contains(r.stderr, "--effects is required") {
		t.Fatalf("keys add without --effects: exit %d: %s", r.code, r.stderr)
	}
	if r := aosd(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1,sys/timer.set@1"); r.code != 1 ||
		!strings.Contains(r.stderr, "only the built-in executors' key") {
		t.Fatalf("keys add for a built-in effect: exit %d: %s", r.code, r.stderr)
	}
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1") // no daemon: edits the world's keyring
	d := startDaemon(t, world)
	var keys []struct{ Name, ID string }
	jsonOut(t, world, &keys, "keys", "ls")
	if len(keys) != 2 {
		t.Fatalf("keys %v, want payments and aos/builtin", keys)
	}
	ok(t, world, "apply", built.Path(t, "orders"))
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o-1","amount_cents":1250,"customer":"ada"}`)
	tok := token(t, world)

	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"max":5,"wait_ms":10000}`))
	var claim struct {
		World   string // the world's identity: the receipt names it
		Intents []struct {
			Hash, Effect string
			Params       map[string]any
		}
	}
	if code != 200 || json.Unmarshal(body, &claim) != nil || len(claim.Intents) != 1 {
		t.Fatalf("claim: %d %s", code, body)
	}
	it := claim.Intents[0]
	if it.Params["order_id"] != "o-1" || it.Params["amount_cents"] != float64(1250) {
		t.Fatalf("claimed params %v", it.Params)
	}
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{World: claim.World, Intent: h, Effect: it.Effect, Executor: "payments", Status: receipts.StatusOK,
		Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_1", "status": "succeeded"}), Attempt: 1})
	rj, err := receipts.ToJSON(sr)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, d, tok, "/v1/receipts", rj); code != 200 {
		t.Fatalf("receipt: %d %s", code, body)
	}
	var cell struct {
		Status string
		State  map[string]any
	}
	jsonOut(t, world, &cell, "cells", "show", "com.example/order.step@1", "o-1")
	if cell.State["status"] != "paid" || cell.State["charge_id"] != "ch_1" {
		t.Fatalf("order after receipt: %+v", cell)
	}
	before := getStatus(t, world)
	if code, body := post(t, d, tok, "/v1/receipts", rj); code != 409 || !strings.Contains(string(body), `"duplicate"`) {
		t.Fatalf("duplicate receipt: %d %s", code, body)
	}
	forged := sr
	forged.Signature = append([]byte(nil), sr.Signature...)
	forged.Signature[5] ^= 0x40
	fj, _ := receipts.ToJSON(forged)
	if code, body := post(t, d, tok, "/v1/receipts", fj); code != 403 || !strings.Contains(string(body), "untrusted") {
		t.Fatalf("forged receipt: %d %s", code, body)
	}
	if after := getStatus(t, world); after.JournalHeight != before.JournalHeight {
		t.Fatalf("forged receipt changed the journal: %d -> %d", before.JournalHeight, after.JournalHeight)
	}
	tr := ok(t, world, "trace", "--intent", it.Hash)
	for _, want := range []string{"intent", "receipt", "from payments"} {
		if !strings.Contains(tr, want) {
			t.Fatalf("trace --intent lacks %q:\n%s", want, tr)
		}
	}
}

// TestBuiltinTimerThroughDaemon: `aosd serve` runs the built-in timer
// executor; `send --wait` returns once the reminder has fired.
func TestBuiltinTimerThroughDaemon(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "reminders"))
	ok(t, world, "send", "com.example/ReminderSet@1", `{"reminder_id":"r1","text":"stand up","delay_ms":50}`, "--wait", "60s")
	var cell struct {
		Status string
		State  map[string]any
	}
	jsonOut(t, world, &cell, "cells", "show", "com.example/reminder.step@1", "r1")
	if cell.State["status"] != "fired" || cell.Status != "completed" {
		t.Fatalf("reminder: %+v", cell)
	}
	tr := ok(t, world, "trace", "com.example/reminder.step@1", "r1")
	if !strings.Contains(tr, "sys/timer.set@1 ok: fired ") || !strings.Contains(tr, "attempt 1 from aos/builtin") {
		t.Fatalf("trace lacks the timer receipt:\n%s", tr)
	}
	// The receipt's signature was checked by the daemon's verifier.
	body := metricsText(t, d, world)
	if !strings.Contains(body, "aos_receipt_verify_receipts_total 1\n") || !strings.Contains(body, "aos_receipt_verify_batches_total 1\n") {
		t.Fatalf("metrics do not count one verified receipt:\n%s", body)
	}
}

// TestExampleExecutorProcess runs examples/executor as a separate process,
// the way docs/API.md tells a user to: its first run makes a key, the
// world trusts it with `aosd keys add`, and its second run claims the
// charge intents, signs receipts and exits. One order is paid, the one
// over the decline limit fails payment.
func TestExampleExecutorProcess(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	bin := filepath.Join(t.TempDir(), "executor")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/executor").CombinedOutput(); err != nil {
		t.Fatalf("build example executor: %v\n%s", err, out)
	}
	key := filepath.Join(t.TempDir(), "payments.key")
	out, err := exec.Command(bin, "--world", world, "--key", key).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "aosd keys add payments") {
		t.Fatalf("first run should create the key and say how to trust it: %v\n%s", err, out)
	}
	ok(t, world, "keys", "add", "payments", key+".pub.pem", "--effects", "com.example/payment.charge@1")
	startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"small","amount_cents":900,"customer":"ada"}`)
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"huge","amount_cents":900000,"customer":"bob"}`)
	want := map[string]string{"small": "paid", "huge": "payment_failed"}
	settled := func() bool {
		for id := range want {
			var cell struct{ State map[string]any }
			jsonOut(t, world, &cell, "cells", "show", orderWF, id)
			if cell.State["status"] == "awaiting_payment" {
				return false
			}
		}
		return true
	}
	// Each --once run settles the batch it claims; the two orders may come in
	// one batch or two (a run with nothing to claim would block, so stop as
	// soon as both are settled).
	for i := 0; i < 2 && !settled(); i++ {
		if out, err := exec.Command(bin, "--world", world, "--key", key, "--once", "--decline-over", "100000").CombinedOutput(); err != nil {
			t.Fatalf("executor run: %v\n%s", err, out)
		}
	}
	for id, st := range want {
		var cell struct{ State map[string]any }
		jsonOut(t, world, &cell, "cells", "show", orderWF, id)
		if cell.State["status"] != st {
			t.Errorf("order %s: state %v, want status %s", id, cell.State, st)
		}
	}
}

// newExecutorKey makes an ed25519 executor key and writes its public half
// as a PEM file, ready for `aosd keys add`.
func newExecutorKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(t.TempDir(), "payments.pub.pem")
	if err := receipts.WritePublicKeyFile(pubFile, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	return priv, pubFile
}
