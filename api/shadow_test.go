package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/schemas"
)

// TestShadowRoute: POST /v1/shadow runs the fixed tally against a copy of
// a world whose buggy tally failed a cell: re-fed, the window's events
// fail nothing and create both cells; given events run at the live height;
// the Client answers what the route does; a request with events and a
// window, or a malformed body, is a 400. The live world keeps its height
// and its failed instance.
func TestShadowRoute(t *testing.T) {
	s, _ := tallyWorld(t)
	ctx := context.Background()
	for _, ev := range []string{`{"key":"a","by":1}`, `{"key":"a","by":13}`, `{"key":"b","by":5}`} {
		if code, body := s.do(t, "POST", "/v1/events", `{"schema":"t/Add@1","value":`+ev+`}`); code != 200 {
			t.Fatalf("send %s: %d %s", ev, code, body)
		}
	}
	height := s.height(t)
	files := []api.File{{Name: "manifest.json", Content: []byte(fmt.Sprintf(tallyManifest, "t/tally_fixed", "t/tally_fixed@1"))}}
	reqBody := func(r api.ShadowRequest) string {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	code, body := s.do(t, "POST", "/v1/shadow", reqBody(api.ShadowRequest{Files: files}))
	if code != 200 {
		t.Fatalf("POST /v1/shadow: %d %s", code, body)
	}
	var out api.ShadowOutput
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	in := out.Inputs
	if out.Height != height || out.Start != 2 || out.Apply == nil || !out.Apply.Applied || in.Source != "window" || in.Events != 3 || in.Submitted != 3 {
		t.Fatalf("report: %s", body)
	}
	if out.Instances.Counts.Failed != 0 || out.Instances.NotCompletedTotal != 0 || out.Effects.Total != 0 || len(out.Allowlist) != 0 {
		t.Fatalf("instances, effects or allowlist: %s", body)
	}
	n14 := schemas.HashBytes(schemas.MustMarshal(map[string]any{"n": uint64(14)}))
	if len(out.Deltas) != 1 || out.Deltas[0].Created != 2 || len(out.Deltas[0].Keys) != 2 ||
		string(out.Deltas[0].Keys[0].Key) != `"a"` || out.Deltas[0].Keys[0].Before != nil || *out.Deltas[0].Keys[0].After != n14 {
		t.Fatalf("deltas: %s", body)
	}
	if !strings.Contains(body, `"not_replayed":{}`) || !strings.Contains(body, `"by_effect":{}`) {
		t.Fatalf("empty maps are not shown as {}: %s", body)
	}

	c := &api.Client{Base: s.url, Token: s.token}
	got, err := c.Shadow(ctx, api.ShadowRequest{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	if string(gb)+"\n" != body {
		t.Fatalf("client answer differs from the route's:\n%s\n%s", gb, body)
	}

	ev := api.Event{Schema: "t/Add@1", Value: json.RawMessage(`{"key":"c","by":13}`)}
	code, body = s.do(t, "POST", "/v1/shadow", reqBody(api.ShadowRequest{Files: files, Events: []api.Event{ev}}))
	if err := json.Unmarshal([]byte(body), &out); err != nil || code != 200 {
		t.Fatalf("shadow with events: %d %s", code, body)
	}
	if out.Start != height || out.Inputs.Source != "events" || out.Inputs.Submitted != 1 ||
		len(out.Deltas) != 1 || out.Deltas[0].Created != 1 || string(out.Deltas[0].Keys[0].Key) != `"c"` {
		t.Fatalf("shadow with events: %s", body)
	}

	for _, tc := range []struct{ body, where string }{
		{reqBody(api.ShadowRequest{Files: files, Window: 2, Events: []api.Event{ev}}), "window"},
		{reqBody(api.ShadowRequest{Files: files, Window: -1}), "window"},
		{strings.Replace(reqBody(api.ShadowRequest{Files: files}), `"files"`, `"events":[{"schema":"t/Add@1"}],"files"`, 1), "events[0]"},
		{`{"files": [], "nope": 1}`, "request body"},
		{reqBody(api.ShadowRequest{}), "apply"},
	} {
		code, body := s.do(t, "POST", "/v1/shadow", tc.body)
		if code != 400 || !strings.Contains(body, `"code":"invalid_input"`) || !strings.Contains(body, `"where":"`+tc.where+`"`) {
			t.Errorf("POST /v1/shadow %s: %d %s, want 400 invalid_input at %s", tc.body, code, body, tc.where)
		}
	}

	st, err := s.w.Status(ctx)
	if err != nil || st.JournalHeight != height || st.Instances.Failed != 1 {
		t.Fatalf("live world after the shadows: %+v %v", st, err)
	}
}

// TestParseEvents: events files are a JSON array or one object per line;
// unknown fields, missing parts and bad JSON are refused with the event's
// place.
func TestParseEvents(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		n          int
		err        string
	}{
		{"array", `[{"schema":"a/B@1","value":{"x":1}}, {"schema":"a/B@1","value":2,"idempotency_key":"k"}]`, 2, ""},
		{"lines", "{\"schema\":\"a/B@1\",\"value\":1}\n\n{\"schema\":\"a/B@1\",\"value\":[1]}\n", 2, ""},
		{"empty", "  \n", 0, ""},
		{"unknown field", `{"schema":"a/B@1","value":1,"extra":2}`, 0, "event 0"},
		{"no value", `[{"schema":"a/B@1"}]`, 0, "event 0 (a/B@1) has no value"},
		{"no schema", "{\"schema\":\"a/B@1\",\"value\":1}\n{\"value\":1}", 0, "event 1 has no schema"},
		{"empty key", `{"schema":"a/B@1","value":1,"idempotency_key":""}`, 0, "idempotency_key is empty"},
		{"bad json", "{\"schema\":\"a/B@1\",\"value\":1}\n{\"schema\":", 0, "event 1: schema: json: at byte 39: unexpected end of input"},
		{"after array", `[] {}`, 0, "data after the array of events: trailing data after the JSON value (at byte 3)"},
		{"stray bracket after array", `[{"schema":"a/B@1","value":1}]]`, 0, "data after the array of events: trailing data after the JSON value (at byte 30)"},
		{"key in another case", `[{"schema":"a/B@1","Value":1}]`, 0, `event 0: json: at byte 19: unknown field "Value"`},
		{"key twice", "{\"schema\":\"a/B@1\",\"value\":1}\n{\"schema\":\"a/B@1\",\"value\":1,\"value\":2}", 0, `event 1: json: at byte 57: duplicate object key "value"`},
		{"lone surrogate", `[{"schema":"a/B@1","value":{"k":"\udc00"}}]`, 0, `event 0: value: json: at byte 33: lone UTF-16 surrogate \udc00`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := api.ParseEvents("evs.json", []byte(tc.data))
			if tc.err == "" {
				if err != nil || len(evs) != tc.n {
					t.Fatalf("%d events, %v; want %d", len(evs), err, tc.n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "evs.json") {
				t.Fatalf("error %v, want one naming evs.json and %q", err, tc.err)
			}
		})
	}
	evs, err := api.ParseEvents("x", []byte(`[{"schema":"a/B@1","value":2,"idempotency_key":"k"}]`))
	if err != nil || evs[0].IdempotencyKey != "k" || string(evs[0].Value) != "2" {
		t.Fatalf("%+v %v", evs, err)
	}
}
