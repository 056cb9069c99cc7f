package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

const (
	orderWF    = "com.example/order.step@1"
	orderState = "com.example/OrderState@1"
	chargeFx   = "com.example/payment.charge@1"
)

type timelineBody struct {
	Entries []views.TimelineEntry `json:"entries"`
	Next    *uint64               `json:"next"`
}

func (s *served) timeline(t *testing.T, key, query string) timelineBody {
	t.Helper()
	path := "/v1/timeline/" + url.PathEscape(orderWF) + "/" + url.PathEscape(key)
	if query != "" {
		path += "?" + query
	}
	code, body := s.do(t, "GET", path, "")
	var tb timelineBody
	if code != 200 || json.Unmarshal([]byte(body), &tb) != nil {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return tb
}

// payments trusts a new executor key for the charge effect.
func (s *served) payments(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	pay, _ := receipts.GenerateKey()
	body, _ := json.Marshal(api.AddKeyRequest{Name: "payments", PublicKey: pubPEM(t, pay.Public().(ed25519.PublicKey)), Effects: []string{chargeFx}})
	if code, b := s.do(t, "POST", "/v1/keys", string(body)); code != 200 {
		t.Fatalf("add key: %d %s", code, b)
	}
	return pay
}

// order creates order key.
func (s *served) order(t *testing.T, key string) { s.orderFor(t, key, "c") }

// orderFor creates order key for customer.
func (s *served) orderFor(t *testing.T, key, customer string) {
	t.Helper()
	if code, b := s.do(t, "POST", "/v1/events", fmt.Sprintf(`{"schema":"com.example/OrderCreated@1","value":{"order_id":%q,"amount_cents":250,"customer":%q}}`, key, customer)); code != 200 {
		t.Fatalf("create %s: %d %s", key, code, b)
	}
}

// pay sends the charge intent of order key a frame and a receipt.
func (s *served) pay(t *testing.T, pay ed25519.PrivateKey, key string) {
	t.Helper()
	intent := s.chargeIntent(t, key)
	if code, b := s.do(t, "POST", "/v1/frames", signedFrame(t, s.w.Identity(), pay, "payments", chargeFx, intent, 1)); code != 200 {
		t.Fatalf("frame: %d %s", code, b)
	}
	r := signedReceipt(t, s.w.Identity(), pay, "payments", chargeFx, intent, map[string]any{"charge_id": "ch_" + key, "status": "succeeded"})
	if code, b := s.do(t, "POST", "/v1/receipts", r); code != 200 {
		t.Fatalf("receipt: %d %s", code, b)
	}
}

func (s *served) chargeIntent(t *testing.T, key string) schemas.Hash {
	t.Helper()
	code, body := s.do(t, "GET", "/v1/trace/"+url.PathEscape(orderWF)+"/"+key, "")
	var tr []views.TraceEntry
	if code != 200 || json.Unmarshal([]byte(body), &tr) != nil {
		t.Fatalf("trace %s: %d %s", key, code, body)
	}
	for _, e := range tr {
		if e.Kind == journal.KindIntent && e.Effect == chargeFx {
			return e.Intents[0]
		}
	}
	t.Fatalf("order %s opened no charge: %s", key, body)
	return schemas.Hash{}
}

// steps are the step entries of a timeline.
func stepEntries(es []views.TimelineEntry) []views.TimelineEntry {
	var out []views.TimelineEntry
	for _, e := range es {
		if e.Kind == journal.KindStep {
			out = append(out, e)
		}
	}
	return out
}

// checkStateHash: the JSON state of a step is its state_hash's state.
func (s *served) checkStateHash(t *testing.T, e views.TimelineEntry) {
	t.Helper()
	b, err := s.w.Manifest().Registry.FromJSON(orderState, e.State)
	if err != nil {
		t.Fatalf("step %d: state %s: %v", e.Seq, e.State, err)
	}
	if e.StateHash == nil || schemas.HashBytes(b) != *e.StateHash {
		t.Fatalf("step %d: state %s hashes to %s, the step says %v", e.Seq, e.State, schemas.HashBytes(b), e.StateHash)
	}
}

// TestTimelineOrders: an order's timeline holds its event, steps, intents,
// frame (with its frame_seq) and receipt in journal order; each step has
// its state (the live one for the state the cell holds now, recomputed for
// the one no store kept) and the JSON Patch from the state before; and
// paging through it with any page size gives the same entries, the receipt
// included when its intent was on an earlier page, and another order's
// not, though its intents hold o1's key bytes (its customer is "o1").
func TestTimelineOrders(t *testing.T) {
	s := serveWorld(t, true)
	pay := s.payments(t)
	s.order(t, "o1")
	s.orderFor(t, "o2", "o1")
	s.pay(t, pay, "o1")
	s.pay(t, pay, "o2")

	tl := s.timeline(t, "o1", "")
	var kinds []journal.Kind
	for _, e := range tl.Entries {
		kinds = append(kinds, e.Kind)
	}
	want := []journal.Kind{journal.KindEvent, journal.KindStep, journal.KindIntent, journal.KindIntent,
		journal.KindFrame, journal.KindReceipt, journal.KindStep}
	if !reflect.DeepEqual(kinds, want) || tl.Next != nil {
		t.Fatalf("kinds %v, next %v; want %v and no next", kinds, tl.Next, want)
	}
	if f := tl.Entries[4]; f.FrameSeq != 1 || f.Attempt != 0 {
		t.Errorf("frame entry: frame_seq %d, attempt %d; want 1, 0", f.FrameSeq, f.Attempt)
	}
	st := stepEntries(tl.Entries)
	created, paid := st[0], st[1]
	if created.StateSource != views.StateRecomputed || paid.StateSource != views.StateFromLive {
		t.Errorf("state sources %q, %q; want recomputed, live", created.StateSource, paid.StateSource)
	}
	for _, e := range st {
		s.checkStateHash(t, e)
	}
	var patch []map[string]any
	if err := json.Unmarshal(created.Diff, &patch); err != nil || len(patch) != 1 || patch[0]["op"] != "add" || patch[0]["path"] != "" {
		t.Errorf("diff of the first step (from no state): %s", created.Diff)
	}
	wantPaid := `[{"op":"replace","path":"/status","value":"paid"},{"op":"add","path":"/charge_id","value":"ch_o1"}]`
	if !sameJSONSet(t, paid.Diff, wantPaid) {
		t.Errorf("diff of the paying step %s; want %s", paid.Diff, wantPaid)
	}

	for limit := 1; limit <= len(tl.Entries); limit++ {
		var all []views.TimelineEntry
		after := uint64(0)
		for pages := 0; ; pages++ {
			p := s.timeline(t, "o1", fmt.Sprintf("limit=%d&after=%d", limit, after))
			if len(p.Entries) > limit || pages > len(tl.Entries)+1 {
				t.Fatalf("limit %d: page of %d entries, page %d", limit, len(p.Entries), pages)
			}
			all = append(all, p.Entries...)
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
		if !reflect.DeepEqual(all, tl.Entries) {
			a, _ := json.Marshal(all)
			b, _ := json.Marshal(tl.Entries)
			t.Fatalf("limit %d: pages give\n%s\nwant\n%s", limit, a, b)
		}
	}
}

// sameJSONSet: two JSON arrays hold the same elements, in any order.
func sameJSONSet(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y []any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil || len(x) != len(y) {
		return false
	}
	for _, v := range x {
		found := false
		for _, w := range y {
			if reflect.DeepEqual(v, w) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestTimelineRecomputesCollectedStates: a state a snapshot kept is read
// from the CAS; once gc collected it (no kept snapshot reaches it), the
// timeline recomputes it by replay, equal to the original (its hash is the
// step's state_hash), and the diff is unchanged.
func TestTimelineRecomputesCollectedStates(t *testing.T) {
	s := serveWorld(t, true)
	ctx := context.Background()
	pay := s.payments(t)
	s.order(t, "o1")
	if _, err := s.w.Snapshot(ctx); err != nil { // keeps o1 awaiting payment
		t.Fatal(err)
	}
	s.pay(t, pay, "o1")
	s.order(t, "o2")
	before := s.timeline(t, "o1", "")
	if src := stepEntries(before.Entries)[0].StateSource; src != views.StateFromCAS {
		t.Fatalf("before gc, the snapshot's state comes from %q, want cas", src)
	}
	for range 2 {
		if _, err := s.w.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.w.GC(ctx, kernel.GCOptions{KeepSnapshots: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := stepEntries(before.Entries)[0]
	if _, err := s.w.CAS().Get(*first.StateHash); err == nil {
		t.Fatalf("gc (%+v) kept the state %s", res, first.StateHash)
	}
	after := s.timeline(t, "o1", "")
	got := stepEntries(after.Entries)[0]
	if got.StateSource != views.StateRecomputed {
		t.Fatalf("after gc: state source %q (%s), want recomputed", got.StateSource, got.StateReason)
	}
	s.checkStateHash(t, got)
	if string(got.State) != string(first.State) || string(got.Diff) != string(first.Diff) {
		t.Fatalf("recomputed state %s diff %s; the kept one was %s diff %s", got.State, got.Diff, first.State, first.Diff)
	}
}

// TestTimelineLongCell: a cell with 10,000 steps. Its first page holds the
// first entries with their states (recomputed: no store keeps them) and a
// next; a page deep in its history has every step's state too; how long
// each took is logged, not asserted (docs/API.md quotes it).
func TestTimelineLongCell(t *testing.T) {
	s := serveWorld(t, false)
	ctx := context.Background()
	s.order(t, "o1")
	const steps = 10_000
	var evs []kernel.Event
	for range steps - 1 {
		evs = append(evs, kernel.Event{Schema: "com.example/OrderCancel@1", JSON: json.RawMessage(`{"order_id":"o1"}`)})
	}
	for len(evs) > 0 {
		n := min(len(evs), 1000)
		if _, err := s.w.Submit(ctx, evs[:n]...); err != nil {
			t.Fatal(err)
		}
		evs = evs[n:]
	}
	check := func(name, query string) timelineBody {
		t0 := time.Now()
		p := s.timeline(t, "o1", query)
		t.Logf("%s (%s): %d entries in %v", name, query, len(p.Entries), time.Since(t0))
		if len(p.Entries) != views.DefaultTimelinePage || p.Next == nil || *p.Next != p.Entries[len(p.Entries)-1].Seq {
			t.Fatalf("%s: %d entries, next %v", name, len(p.Entries), p.Next)
		}
		for _, e := range stepEntries(p.Entries) {
			if e.StateSource != views.StateRecomputed && e.StateSource != views.StateFromLive {
				t.Fatalf("%s: step %d: state source %q (%s)", name, e.Seq, e.StateSource, e.StateReason)
			}
			if e.Diff == nil {
				t.Fatalf("%s: step %d has no diff", name, e.Seq)
			}
		}
		return p
	}
	check("first page, first call", "")
	first := check("first page", "")
	if first.Entries[0].Kind != journal.KindEvent || first.Entries[1].Kind != journal.KindStep {
		t.Fatalf("first page starts with %s, %s", first.Entries[0].Kind, first.Entries[1].Kind)
	}
	deep := check("page deep in the history", fmt.Sprintf("after=%d", s.height(t)-500))
	for _, e := range stepEntries(deep.Entries) {
		s.checkStateHash(t, e)
	}
}

// TestTimelineTimes: every entry of a timeline carries its logical time,
// the journaled ingress stamp: an event's and a receipt's their own, a step
// its input's, an intent its emitting step's input's, on every page size
// (the intents' steps on another page are read from the journal). An
// intent's life (GET /v1/intents) says the same time, and the intent's
// origin, params and idempotency key as the intent record holds them.
func TestTimelineTimes(t *testing.T) {
	s := serveWorld(t, true)
	pay := s.payments(t)
	s.order(t, "o1")
	s.pay(t, pay, "o1")
	for _, limit := range []int{1, 100} {
		var es []views.TimelineEntry
		after := uint64(0)
		for {
			p := s.timeline(t, "o1", fmt.Sprintf("limit=%d&after=%d", limit, after))
			es = append(es, p.Entries...)
			if p.Next == nil {
				break
			}
			after = *p.Next
		}
		at := map[uint64]uint64{}
		for _, e := range es {
			at[e.Seq] = e.NowNs
		}
		for _, e := range es {
			var want uint64
			switch e.Kind {
			case journal.KindEvent, journal.KindReceipt, journal.KindFrame:
				want = e.NowNs // its own stamp: checked non-zero below
			case journal.KindStep:
				want = at[e.Input]
			case journal.KindIntent:
				for _, st := range es {
					if st.Seq == e.Input {
						want = at[st.Input]
					}
				}
			}
			if e.NowNs == 0 || e.NowNs != want {
				t.Errorf("limit %d: %s at seq %d: now_ns %d, want %d (non-zero)", limit, e.Kind, e.Seq, e.NowNs, want)
			}
		}
	}
	intent := s.chargeIntent(t, "o1")
	code, body := s.do(t, "GET", "/v1/intents/"+intent.String(), "")
	var life []views.TraceEntry
	if code != 200 || json.Unmarshal([]byte(body), &life) != nil || len(life) == 0 || life[0].Kind != journal.KindIntent {
		t.Fatalf("intent %s: %d %s", intent, code, body)
	}
	it := life[0]
	tl := s.timeline(t, "o1", "")
	if it.NowNs == 0 || it.NowNs != tl.Entries[0].NowNs {
		t.Errorf("the intent's now_ns %d, want its order's event's %d", it.NowNs, tl.Entries[0].NowNs)
	}
	if it.OriginWorkflow != orderWF || string(it.OriginKey) != `"o1"` || len(it.IdempotencyKey) == 0 || !json.Valid(it.Value) {
		t.Errorf("the intent's identity: origin %s %s, idempotency key %q, params %s", it.OriginWorkflow, it.OriginKey, it.IdempotencyKey, it.Value)
	}
	t.Logf("intent entry: %s", body)
}
