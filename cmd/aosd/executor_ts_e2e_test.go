package main_test

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// tsExecutorDir is examples/executor-ts, the TypeScript executor.
var tsExecutorDir = filepath.Join("..", "..", "examples", "executor-ts")

// tsExecutor returns the node binary and the executor's compiled
// dist/main.js: it installs the package's npm dependencies (cbor2, and
// typescript to compile) when they are missing, and compiles the sources
// with `npm run build` (tsc, type-checking them) once per test process, so
// the test always runs what the .ts files say. Under CI (CI set, as .ci/run
// runs) node is required: a missing node or a failed install fails the
// test, so CI cannot pass without running it; a failed build fails it
// everywhere. On a developer's machine with Go alone, the test says what it
// needs and skips, so README's test command works there.
func tsExecutor(t *testing.T) (node, main string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg + " (skipped outside CI; CI=true makes it fail)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node (20 or later) is required for the TypeScript executor's test: %v (apt-get install nodejs npm)", err)
	}
	tsBuildOnce.Do(func() {
		installed := true
		for _, dep := range []string{"cbor2", "typescript", filepath.Join("@types", "node")} {
			if _, err := os.Stat(filepath.Join(tsExecutorDir, "node_modules", dep)); err != nil {
				installed = false
			}
		}
		if !installed {
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
			cmd.Dir = tsExecutorDir
			if out, err := cmd.CombinedOutput(); err != nil {
				tsDepsErr = fmt.Errorf("npm ci in examples/executor-ts: %v: %s", err, out)
				return
			}
		}
		cmd := exec.Command("npm", "run", "build")
		cmd.Dir = tsExecutorDir
		if out, err := cmd.CombinedOutput(); err != nil {
			tsBuildErr = fmt.Errorf("npm run build (tsc) in examples/executor-ts: %v: %s", err, out)
		}
	})
	if tsDepsErr != nil {
		missing("the TypeScript executor's dependencies could not be installed: %v", tsDepsErr)
	}
	if tsBuildErr != nil {
		t.Fatal(tsBuildErr)
	}
	main, err = filepath.Abs(filepath.Join(tsExecutorDir, "dist", "main.js"))
	if err != nil {
		t.Fatal(err)
	}
	return node, main
}

var (
	tsBuildOnce sync.Once
	tsDepsErr   error
	tsBuildErr  error
)

// nodeProc is a running TypeScript executor (its compiled JavaScript, run
// by node).
type nodeProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

func startNode(t *testing.T, node string, args ...string) *nodeProc {
	t.Helper()
	p := &nodeProc{cmd: exec.Command(node, args...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *nodeProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Fatalf("executor did not stop cleanly on SIGTERM: %v\n%s", err, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "SIGTERM: stopping") {
		t.Fatalf("executor's log lacks its stop:\n%s", p.stderr.String())
	}
}

// receiptRec is a receipt record as GET /v1/journal renders it.
type receiptRec struct {
	Seq  uint64 `json:"seq"`
	Body struct {
		// Receipt is the signed receipt as the executor posted it
		// (docs/API.md, GET /v1/journal).
		Receipt struct {
			Attempt  uint64          `json:"attempt"`
			Effect   string          `json:"effect"`
			Executor string          `json:"executor"`
			Intent   string          `json:"intent_hash"`
			Status   string          `json:"status"`
			Payload  json.RawMessage `json:"payload"`
		} `json:"receipt"`
	} `json:"body"`
}

// followReceipts streams the receipt records journaled from seq from on.
func followReceipts(t *testing.T, d *daemon, tok string, from uint64) <-chan receiptRec {
	t.Helper()
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://%s/v1/journal?follow=true&kind=receipt&from=%d", d.addr, from), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("journal follow: HTTP %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan receiptRec)
	go func() {
		defer close(out)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var rec receiptRec
			if json.Unmarshal(line, &rec) != nil {
				return
			}
			out <- rec
		}
	}()
	return out
}

// awaitReceipts waits for n receipts journaled from executor, or fails as
// soon as the executor exits or the stream ends.
func awaitReceipts(t *testing.T, recs <-chan receiptRec, p *nodeProc, executor string, n int) []receiptRec {
	t.Helper()
	var got []receiptRec
	for len(got) < n {
		select {
		case rec, ok := <-recs:
			if !ok {
				t.Fatalf("the journal stream ended after %d of %d receipts\nexecutor:\n%s", len(got), n, p.stderr.String())
			}
			if rec.Body.Receipt.Executor == executor {
				got = append(got, rec)
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the executor exited (%v) after %d of %d receipts:\n%s", err, len(got), n, p.stderr.String())
		}
	}
	return got
}

// TestTSExecutorSettlesOrders runs examples/executor-ts, the
// TypeScript executor (compiled by tsc), as a real process against a real daemon serving the
// orders example: its first run makes a key, the world trusts it over
// POST /v1/keys, and then it claims the charges, fails the first attempt
// of each (a simulated outage: a signed frame each, as the manifest's retry
// policy says), and settles them with receipts the daemon verifies. Amounts
// beyond 2^53 are decided exactly (9007199254740992 is at the decline limit
// and paid, one cent more is declined). Then an outage longer than the
// policy's five attempts ends in an error receipt and a failed payment.
func TestTSExecutorSettlesOrders(t *testing.T) {
	t.Parallel()
	node, main := tsExecutor(t)
	world := newWorld(t)
	d := startDaemon(t, world)
	tok := token(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	const charge = "com.example/payment.charge@1"

	key := filepath.Join(t.TempDir(), "payments-ts.key")
	out, err := exec.Command(node, main, "--world", world, "--key", key).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "aosd keys add payments "+key+".pub.pem --effects "+charge) {
		t.Fatalf("the first run should make the key and say how to trust it: %v\n%s", err, out)
	}
	pubPEM, err := os.ReadFile(key + ".pub.pem")
	if err != nil {
		t.Fatal(err)
	}
	addKey, _ := json.Marshal(map[string]any{"name": "payments", "public_key": string(pubPEM), "effects": []string{charge}})
	code, body := post(t, d, tok, "/v1/keys", addKey)
	var added struct{ ID string }
	if code != 200 || json.Unmarshal(body, &added) != nil {
		t.Fatalf("POST /v1/keys: %d %s", code, body)
	}
	// The key files are aosd's forms: Go reads the private key the TypeScript executor wrote.
	if priv, err := receipts.ReadPrivateKeyFile(key); err != nil || receipts.KeyID(priv.Public().(ed25519.PublicKey)) != added.ID {
		t.Fatalf("the TypeScript executor's key as Go reads it: %v (trusted id %s)", err, added.ID)
	}

	orders := []struct{ id, value, status string }{
		{"small", `{"order_id":"small","amount_cents":900,"customer":"ada"}`, "paid"},
		{"unicode", `{"order_id":"unicode","amount_cents":4200,"customer":"Zoë 😀"}`, "paid"},
		{"at-limit", `{"order_id":"at-limit","amount_cents":9007199254740992,"customer":"big"}`, "paid"},
		{"over-limit", `{"order_id":"over-limit","amount_cents":9007199254740993,"customer":"big"}`, "payment_failed"},
	}
	recs := followReceipts(t, d, tok, getStatus(t, world).JournalHeight+1)
	for _, o := range orders {
		ok(t, world, "send", "com.example/OrderCreated@1", o.value)
	}
	p := startNode(t, node, main, "--world", world, "--key", key, "--decline-over", "9007199254740992", "--fail-attempts", "1")
	got := awaitReceipts(t, recs, p, "payments", len(orders))
	p.stop(t)

	byIntent := map[string]receiptRec{}
	for _, r := range got {
		if r.Body.Receipt.Effect != charge || r.Body.Receipt.Status != "ok" || r.Body.Receipt.Attempt != 2 {
			t.Errorf("receipt %+v: want an ok charge receipt on attempt 2", r.Body)
		}
		byIntent[r.Body.Receipt.Intent] = r
	}
	for _, o := range orders {
		var cell struct{ State map[string]any }
		jsonOut(t, world, &cell, "cells", "show", orderWF, o.id)
		if cell.State["status"] != o.status {
			t.Errorf("order %s: state %v, want status %s", o.id, cell.State, o.status)
		}
		intent := chargeIntent(t, world, o.id)
		r, settled := byIntent[intent]
		if !settled {
			t.Errorf("order %s: no receipt for its charge %s", o.id, intent)
			continue
		}
		h, err := schemas.ParseHash(intent)
		if err != nil {
			t.Fatal(err)
		}
		var payload struct {
			ChargeID string `json:"charge_id"`
			Status   string `json:"status"`
		}
		if err := json.Unmarshal(r.Body.Receipt.Payload, &payload); err != nil {
			t.Fatalf("order %s: receipt payload %s: %v", o.id, r.Body.Receipt.Payload, err)
		}
		wantCharge := map[string]string{"paid": "succeeded", "payment_failed": "declined"}[o.status]
		if payload.ChargeID != "ch_"+h.Short() || payload.Status != wantCharge {
			t.Errorf("order %s: receipt payload %s, want charge ch_%s %s", o.id, r.Body.Receipt.Payload, h.Short(), wantCharge)
		}
		if o.status == "paid" && cell.State["charge_id"] != "ch_"+h.Short() {
			t.Errorf("order %s: charge_id %v", o.id, cell.State["charge_id"])
		}
	}
	tr := ok(t, world, "trace", orderWF, "small")
	for _, want := range []string{"frame 1 from payments", "com.example/payment.charge@1 ok, attempt 2 from payments"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trace of order small lacks %q:\n%s", want, tr)
		}
	}

	// An outage longer than the retry policy (max_attempts 5 in
	// examples/manifests/orders/effects.json): four frames, then an error
	// receipt, and the order's payment fails.
	recs = followReceipts(t, d, tok, getStatus(t, world).JournalHeight+1)
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"outage","amount_cents":100,"customer":"cy"}`)
	p = startNode(t, node, main, "--world", world, "--key", key, "--fail-attempts", "99")
	last := awaitReceipts(t, recs, p, "payments", 1)[0]
	p.stop(t)
	if last.Body.Receipt.Status != "error" || last.Body.Receipt.Attempt != 5 || !strings.Contains(string(last.Body.Receipt.Payload), `"attempts":5`) {
		t.Errorf("outage receipt %+v %s: want an error receipt after 5 attempts", last.Body.Receipt, last.Body.Receipt.Payload)
	}
	var cell struct{ State map[string]any }
	jsonOut(t, world, &cell, "cells", "show", orderWF, "outage")
	if cell.State["status"] != "payment_failed" {
		t.Errorf("order outage: state %v, want payment_failed", cell.State)
	}
	tr = ok(t, world, "trace", "--intent", last.Body.Receipt.Intent)
	if n := strings.Count(tr, "from payments:"); n != 4 || !strings.Contains(tr, "com.example/payment.charge@1 error: ") || !strings.Contains(tr, "attempt 5 from payments") {
		t.Errorf("the outage intent's trace: %d frames, want 4 and an error receipt:\n%s", n, tr)
	}
}

// chargeIntent finds the payment intent an order's step opened, from the
// cell's trace.
func chargeIntent(t *testing.T, world, order string) string {
	t.Helper()
	var entries []struct {
		Kind    string
		Effect  string
		Intents []string
	}
	jsonOut(t, world, &entries, "trace", orderWF, order)
	for _, e := range entries {
		if e.Kind == "intent" && e.Effect == "com.example/payment.charge@1" && len(e.Intents) == 1 {
			return e.Intents[0]
		}
	}
	t.Fatalf("order %s: no payment intent in its trace %+v", order, entries)
	return ""
}
