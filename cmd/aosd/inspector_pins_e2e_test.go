package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// ordersNamed is the orders example (its wasm built from source) under
// another manifest name, with each edit (from, to) made once in schemas.json.
func ordersNamed(t *testing.T, name string, edits ...[2]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.TrimPrefix(name, "com.example/"))
	if err := os.CopyFS(dir, os.DirFS(built.Path(t, "orders"))); err != nil {
		t.Fatal(err)
	}
	edit := func(file, from, to string) {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(string(b), from) != 1 {
			t.Fatalf("%s does not hold %q once", file, from)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("manifest.json", `"name": "com.example/orders"`, `"name": "`+name+`"`)
	for _, e := range edits {
		edit("schemas.json", e[0], e[1])
	}
	return dir
}

// settleOrder settles an order's intents: its charge, claimed and answered
// by the payments executor, and its expiry timer, fired early with the
// built-in executor's key.
func settleOrder(t *testing.T, d *daemon, world, tok string, priv []byte, orderID string) {
	t.Helper()
	var cell struct{ Inflight []string }
	jsonOut(t, world, &cell, "cells", "show", orderWF, orderID)
	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"max":5,"wait_ms":30000}`))
	var claim struct {
		World   string
		Intents []struct {
			Hash   string
			Params map[string]any
		}
	}
	if code != 200 || json.Unmarshal(body, &claim) != nil {
		t.Fatalf("claim: %d %s", code, body)
	}
	charge := ""
	for _, it := range claim.Intents {
		if it.Params["order_id"] == orderID {
			charge = it.Hash
		}
	}
	if charge == "" || len(cell.Inflight) != 2 {
		t.Fatalf("order %s: in flight %v, claimed %s", orderID, cell.Inflight, body)
	}
	builtin, err := host.Dir(world).LoadExecutorKey()
	if err != nil {
		t.Fatal(err)
	}
	if charge != cell.Inflight[0] && charge != cell.Inflight[1] {
		t.Fatalf("the claimed charge %s is not in flight for %s: %v", charge, orderID, cell.Inflight)
	}
	for _, it := range []string{charge, other(cell.Inflight, charge)} {
		h, err := schemas.ParseHash(it)
		if err != nil {
			t.Fatal(err)
		}
		rc := receipts.Receipt{World: claim.World, Intent: h, Effect: "com.example/payment.charge@1", Executor: "payments", Status: receipts.StatusOK,
			Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_" + orderID, "status": "succeeded"}), Attempt: 1}
		key := priv
		if it != charge {
			rc.Effect, rc.Executor, key = sys.EffectTimerSet, receipts.BuiltinExecutor, builtin
			rc.Payload = schemas.MustMarshal(&sys.TimerSetReceipt{DeliveredAtNs: 1})
		}
		rj, err := receipts.ToJSON(receipts.Sign(key, rc))
		if err != nil {
			t.Fatal(err)
		}
		if code, body := post(t, d, tok, "/v1/receipts", rj); code != 200 {
			t.Fatalf("receipt for %s: %d %s", it, code, body)
		}
	}
}

// other is the one of two hashes that is not h.
func other(two []string, h string) string {
	if two[0] == h {
		return two[1]
	}
	return two[0]
}

// TestInspectorPins: a real daemon runs the orders example (wasm built
// from source); an apply --pin while order o1 waits pins o1 to the first
// manifest. The inspector's status page lists both live manifests and links
// o1, whose cell page and row in the cells list say which manifest it is
// pinned to; the manifest page lists the live manifests and offers retire
// only once the first is drained. A retire that the world refuses (an order
// at rest was pinned back to the first manifest since the page was drawn)
// shows the API's 409 not_drained naming it; that order's page says why it
// stays pinned; once a third manifest accepts its state it moves,
// and the retire from the page is done.
func TestInspectorPins(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1")
	d := startDaemon(t, world)
	tok := token(t, world)
	// v2 caps an order's amount in its state schema; v3 is the first
	// manifest under another name (so another hash).
	amount := `"amount_cents": {"type": "integer"},`
	v2 := ordersNamed(t, "com.example/orders-v2", [2]string{amount, `"amount_cents": {"type": "integer", "maximum": 100000},`})
	v3 := ordersNamed(t, "com.example/orders-v3")

	ok(t, world, "apply", built.Path(t, "orders"))
	// o0 is paid and at rest before the pin: its state (999999 cents) is
	// one v2 refuses, which matters only at its next input.
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o0","amount_cents":999999,"customer":"cy"}`)
	settleOrder(t, d, world, tok, priv, "o0")
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":500,"customer":"ada"}`)
	ok(t, world, "apply", v2, "--pin")
	var ms manifestsJSON
	jsonOut(t, world, &ms, "manifests")
	if len(ms.Manifests) != 2 || ms.Manifests[0].Pinned["waiting"] != 1 {
		t.Fatalf("manifests after apply --pin: %+v", ms)
	}
	v1Hash, v2Hash := ms.Manifests[0].Hash, ms.Manifests[1].Hash

	b := newBrowser(t, d.addr)
	b.open(t, "/")
	b.login(t, tok)

	// Status: both live manifests, the first not drained with o1 waiting
	// on it and linked.
	b.until(t, "the live manifests on the status page", `document.querySelectorAll('#live-manifests tr[data-manifest]').length === 2`)
	row := func(h string) string {
		return `document.querySelector('#live-manifests tr[data-manifest="` + h + `"]')`
	}
	if s := eval[string](t, b, row(v1Hash)+`.textContent`); !strings.Contains(s, "com.example/orders") || !strings.Contains(s, "waiting 1") ||
		!strings.Contains(s, "not drained") || !strings.Contains(s, "older (pinned)") {
		t.Errorf("the status page's row of the first manifest: %q", s)
	}
	if s := eval[string](t, b, row(v2Hash)+`.textContent`); !strings.Contains(s, "com.example/orders-v2") || !strings.Contains(s, "current") {
		t.Errorf("the status page's row of the current manifest: %q", s)
	}
	pinnedLink := `document.querySelector('#live-manifests [data-pinned-to="` + v1Hash + `"] [data-pinned-cell] a')`
	b.until(t, "o1 linked as pinned", pinnedLink+` !== null && `+pinnedLink+`.textContent.includes('"o1"')`)
	if n := eval[float64](t, b, `document.querySelectorAll('#live-manifests [data-pinned-cell]').length`); n != 1 {
		t.Errorf("%v instances listed as pinned, want o1 alone:\n%s", n, b.text(t))
	}
	b.shot(t, "status-pins")

	// o1's cell page, from that link: pinned to the first manifest.
	b.do(t, "open o1 from the status page", chromedp.Click(chromedp.CSS(`#live-manifests [data-pinned-to] [data-pinned-cell] a`)))
	b.until(t, "o1's pin", `document.querySelector('#cell-pin') !== null && document.querySelector('#cell-pin').dataset.pin === '`+v1Hash+`'`)
	if s := eval[string](t, b, `document.querySelector('#cell-pin').textContent`); !strings.Contains(s, "com.example/orders") || !strings.Contains(s, v1Hash) ||
		!eval[bool](t, b, `document.querySelector('#cell-pin').classList.contains('pinned') && document.querySelector('#cell-pin-reason') === null`) {
		t.Errorf("o1's pin card: %q", s)
	}
	b.shot(t, "cell-pinned")
	// In the cells list o1's row says its pin, o0's is on the current one.
	b.open(t, "/cells/"+strings.ReplaceAll(orderWF, "/", "%2F"))
	b.until(t, "the orders' rows", `document.querySelectorAll('#cells-page tr[data-pin]').length === 2`)
	keyRow := func(k string) string {
		return `document.querySelector("a[data-key='\"` + k + `\"']").closest('tr')`
	}
	if p := eval[string](t, b, keyRow("o1")+`.dataset.pin`); p != v1Hash {
		t.Errorf("o1's row pin %q, want %s", p, v1Hash)
	}
	if s := eval[string](t, b, keyRow("o1")+`.textContent`); !strings.Contains(s, "pinned to com.example/orders") {
		t.Errorf("o1's row: %q", s)
	}
	if s := eval[string](t, b, keyRow("o0")+`.dataset.pin + '|' + `+keyRow("o0")+`.textContent`); !strings.HasPrefix(s, "|") || !strings.Contains(s, "current") {
		t.Errorf("o0's row: %q, want on the current manifest", s)
	}

	// The manifest page: no retire while o1 waits, nor for the current one.
	b.open(t, "/manifest")
	b.until(t, "the live manifests on the manifest page", `document.querySelectorAll('#live-manifests tr[data-manifest]').length === 2`)
	if n := eval[float64](t, b, `document.querySelectorAll('#live-manifests [data-retire]').length`); n != 0 {
		t.Errorf("%v retire buttons while o1 waits, want none", n)
	}
	// o1 settles under its pin and moves: the first manifest is drained.
	settleOrder(t, d, world, tok, priv, "o1")
	b.open(t, "/manifest")
	b.until(t, "retire offered for the drained manifest", `document.querySelector('#live-manifests [data-retire="`+v1Hash+`"]') !== null`)
	if n := eval[float64](t, b, `document.querySelectorAll('#live-manifests [data-retire]').length`); n != 1 {
		t.Errorf("%v retire buttons, want the drained one's alone", n)
	}
	b.shot(t, "manifests")

	// Meanwhile o0 takes an input: v2 refuses its state, so it steps under
	// the first manifest and stays pinned there, at rest. The page still
	// offers retire; the world refuses it.
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o0","amount_cents":5,"customer":"cy"}`)
	var o0 struct{ Pin, Status string }
	jsonOut(t, world, &o0, "cells", "show", orderWF, "o0")
	if o0.Pin != v1Hash || o0.Status != "completed" {
		t.Fatalf("o0 after its second create: %+v", o0)
	}
	b.do(t, "retire", chromedp.Click(chromedp.CSS(`[data-retire="`+v1Hash+`"]`)))
	b.until(t, "the refusal", `document.querySelector('#retire-result .error') !== null`)
	if s := eval[string](t, b, `document.querySelector('#retire-result').textContent`); !strings.Contains(s, "409 not_drained") || !strings.Contains(s, `key "o0" (completed: `) {
		t.Errorf("the refused retire shows %q, want the API's 409 not_drained naming o0", s)
	}
	b.until(t, "the list redrawn: not drained, no retire", `document.querySelector('#live-manifests [data-retire]') === null && `+row(v1Hash)+`.textContent.includes('1 pinned at rest')`)
	b.shot(t, "retire-refused")

	// o0's page says why it stays pinned: its state does not fit v2.
	b.open(t, cellLink(orderWF, "o0"))
	b.until(t, "o0's pin reason", `document.querySelector('#cell-pin-reason') !== null`)
	if s := eval[string](t, b, `document.querySelector('#cell-pin-reason').textContent`); !strings.Contains(s, "Stays pinned at rest") || len(s) < len("Stays pinned at rest: ")+5 {
		t.Errorf("o0's pin reason: %q", s)
	}
	var o0r struct {
		Pin    string
		Reason string `json:"pin_reason"`
	}
	jsonOut(t, world, &o0r, "cells", "show", orderWF, "o0")
	if s := eval[string](t, b, `document.querySelector('#cell-pin-reason').textContent`); o0r.Reason == "" || !strings.Contains(s, o0r.Reason) {
		t.Errorf("o0's pin reason shown %q, the API's %q", s, o0r.Reason)
	}
	b.shot(t, "cell-pinned-at-rest")

	// v3 accepts o0's state: an apply --pin moves it, and the retire from
	// the page is done.
	ok(t, world, "apply", v3, "--pin")
	b.open(t, "/manifest")
	b.until(t, "retire offered again", `document.querySelector('#live-manifests [data-retire="`+v1Hash+`"]') !== null`)
	b.do(t, "retire again", chromedp.Click(chromedp.CSS(`[data-retire="`+v1Hash+`"]`)))
	b.until(t, "the retire done", `document.querySelector('#retire-ok') !== null && `+row(v1Hash)+` === null`)
	if s := eval[string](t, b, `document.querySelector('#retire-ok').textContent`); !strings.Contains(s, "Retired com.example/orders ("+v1Hash+")") {
		t.Errorf("the retire's answer: %q", s)
	}
	ms = manifestsJSON{}
	jsonOut(t, world, &ms, "manifests")
	for _, m := range ms.Manifests {
		if m.Hash == v1Hash {
			t.Errorf("the first manifest is still live after the page retired it: %+v", ms)
		}
	}
}
