package api_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// "No effect is published before its intent is durable" (docs/DESIGN.md §7,
// docs/crash-harness.md): the crash harness cannot catch an early
// publication, because a SIGKILL loses nothing the daemon already handed to
// the kernel with write, and the append follows the publication within
// microseconds. These tests look from inside the journal append itself: the
// storefault journal's hooks run in the committer while the frame that
// records an intent is on its way into (BeforeAppend) or back out of
// (AfterAppend) the store, and from there, synchronously, an executor
// claims over real HTTP. The hook is the synchronization point: while it
// runs, the append cannot complete.

// durableWorld is the answers world (answersManifest: t/job@1 opens a
// t/work@1 intent for an external executor) on Badger in dir, with the
// dispatcher and HTTP API of `aosd serve`, and journal hooks.
type durableWorld struct {
	url, token string
	w          *kernel.World
	disp       *effects.Dispatcher
	log        *storefault.Journal
	faults     *storefault.Injector
	close      func()
}

func openDurableWorld(t *testing.T, dir host.Dir) *durableWorld {
	t.Helper()
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(true))
	b.MustRegister("t/job", "t/job@1", "step", jobStep)
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	dw := &durableWorld{faults: &storefault.Injector{}}
	dw.log = &storefault.Journal{Log: db.Journal(), Faults: dw.faults}
	kr, disp, err := host.NewExecutors(dir, effects.Builtins(db.CAS(), nil), nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	cfg := kernel.Config{Builtins: b, Keyring: kr, Publisher: disp, SnapshotEvery: -1, SnapshotInterval: -1}
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: dw.log}, cfg)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	disp.Start(w)
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	local := api.NewLocal(w, api.NewKeys(dir.Path(host.ExecutorsFile), kr))
	local.Config = cfg
	hs := httptest.NewServer((&api.Server{Backend: local, Token: tok,
		Executors: &api.Executors{W: w, Dispatcher: disp, Keyring: kr}}).Handler())
	var once sync.Once
	dw.close = func() {
		once.Do(func() {
			hs.Close()
			w.Close()
			disp.Stop()
			db.Close()
		})
	}
	t.Cleanup(dw.close)
	dw.url, dw.token, dw.w, dw.disp = hs.URL, tok, w, disp
	return dw
}

// call sends one request with the bearer token.
func (dw *durableWorld) call(t *testing.T, method, path, body string) httpAnswer {
	t.Helper()
	aw := answersWorld{url: dw.url, token: dw.token}
	return aw.call(t, "", method, path, body, nil)
}

// claim asks for t/work@1 intents without waiting and returns their hashes.
func (dw *durableWorld) claim(t *testing.T) []string {
	t.Helper()
	out, err := dw.tryClaim()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tryClaim is claim for a goroutine other than the test's (a journal hook
// runs in the committer).
func (dw *durableWorld) tryClaim() ([]string, error) {
	req, err := http.NewRequest("POST", dw.url+"/v1/effects/claim",
		strings.NewReader(`{"executor":"payments","effects":["t/work@1"],"max":100,"wait_ms":0}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+dw.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("claim: HTTP %d %s", resp.StatusCode, body)
	}
	var ans struct {
		Intents []struct {
			Hash string `json:"hash"`
		} `json:"intents"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("claim answer %s: %w", body, err)
	}
	out := []string{}
	for _, it := range ans.Intents {
		out = append(out, it.Hash)
	}
	return out, nil
}

// dispatched lists the intents the dispatcher was handed.
func (dw *durableWorld) dispatched() []string {
	var out []string
	for _, p := range dw.disp.Pending() {
		out = append(out, p.Hash.String())
	}
	return out
}

// intentsIn returns the hashes of the intent records among recs.
func intentsIn(recs []journal.Record) ([]string, error) {
	var out []string
	for _, r := range recs {
		if r.Kind != journal.KindIntent {
			continue
		}
		v, err := records.Decode(r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", r.Seq, err)
		}
		it, ok := v.(*records.IntentRec)
		if !ok {
			return nil, fmt.Errorf("record %d: an intent record decodes to %T", r.Seq, v)
		}
		out = append(out, it.Hash.String())
	}
	return out, nil
}

func newDurableWorld(t *testing.T) (host.Dir, *durableWorld, ed25519.PrivateKey) {
	t.Helper()
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	dw := openDurableWorld(t, dir)
	if a := dw.call(t, "POST", "/v1/apply", `{"files":[{"name":"manifest.json","content":`+answersManifest+`}]}`); a.status != 200 {
		t.Fatalf("apply: HTTP %d %s", a.status, a.body)
	}
	payments, _ := receipts.GenerateKey()
	kb, _ := json.Marshal(api.AddKeyRequest{Name: "payments", PublicKey: pubPEM(t, payments.Public().(ed25519.PublicKey)), Effects: []string{workFx}})
	if a := dw.call(t, "POST", "/v1/keys", string(kb)); a.status != 200 {
		t.Fatalf("add key: HTTP %d %s", a.status, a.body)
	}
	return dir, dw, payments
}

// TestNoIntentPublishedBeforeDurable holds the committer inside the journal
// append of the frame that opens an intent and claims from there: the
// intent must be neither claimable nor handed to the dispatcher until the
// append has returned, and must be claimable once the event's answer (which
// waits for durability) has come.
func TestNoIntentPublishedBeforeDurable(t *testing.T) {
	_, dw, _ := newDurableWorld(t)

	var mu sync.Mutex
	var held []string   // intents in the append the hooks saw
	var checks []string // what each hook saw, for the failure message
	var problems []string
	whereText := map[string]string{
		"before": "before its journal append reached the store",
		"inside": "after the store took its journal append, before the append returned",
	}
	look := func(where string, recs []journal.Record) {
		mu.Lock()
		defer mu.Unlock()
		hs, err := intentsIn(recs)
		if err == nil && len(hs) == 0 {
			return
		}
		claimed, cerr := dw.tryClaim()
		if err = errors.Join(err, cerr); err != nil {
			problems = append(problems, err.Error())
			return
		}
		if where == "before" {
			held = append(held, hs...)
		}
		handed := dw.dispatched()
		checks = append(checks, fmt.Sprintf("%s append of %v: claimed %v, dispatcher %v", where, hs, claimed, handed))
		for _, h := range hs {
			if slices.Contains(claimed, h) {
				problems = append(problems, fmt.Sprintf("intent %s was claimed %s", h, whereText[where]))
			}
			if slices.Contains(handed, h) {
				problems = append(problems, fmt.Sprintf("intent %s was handed to the dispatcher %s", h, whereText[where]))
			}
		}
	}
	dw.log.BeforeAppend = func(recs []journal.Record) { look("before", recs) }
	dw.log.AfterAppend = func(recs []journal.Record, err error) {
		if err == nil {
			look("inside", recs)
		}
	}

	for _, id := range []string{"j1", "j2"} {
		if a := dw.call(t, "POST", "/v1/events", fmt.Sprintf(`{"schema":"t/Start@1","value":{"id":%q}}`, id)); a.status != 200 {
			t.Fatalf("start %s: HTTP %d %s", id, a.status, a.body)
		}
		mu.Lock()
		if len(problems) > 0 {
			t.Fatalf("published before durable:\n%s\n(what the hooks saw: %s)", strings.Join(problems, "\n"), strings.Join(checks, "; "))
		}
		if len(held) == 0 {
			t.Fatalf("no journal append held start %s's intent", id)
		}
		want := held[len(held)-1:]
		mu.Unlock()
		// Answered: the frame is durable, so the intent is published.
		got := dw.claim(t)
		if !slices.Equal(got, want) {
			t.Fatalf("after start %s was answered, the claim got %v; want the intent its append held, %v", id, got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(held) != 2 || len(checks) != 4 || len(problems) > 0 {
		t.Fatalf("the hooks saw %d intents in %d looks, want 2 in 4: %v; problems: %v", len(held), len(checks), checks, problems)
	}
}

// TestPowerLossPublishesNothingLost simulates a power loss: the append of
// the frame that opens an intent never reaches the store (the machine dies
// before the write is synced: the append fails and the records are
// discarded), while an executor claims from inside it. The world is then
// reopened from what the store holds. No intent an executor was handed may
// be missing from the reopened journal, and every receipt the executor
// posts for what it was handed must be accepted: an intent published
// early would be one the journal lacks, and its receipt refused as unknown.
func TestPowerLossPublishesNothingLost(t *testing.T) {
	dir, dw, payments := newDurableWorld(t)

	// Durable before the power loss: j1's intent, claimed and left open.
	if a := dw.call(t, "POST", "/v1/events", `{"schema":"t/Start@1","value":{"id":"j1"}}`); a.status != 200 {
		t.Fatalf("start j1: HTTP %d %s", a.status, a.body)
	}
	handedOut := dw.claim(t)
	if len(handedOut) != 1 {
		t.Fatalf("claim after j1: %v, want its intent", handedOut)
	}

	// j2's frame is lost: while its append is in the store, the executor
	// claims; then the append fails as the power goes.
	var lost atomic.Pointer[[]string]
	var claimedInside []string
	var hookErr error
	dw.log.BeforeAppend = func(recs []journal.Record) {
		hs, err := intentsIn(recs)
		if err != nil {
			hookErr = err
		}
		if err != nil || len(hs) == 0 || lost.Load() != nil {
			return
		}
		claimedInside, hookErr = dw.tryClaim()
		dw.faults.Arm(storefault.Ops(storefault.JournalAppend), 1) // this very append: its records never reach the store
		lost.Store(&hs)
	}
	a := dw.call(t, "POST", "/v1/events", `{"schema":"t/Start@1","value":{"id":"j2"}}`)
	if a.status == 200 {
		t.Fatalf("start j2 was acknowledged although its append failed: %s", a.body)
	}
	if lost.Load() == nil || hookErr != nil {
		t.Fatalf("no append held j2's intent (%v; start j2 answered HTTP %d %s)", hookErr, a.status, a.body)
	}
	handedOut = append(handedOut, claimedInside...)
	// Not handed to the dispatcher either, whose built-in executors would
	// perform it (a sys/http.request@1 sent for an intent that never was).
	for _, h := range *lost.Load() {
		if slices.Contains(dw.dispatched(), h) {
			t.Errorf("intent %s, whose append failed, was handed to the dispatcher", h)
		}
	}
	dw.close()

	// Power back: reopen from the store.
	dw = openDurableWorld(t, dir)
	inJournal := map[string]bool{}
	err := dw.log.Read(1, func(r journal.Record) (bool, error) {
		hs, err := intentsIn([]journal.Record{r})
		for _, h := range hs {
			inJournal[h] = true
		}
		return true, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range *lost.Load() {
		if inJournal[h] {
			t.Fatalf("intent %s of the failed append is in the reopened journal: the power loss lost nothing", h)
		}
	}
	for _, h := range handedOut {
		if !inJournal[h] {
			t.Errorf("an executor was handed intent %s, which the journal lacks after the power loss", h)
			continue
		}
		hash, err := schemas.ParseHash(h)
		if err != nil {
			t.Fatal(err)
		}
		if a := dw.call(t, "POST", "/v1/receipts", signedReceipt(t, dw.w.Identity(), payments, "payments", workFx, hash, map[string]any{"ok": true})); a.status != 200 {
			t.Errorf("the receipt for intent %s, handed out before the power loss, answered HTTP %d %s", h, a.status, a.body)
		}
	}
	if t.Failed() {
		return
	}
	// The world goes on: j2 again opens an intent, claimable once durable.
	if a := dw.call(t, "POST", "/v1/events", `{"schema":"t/Start@1","value":{"id":"j2"}}`); a.status != 200 {
		t.Fatalf("start j2 after the power loss: HTTP %d %s", a.status, a.body)
	}
	if got := dw.claim(t); len(got) != 1 || inJournal[got[0]] {
		t.Fatalf("claim after j2 restarted: %v, want one new intent", got)
	}
	if errors.Is(dw.w.Usable(), kernel.ErrBroken) {
		t.Fatal("the reopened world is broken")
	}
}
