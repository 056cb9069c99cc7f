package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/kernel"
)

const cancelEv = "com.example/OrderCancel@1"

// post sends body to POST /v1/events with the Idempotency-Key header set to
// each of keys (none: no header).
func (s *served) post(t *testing.T, body string, keys ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/v1/events", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func cancel(order string) string {
	return `{"schema":"` + cancelEv + `","value":{"order_id":"` + order + `"}}`
}

func cancelKeyed(order, key string) string {
	return `{"schema":"` + cancelEv + `","value":{"order_id":"` + order + `"},"idempotency_key":"` + key + `"}`
}

type sendAnswer struct {
	Seq        uint64   `json:"seq"`
	Duplicate  *bool    `json:"duplicate"`
	Seqs       []uint64 `json:"seqs"`
	Duplicates []bool   `json:"duplicates"`
	Error      *struct {
		Code, Message, Where string
	} `json:"error"`
}

func answer(t *testing.T, body string) sendAnswer {
	t.Helper()
	var a sendAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return a
}

// TestEventsIdempotencyHTTP: POST /v1/events takes an idempotency key in the
// body or (single event) the Idempotency-Key header; a resend answers the
// original seq with "duplicate": true and journals nothing; a conflict is a
// 409 naming the key and the original seq; bad keys are 400s; nothing
// refused is journaled.
func TestEventsIdempotencyHTTP(t *testing.T) {
	s := serveWorld(t, false)

	code, body := s.post(t, cancel("o1"))
	if a := answer(t, body); code != 200 || a.Seq == 0 || a.Duplicate == nil || *a.Duplicate {
		t.Fatalf("no key: %d %s", code, body)
	}

	code, body = s.post(t, cancelKeyed("o1", "key-1"))
	orig := answer(t, body)
	if code != 200 || orig.Duplicate == nil || *orig.Duplicate {
		t.Fatalf("first keyed send: %d %s", code, body)
	}
	height := s.height(t)
	for name, c := range map[string]struct {
		body string
		keys []string
	}{
		"body again":       {cancelKeyed("o1", "key-1"), nil},
		"header":           {cancel("o1"), []string{"key-1"}},
		"header and body":  {cancelKeyed("o1", "key-1"), []string{"key-1"}},
		"value re-spelled": {`{"value":{ "order_id" : "o1" },"idempotency_key":"key-1","schema":"` + cancelEv + `"}`, nil},
	} {
		code, body := s.post(t, c.body, c.keys...)
		a := answer(t, body)
		if code != 200 || a.Seq != orig.Seq || a.Duplicate == nil || !*a.Duplicate {
			t.Errorf("%s: %d %s, want seq %d duplicate", name, code, body, orig.Seq)
		}
	}
	if h := s.height(t); h != height {
		t.Fatalf("resends journaled: height %d -> %d", height, h)
	}

	// Refusals: a 409 for a conflict, 400s for keys that cannot be used.
	for name, c := range map[string]struct {
		body   string
		keys   []string
		status int
		code   string
		says   []string
	}{
		"conflict":            {cancelKeyed("o2", "key-1"), nil, 409, "idempotency_conflict", []string{`"key-1"`, "seq " + itoa(orig.Seq)}},
		"conflict by header":  {cancel("o2"), []string{"key-1"}, 409, "idempotency_conflict", []string{`"key-1"`}},
		"header differs":      {cancelKeyed("o1", "key-1"), []string{"key-2"}, 400, "invalid_input", []string{"key-2", "key-1", "differ"}},
		"two headers":         {cancel("o1"), []string{"a", "b"}, 400, "invalid_input", []string{"2 Idempotency-Key headers"}},
		"empty header":        {cancel("o1"), []string{""}, 400, "invalid_input", []string{"header is empty"}},
		"empty field":         {cancelKeyed("o1", ""), nil, 400, "invalid_input", []string{"idempotency_key is empty"}},
		"header on a batch":   {"[" + cancel("o1") + "]", []string{"key-1"}, 400, "invalid_input", []string{"single event"}},
		"bad key":             {cancelKeyed("o1", "has space"), nil, 400, "invalid_input", []string{"idempotency key", "0x20"}},
		"too long":            {cancel("o1"), []string{strings.Repeat("k", 257)}, 400, "invalid_input", []string{"257 bytes"}},
		"batch conflict":      {"[" + cancelKeyed("o3", "key-3") + "," + cancelKeyed("o4", "key-3") + "]", nil, 409, "idempotency_conflict", []string{"event 1", "event 0"}},
		"batch late conflict": {"[" + cancelKeyed("o3", "key-4") + "," + cancelKeyed("o2", "key-1") + "]", nil, 409, "idempotency_conflict", []string{"event 1", `"key-1"`}},
	} {
		code, body := s.post(t, c.body, c.keys...)
		a := answer(t, body)
		if code != c.status || a.Error == nil || a.Error.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, code, body, c.status, c.code)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(a.Error.Message, w) {
				t.Errorf("%s: message %q does not say %q", name, a.Error.Message, w)
			}
		}
	}
	// An empty key is refused where it first stands, and only once the body
	// was read whole and the header judged.
	for name, c := range map[string]struct {
		body  string
		keys  []string
		where string
	}{
		"first empty key of a batch": {"[" + cancelKeyed("o1", "k") + "," + cancelKeyed("o1", "") + "," + cancelKeyed("o2", "") + "]", nil, "events[1].idempotency_key"},
		"empty key, then bad JSON":   {"[" + cancelKeyed("o1", "") + ",{]", nil, "request body"},
		"empty key and a header":     {cancelKeyed("o1", ""), []string{"h"}, "idempotency_key"},
		"empty key, batch, header":   {"[" + cancelKeyed("o1", "") + "]", []string{"h"}, "Idempotency-Key header"},
		"empty key, two headers":     {cancelKeyed("o1", ""), []string{"h", "i"}, "Idempotency-Key header"},
	} {
		code, body := s.post(t, c.body, c.keys...)
		if a := answer(t, body); code != 400 || a.Error == nil || a.Error.Where != c.where {
			t.Errorf("%s: %d %s, want 400 at %s", name, code, body, c.where)
		}
	}
	if h := s.height(t); h != height {
		t.Fatalf("refusals journaled: height %d -> %d", height, h)
	}

	// A batch: per-event duplicate flags, a key twice journaled once.
	code, body = s.post(t, "["+cancelKeyed("o5", "key-5")+","+cancel("o5")+","+cancelKeyed("o5", "key-5")+","+cancelKeyed("o1", "key-1")+"]")
	a := answer(t, body)
	if code != 200 || len(a.Seqs) != 4 || len(a.Duplicates) != 4 {
		t.Fatalf("batch: %d %s", code, body)
	}
	if a.Duplicates[0] || a.Duplicates[1] || !a.Duplicates[2] || !a.Duplicates[3] ||
		a.Seqs[2] != a.Seqs[0] || a.Seqs[3] != orig.Seq || a.Seqs[1] <= a.Seqs[0] {
		t.Fatalf("batch: %s", body)
	}
}

// TestClientSendIdempotency: the Go client carries the key and reports
// duplicates as the HTTP API does.
func TestClientSendIdempotency(t *testing.T) {
	s := serveWorld(t, false)
	c := &api.Client{Base: s.url, Token: s.token}
	ctx := context.Background()
	ev := api.Event{Schema: cancelEv, Value: json.RawMessage(`{"order_id":"o1"}`), IdempotencyKey: "c-1"}
	first, err := c.Send(ctx, []api.Event{ev})
	if err != nil || len(first) != 1 || first[0].Duplicate {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := c.Send(ctx, []api.Event{ev, ev})
	dup := kernel.Ingested{Seq: first[0].Seq, Duplicate: true}
	if err != nil || len(again) != 2 || !reflect.DeepEqual(again[0], dup) || !reflect.DeepEqual(again[1], dup) {
		t.Fatalf("resend: %+v %v, want seq %d twice as duplicates", again, err, first[0].Seq)
	}
	ev.Value = json.RawMessage(`{"order_id":"o2"}`)
	_, err = c.Send(ctx, []api.Event{ev})
	var de *api.Error
	if !errors.As(err, &de) || de.Status != http.StatusConflict || de.Code != api.CodeIdempotencyConflict {
		t.Fatalf("conflict through the client: %v", err)
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestEventsMissingParts: an event without a schema or a value is refused by
// the kernel's one check (kernel.InputError) and answered at its place in
// the request, before any other event of the batch is validated; the answer
// bodies are pinned byte for byte.
func TestEventsMissingParts(t *testing.T) {
	s := serveWorld(t, false)
	height := s.height(t)
	for name, c := range map[string]struct{ body, want string }{
		"no schema": {`{"value":{"order_id":"o1"}}`,
			`{"error":{"code":"invalid_input","message":"event has no schema","where":"event "}}`},
		"no value": {`{"schema":"` + cancelEv + `"}`,
			`{"error":{"code":"invalid_input","message":"event ` + cancelEv + ` has no value","where":"event ` + cancelEv + `"}}`},
		"batch, second has no value": {"[" + cancel("o1") + `,{"schema":"` + cancelEv + `"}]`,
			`{"error":{"code":"invalid_input","message":"event ` + cancelEv + ` has no value","where":"events[1] ` + cancelEv + `"}}`},
		"batch, missing before invalid": {`[{"schema":"` + cancelEv + `","value":{"nope":1}},{"value":1}]`,
			`{"error":{"code":"invalid_input","message":"event has no schema","where":"events[1] "}}`},
	} {
		code, body := s.post(t, c.body)
		if code != http.StatusBadRequest || body != c.want {
			t.Errorf("%s: %d %s\nwant 400 %s", name, code, body, c.want)
		}
	}
	if h := s.height(t); h != height {
		t.Fatalf("refusals journaled: height %d -> %d", height, h)
	}
}
