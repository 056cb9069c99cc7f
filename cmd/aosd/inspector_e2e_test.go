package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// The inspector's end-to-end tests drive a real headless Chromium (Debian's
// chromium package, or AOS_CHROMIUM) against a real `aosd serve`. Without a
// browser they skip loudly, except under CI=true, where they fail.

// pageTimeout bounds each wait for a DOM condition: a hang guard, not a
// timing assertion (a condition holds as soon as the page has drawn it).
const pageTimeout = 90 * time.Second

func chromiumPath(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("AOS_CHROMIUM"); p != "" {
		names = []string{p} // only the browser named
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("NO BROWSER: the inspector's browser tests need Chromium (apt-get install -y chromium, or set AOS_CHROMIUM); none of %v found; they did NOT run", names)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: this is a failure)")
	}
	fmt.Fprintln(os.Stderr, "!!!", msg)
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium with a fresh profile, closed when the
// test ends. Uncaught exceptions in the page fail the test.
type browser struct {
	ctx  context.Context
	addr string
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T, addr string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx, addr: addr}
	t.Cleanup(func() { cancel(); cancelA() })
	b.listen(t, ctx)
	return b
}

// listen records the page's uncaught exceptions; the test fails on any.
func (b *browser) listen(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			b.mu.Lock()
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errs = append(b.errs, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errs {
			t.Errorf("uncaught exception in the page: %s", e)
		}
	})
}

func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage: %s", what, err, b.text(t))
	}
}

func (b *browser) open(t *testing.T, path string) {
	t.Helper()
	b.do(t, "open "+path, chromedp.Navigate("http://"+b.addr+path))
}

// until waits for a JavaScript condition on the page to hold.
func (b *browser) until(t *testing.T, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(pageTimeout))); err != nil {
		t.Fatalf("waiting for %s (%s): %v\npage: %s", what, cond, err, b.text(t))
	}
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the page's visible text, for failure messages.
func (b *browser) text(t *testing.T) string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// shot saves a screenshot as DIR/name.png when AOS_INSPECTOR_SHOTS=DIR
// (docs/inspector/*.png are made this way).
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("AOS_INSPECTOR_SHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) login(t *testing.T, tok string) {
	t.Helper()
	b.until(t, "the login page", `document.querySelector('#login') !== null`)
	b.do(t, "log in", chromedp.SendKeys(chromedp.ID("token"), tok), chromedp.Click(chromedp.ID("login-submit")))
	b.until(t, "the page after login", `document.querySelector('#login') === null && document.querySelector('#logout').hidden === false`)
}

// cellLink is the inspector's deep link of a cell (docs/inspector.md).
func cellLink(wf string, key any) string {
	k, _ := json.Marshal(key)
	return "/cells/" + url.PathEscape(wf) + "/" + url.PathEscape(string(k))
}

// payOrder claims the order's charge as the payments executor and posts its
// signed receipt; it returns the intent's hash.
func payOrder(t *testing.T, d *daemon, tok string, priv []byte, orderID, chargeID string) string {
	t.Helper()
	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"max":1,"wait_ms":30000}`))
	var claim struct {
		World   string // the world's identity: the receipt names it
		Intents []struct {
			Hash, Effect string
			Params       map[string]any
		}
	}
	if code != 200 || json.Unmarshal(body, &claim) != nil || len(claim.Intents) != 1 || claim.Intents[0].Params["order_id"] != orderID {
		t.Fatalf("claim: %d %s", code, body)
	}
	it := claim.Intents[0]
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{World: claim.World, Intent: h, Effect: it.Effect, Executor: "payments", Status: receipts.StatusOK,
		Payload: schemas.MustMarshal(map[string]any{"charge_id": chargeID, "status": "succeeded"}), Attempt: 1})
	rj, err := receipts.ToJSON(sr)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, d, tok, "/v1/receipts", rj); code != 200 {
		t.Fatalf("receipt: %d %s", code, body)
	}
	return it.Hash
}

// TestInspectorInBrowser logs in to the inspector of a real daemon running
// the orders example, opens a paid order's cell and sees its timeline with
// the receipt and the state diff (and travels back to an earlier step),
// follows the journal live while events are sent, shows an intent, the
// cells list, the status and a manifest diff, and is refused without the
// token: the data requests answer 401 and the page shows the login.
func TestInspectorInBrowser(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1")
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o-1","amount_cents":1250,"customer":"ada"}`)
	tok := token(t, world)
	intent := payOrder(t, d, tok, priv, "o-1", "ch_1")

	b := newBrowser(t, d.addr)

	// A wrong token: the login page says so and keeps nothing.
	b.open(t, "/")
	b.until(t, "the login page", `document.querySelector('#login') !== null`)
	b.do(t, "a wrong token", chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.ID("login-submit")))
	b.until(t, "the login error", `!document.querySelector('#login-error').hidden && document.querySelector('#login-error').textContent.includes('wrong bearer token')`)
	if got := eval[bool](t, b, `sessionStorage.getItem('aos.token') === null`); !got {
		t.Fatal("a refused token was kept in sessionStorage")
	}
	b.shot(t, "login")
	eval[chromedp.Void](t, b, `document.querySelector('#token').value = ''; undefined`)
	b.login(t, tok)

	// Status.
	st := getStatus(t, world)
	b.until(t, "the status cards", `document.querySelector('[data-value=height]') !== null && document.querySelector('[data-value="manifest-name"]').textContent === 'com.example/orders'`)
	if h := eval[string](t, b, `document.querySelector('[data-value=height]').textContent`); h == "" {
		t.Fatal("no height shown")
	} else if n, _ := strconv.ParseUint(h, 10, 64); n < st.JournalHeight {
		t.Fatalf("height shown %s, the world's is at least %d", h, st.JournalHeight)
	}
	b.until(t, "a computed rate", `document.querySelector('[data-value="rate-steps"]').textContent.endsWith('/s')`)
	b.shot(t, "status")

	// The cells of the orders workflow, then the cell by its key.
	b.do(t, "open the workflow", chromedp.Click(chromedp.CSS(`a[data-workflow="com.example/order.step@1"]`)))
	b.until(t, "the cells page", `document.querySelector("a[data-key='\"o-1\"']") !== null`)
	b.shot(t, "cells")
	// The status filter: no order failed; o-1 waits for its timer.
	b.do(t, "filter failed", chromedp.SetValue(chromedp.ID("status-filter"), "failed"), chromedp.Evaluate[chromedp.Void](`document.querySelector('#status-filter').dispatchEvent(new Event('change')); undefined`))
	b.until(t, "no failed cells", `location.search === '?status=failed' && document.querySelector('#cells-page').textContent.includes('No cells with status failed')`)
	b.do(t, "filter waiting", chromedp.SetValue(chromedp.ID("status-filter"), "waiting"), chromedp.Evaluate[chromedp.Void](`document.querySelector('#status-filter').dispatchEvent(new Event('change')); undefined`))
	b.until(t, "the waiting cell", `location.search === '?status=waiting' && document.querySelector("a[data-key='\"o-1\"']") !== null`)
	// A refusal of the API is shown once, where the list would be.
	b.open(t, "/cells/"+url.PathEscape(orderWF)+"?status=bogus")
	b.until(t, "the API's refusal", `document.querySelector('#cells-page .error') !== null`)
	if s := eval[string](t, b, `[...document.querySelectorAll('.error')].map((e) => e.textContent).join(' | ')`); !strings.Contains(s, "400 invalid_input") || strings.Contains(s, " | ") {
		t.Errorf("errors shown for an unknown status: %q, want the API's 400 once", s)
	}
	b.open(t, "/cells/"+url.PathEscape(orderWF))
	b.until(t, "the cells page again", `document.querySelector("a[data-key='\"o-1\"']") !== null`)
	b.do(t, "search the key", chromedp.SendKeys(chromedp.ID("key-search"), "o-1"), chromedp.Click(chromedp.CSS(`#key-form button`)))
	// The same cell's link as `aosd trace` prints it.
	tr := strings.Split(strings.TrimSpace(ok(t, world, "trace", orderWF, "o-1")), "\n")
	link, found := strings.CutPrefix(tr[len(tr)-1], "inspector: http://"+d.addr)
	if !found {
		t.Fatalf("trace does not end with the inspector's link:\n%s", strings.Join(tr, "\n"))
	}

	// The cell's timeline: the event, the steps, the intents, the receipt;
	// the last step is selected, with its state and its diff from the one
	// before (the receipt made the order paid).
	b.until(t, "the timeline with the receipt", `document.querySelector('#timeline-table tr[data-kind="receipt"]') !== null`)
	if p := eval[string](t, b, `decodeURIComponent(location.pathname)`); p != "/cells/com.example/order.step@1/\"o-1\"" {
		t.Errorf("the key search went to %s, want the cell's deep link", p)
	}
	b.open(t, link)
	b.until(t, "the timeline from trace's link", `document.querySelector('#timeline-table tr[data-kind="receipt"]') !== null`)
	for _, k := range []string{"event", "step", "intent", "receipt"} {
		if !eval[bool](t, b, `document.querySelector('#timeline-table tr[data-kind="`+k+`"]') !== null`) {
			t.Errorf("the timeline has no %s entry:\n%s", k, b.text(t))
		}
	}
	b.until(t, "the diff of the paying step", `document.querySelector('#state-diff') !== null && document.querySelector('#state-diff').textContent.includes('/charge_id') && document.querySelector('#state-diff').textContent.includes('/status')`)
	if s := eval[string](t, b, `document.querySelector('#step-state').textContent`); !strings.Contains(s, `"paid"`) || !strings.Contains(s, `"ch_1"`) {
		t.Errorf("state after the last step: %s", s)
	}
	if s := eval[string](t, b, `document.querySelector('#timeline-table').textContent`); !strings.Contains(s, "ok from payments") {
		t.Errorf("the receipt's row lacks its status and executor: %s", s)
	}
	b.shot(t, "cell")
	// Time travel: the first step's state is the order awaiting payment.
	b.do(t, "select the first step", chromedp.Click(chromedp.CSS(`#timeline-table tr[data-kind="step"] td:nth-child(2)`)))
	b.until(t, "the first step's state", `document.querySelector('#step-state').textContent.includes('awaiting_payment') && !document.querySelector('#step-state').textContent.includes('ch_1')`)

	// A key nothing reached: no cell, and an empty history, not an error.
	b.open(t, cellLink(orderWF, "nobody"))
	b.until(t, "the empty cell page", `document.querySelector('#no-cell') !== null && document.querySelector('#timeline').textContent.includes('Nothing in the journal reached this cell') && document.querySelector('.error') === null`)
	b.open(t, link)
	b.until(t, "the paid order again", `document.querySelector('#timeline-table tr[data-kind="receipt"]') !== null`)

	// The intent's life, from the receipt's link.
	b.do(t, "open the intent", chromedp.Click(chromedp.CSS(`#timeline-table tr[data-kind="receipt"] a[data-intent]`)))
	b.until(t, "the intent page", `document.querySelector('#intent-hash') !== null && document.querySelector('tr[data-kind="receipt"]') !== null`)
	if h := eval[string](t, b, `document.querySelector('#intent-hash').textContent`); h != intent {
		t.Errorf("intent page shows %s, want %s", h, intent)
	}
	b.shot(t, "intent")

	// The journal, followed live while events are sent.
	b.open(t, "/journal")
	b.until(t, "the journal page", `document.querySelectorAll('#journal-rows tr').length > 0`)
	b.do(t, "follow live", chromedp.Click(chromedp.ID("follow")))
	b.until(t, "the live follow", `document.querySelector('#follow-state').textContent === 'live'`)
	for _, id := range []string{"o-2", "o-3"} {
		ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"`+id+`","amount_cents":500,"customer":"bob"}`)
		b.until(t, "the event for "+id+" in the followed journal", `[...document.querySelectorAll('#journal-rows tr[data-kind="event"]')].some((r) => r.textContent.includes('"`+id+`"'))`)
	}
	b.shot(t, "journal")
	// A seq's deep link highlights and shows that record.
	b.open(t, "/journal/1")
	b.until(t, "record 1", `document.querySelector('#journal-rows tr.highlight[data-seq="1"]') !== null && document.querySelector('#record-body') !== null`)

	// The manifest and the diff a proposal would make (a dry run: the
	// world's manifest is unchanged after it).
	dir := t.TempDir()
	src := built.Path(t, "orders")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	extra := filepath.Join(dir, "extra.json")
	os.WriteFile(extra, []byte(`[{"$kind":"defschema","name":"com.example/Note@1","schema":{"type":"string"}}]`), 0o644)
	files = append(files, extra)
	before := getStatus(t, world)
	b.open(t, "/manifest")
	b.until(t, "the manifest page", `document.querySelector('#manifest-files') !== null`)
	b.do(t, "choose the proposal", chromedp.SetUploadFiles(chromedp.ID("manifest-files"), files), chromedp.Click(chromedp.ID("dry-run")))
	b.until(t, "the dry run's diff", `document.querySelector('#apply-report') !== null`)
	if s := eval[string](t, b, `document.querySelector('#apply-report').textContent`); !strings.Contains(s, "com.example/Note@1") {
		t.Errorf("the dry run's report does not name the added schema:\n%s", s)
	}
	b.shot(t, "manifest")
	b.do(t, "shadow run", chromedp.Click(chromedp.ID("shadow-run")))
	b.until(t, "the shadow report", `document.querySelector('#shadow-report') !== null`)
	// The copy re-fed the three orders under the proposal: each opened a
	// charge and a timer.
	if s := eval[string](t, b, `document.querySelector('#shadow-report').textContent`); !strings.Contains(s, "com.example/Note@1") ||
		!strings.Contains(s, "Effects opened (6)") || !strings.Contains(s, "3 submitted") {
		t.Errorf("the shadow report:\n%s", s)
	}
	b.shot(t, "shadow")
	if after := getStatus(t, world); *after.ManifestHash != *before.ManifestHash {
		t.Errorf("the dry run changed the manifest: %s -> %s", *before.ManifestHash, *after.ManifestHash)
	}

	// Log out drops the token.
	b.do(t, "log out", chromedp.Click(chromedp.ID("logout")))
	b.until(t, "the login page after logging out", `document.querySelector('#login') !== null && sessionStorage.getItem('aos.token') === null`)

	// Refused without the token: a fresh tab (its own sessionStorage) opening
	// a deep link gets the login; its data requests answer 401; a wrong token
	// put in storage is refused by the API and sends the page to the login.
	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	nb := &browser{ctx: tab, addr: d.addr}
	nb.listen(t, tab)
	nb.open(t, cellLink(orderWF, "o-1"))
	nb.until(t, "the login page on a deep link", `document.querySelector('#login') !== null`)
	if s := eval[float64](t, nb, `fetch('/v1/cells/'+encodeURIComponent('com.example/order.step@1')+'/o-1').then((r) => r.status)`); s != 401 {
		t.Errorf("a data request without the token: %v, want 401", s)
	}
	if s := eval[float64](t, nb, `fetch('/metrics').then((r) => r.status)`); s != 401 {
		t.Errorf("/metrics without the token: %v, want 401", s)
	}
	eval[chromedp.Void](t, nb, `sessionStorage.setItem('aos.token', 'stale'); undefined`)
	nb.open(t, cellLink(orderWF, "o-1"))
	nb.until(t, "the login page after a 401", `document.querySelector('#login') !== null && document.querySelector('#login-error').textContent.includes('wrong bearer token') && sessionStorage.getItem('aos.token') === null`)
	if s := eval[bool](t, nb, `document.querySelector('#cell-state') === null && document.querySelector('#timeline-table') === null`); !s {
		t.Error("the cell's data is on the page without the token")
	}
}

// TestInspectorTimeline10k opens the cell of a counter stepped 10,000 times
// and reports how long its timeline's first page takes to render in the
// browser: from the request to the rows in the page, and to the frame that
// draws them (docs/PERFORMANCE.md). The figures are reported, not asserted;
// the test asserts that the page holds one page of entries, not the cell's
// whole history, and that the next page follows.
func TestInspectorTimeline10k(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	world := newWorld(t)
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "counter"))
	tok := token(t, world)
	const steps, batch = 10000, 1000
	for i := 0; i < steps; i += batch {
		var sb strings.Builder
		sb.WriteByte('[')
		for j := 0; j < batch; j++ {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(`{"schema":"com.example/CountEvent@1","value":{"key":"big","by":1}}`)
		}
		sb.WriteByte(']')
		if code, body := post(t, d, tok, "/v1/events", []byte(sb.String())); code != 200 {
			t.Fatalf("send events %d..: %d %s", i, code, body)
		}
	}
	var cell struct{ State map[string]any }
	jsonOut(t, world, &cell, "cells", "show", counterWF, "big")
	if cell.State["count"] != float64(steps) {
		t.Fatalf("count %v after %d events", cell.State["count"], steps)
	}

	b := newBrowser(t, d.addr)
	b.open(t, "/")
	b.login(t, tok)
	b.open(t, cellLink(counterWF, "big"))
	b.until(t, "the first page's render time", `document.querySelector('#timeline').dataset.firstPaintMs !== undefined`)
	dom := eval[string](t, b, `document.querySelector('#timeline').dataset.firstPageMs`)
	paint := eval[string](t, b, `document.querySelector('#timeline').dataset.firstPaintMs`)
	fetched := eval[string](t, b, `document.querySelector('#timeline').dataset.firstFetchMs`)
	rows := eval[float64](t, b, `document.querySelectorAll('#timeline-table tbody tr').length`)
	t.Logf("timeline of a cell with %d steps: first page (%v entries) rendered in %s ms (request to rows in the DOM; the answer arrived at %s ms), %s ms to the frame that draws them", steps, rows, dom, fetched, paint)
	if rows != 100 {
		t.Errorf("the first page holds %v entries, want 100 (one page, not the whole history)", rows)
	}
	b.shot(t, "timeline-10k")
	b.do(t, "the next page", chromedp.Click(chromedp.ID("timeline-next")))
	b.until(t, "the second page", `document.querySelector('#timeline').dataset.loaded === '2' && document.querySelectorAll('#timeline-table tbody tr').length === 100`)
	if first := eval[float64](t, b, `Number(document.querySelector('#timeline-table tbody tr').dataset.seq)`); first <= 100 {
		t.Errorf("the second page starts at seq %v, inside the first page", first)
	}
}
