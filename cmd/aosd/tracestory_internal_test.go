package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// TestTraceStoryLines pins the text of a cell's story: the input a step
// took and its state diff, an HTTP intent's method, URL and issuer ref,
// each attempt (the one re-sent after a restart counted as attempt 2),
// the status in the receipt, a timer's due time, a cancel and a move.
func TestTraceStoryLines(t *testing.T) {
	h1 := schemas.HashBytes([]byte("charge"))
	h2 := schemas.HashBytes([]byte("timer"))
	m1, m2 := schemas.HashBytes([]byte("m1")), schemas.HashBytes([]byte("m2"))
	st := schemas.HashBytes([]byte("state"))
	entry := func(e views.TraceEntry) traceLine {
		return traceLine{TimelineEntry: views.TimelineEntry{TraceEntry: e}}
	}
	step := func(seq, input uint64, diff string, intents ...schemas.Hash) traceLine {
		l := entry(views.TraceEntry{Seq: seq, Kind: journal.KindStep, Input: input, StateHash: &st, Intents: intents})
		l.Diff = json.RawMessage(diff)
		return l
	}
	charge := entry(views.TraceEntry{Seq: 3, Kind: journal.KindIntent, Effect: "sys/http.request@2", Intents: []schemas.Hash{h1}, Input: 2,
		Value: json.RawMessage(`{"method":"POST","url":"https://pay.example/charges","retry":{"max_attempts":4}}`)})
	charge.issuerRef = "charge"
	lines := []traceLine{
		entry(views.TraceEntry{Seq: 1, Kind: journal.KindEvent, Schema: "com.acme/Order@1", Value: json.RawMessage(`{"key":"o-1","amount":1250}`)}),
		step(2, 1, `[{"op":"add","path":"","value":{"stage":"charging","amount":1250}}]`, h1),
		charge,
		entry(views.TraceEntry{Seq: 4, Kind: journal.KindFrame, Intents: []schemas.Hash{h1}, Executor: "aos/builtin", FrameSeq: 1, Value: json.RawMessage(`{"attempt":1}`)}),
		entry(views.TraceEntry{Seq: 5, Kind: journal.KindFrame, Intents: []schemas.Hash{h1}, Executor: "aos/builtin", FrameSeq: 2, Value: json.RawMessage(`{"attempt":2,"resumed":true}`)}),
		entry(views.TraceEntry{Seq: 6, Kind: journal.KindFrame, Intents: []schemas.Hash{h1}, Executor: "aos/builtin", FrameSeq: 3,
			Value: json.RawMessage(`{"attempt":3,"last_error":"status 503","waited_ms":200}`)}),
		entry(views.TraceEntry{Seq: 7, Kind: journal.KindReceipt, Effect: "sys/http.request@2", Intents: []schemas.Hash{h1}, Status: "ok", Executor: "aos/builtin",
			Attempt: 3, Value: json.RawMessage(`{"status":201,"headers":{},"body":"e30=","attempts":3}`)}),
		step(8, 7, `[{"op":"replace","path":"/stage","value":"paid"},{"op":"add","path":"/charge_id","value":"ch_1"},{"op":"remove","path":"/amount"}]`, h2),
		entry(views.TraceEntry{Seq: 9, Kind: journal.KindIntent, Effect: "sys/timer.set@1", Intents: []schemas.Hash{h2}, Input: 8,
			Value: json.RawMessage(`{"deliver_at_ns":1795850120531457415}`)}),
		entry(views.TraceEntry{Seq: 10, Kind: journal.KindCancel, Effect: "sys/timer.set@1", Intents: []schemas.Hash{h2}, By: "ops", Reason: "customer asked"}),
		step(11, 10, `[]`),
		{TimelineEntry: views.TimelineEntry{TraceEntry: views.TraceEntry{Seq: 12, Kind: kindMove}},
			move: &views.MoveBody{From: m1, To: m2, Inputs: []uint64{1, 7, 10}, Since: "creation", StateHash: &st}},
		entry(views.TraceEntry{Seq: 13, Kind: journal.KindReceipt, Effect: "sys/http.request@2", Intents: []schemas.Hash{h1}, Status: "error", Executor: "aos/builtin",
			Attempt: 2, Value: json.RawMessage(`{"attempts":2,"error":"POST https://pay.example/charges: connection refused"}`)}),
	}
	s := newTraceStory(lines)
	var got []string
	for _, l := range lines {
		got = append(got, strings.Join(s.detail(l), "\n"))
	}
	want := []string{
		`com.acme/Order@1 {"key":"o-1","amount":1250}`,
		"event 1 (com.acme/Order@1) -> state " + st.String() + ", 1 intent(s)\n  + /amount 1250\n  + /stage \"charging\"",
		`sys/http.request@2 POST https://pay.example/charges (ref "charge"): ` + h1.String() + ", opened by step 2",
		`sys/http.request@2 (ref "charge") attempt 1 sent`,
		`sys/http.request@2 (ref "charge") attempt 2 sent (again after a restart: attempt 1 may have reached the server)`,
		`sys/http.request@2 (ref "charge") attempt 3 sent after 200 ms (attempt 2: status 503)`,
		`sys/http.request@2 ok: HTTP 201, attempt 3 from aos/builtin (ref "charge") for ` + h1.String(),
		"receipt 7 (sys/http.request@2 ok (ref \"charge\")) -> state " + st.String() + ", 1 intent(s)\n  ~ /stage \"paid\"\n  + /charge_id \"ch_1\"\n  - /amount",
		"sys/timer.set@1 due 2026-11-28 07:15:20.531Z: " + h2.String() + ", opened by step 8",
		"sys/timer.set@1 " + h2.String() + " cancelled by ops: customer asked; no receipt will come, the workflow gets sys/EffectCancelled@1",
		"cancel 10 (sys/timer.set@1) -> state " + st.String() + "\n  state unchanged",
		"moved from manifest " + m1.String() + " to " + m2.String() + " after replaying 3 input(s) since creation, state " + st.String(),
		`sys/http.request@2 error: POST https://pay.example/charges: connection refused, attempt 2 from aos/builtin (ref "charge") for ` + h1.String(),
	}
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, at(got, i), at(want, i))
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
