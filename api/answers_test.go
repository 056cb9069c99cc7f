package api_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// The API's answers, provoked one by one: TestAPIAnswers sends, for every
// route, a request that should get each answer docs/API.md lists for it
// ("Answers" tables) and checks the status, the error code, the error
// body's shape, and whether the journal grew. TestAPIAnswersDocumented then
// holds the docs (API.md's tables and openapi.json's responses) to exactly
// the (route, status, code) triples provoked here.

// provoked collects the answers TestAPIAnswers provoked, for
// TestAPIAnswersDocumented; nil until TestAPIAnswers ran in this process.
var (
	provokedMu sync.Mutex
	provoked   map[api.AnswerKey]bool
)

// probe is one provoking request.
type probe struct {
	name     string
	route    string // the route it exercises, as the route table writes it
	method   string // "" : the route's
	path     string // the request path (escaped)
	body     string
	hdr      map[string]string
	base     string // "" : the server with executors
	status   int
	code     string // the error code; "" for a 2xx
	journals bool   // the journal grows (else it must not)
	says     string // the answer contains this ("" : anything)
}

// routes are the API's routes with a concrete path each, for the answers
// every route gives (401, 405).
var answerRoutes = map[string]string{
	"POST /v1/events":                    "/v1/events",
	"GET /v1/status":                     "/v1/status",
	"GET /v1/limits":                     "/v1/limits",
	"POST /v1/limits":                    "/v1/limits",
	"GET /v1/quiescent":                  "/v1/quiescent",
	"GET /v1/cells/{workflow}":           "/v1/cells/t%2Ftally@1",
	"GET /v1/cells/{workflow}/{key}":     "/v1/cells/t%2Ftally@1/a",
	"GET /v1/trace/{workflow}/{key}":     "/v1/trace/t%2Ftally@1/a",
	"GET /v1/timeline/{workflow}/{key}":  "/v1/timeline/t%2Ftally@1/a",
	"GET /v1/manifest":                   "/v1/manifest",
	"GET /v1/manifests":                  "/v1/manifests",
	"POST /v1/manifests/{hash}/retire":   "/v1/manifests/sha256:" + strings.Repeat("0", 64) + "/retire",
	"GET /v1/failed":                     "/v1/failed",
	"POST /v1/failed/{workflow}/recover": "/v1/failed/t%2Ftally@1/recover",
	"GET /v1/modules":                    "/v1/modules",
	"POST /v1/modules/{module}/resume":   "/v1/modules/t%2Fhostile_mod@1/resume",
	"GET /v1/journal":                    "/v1/journal",
	"GET /v1/journal/check":              "/v1/journal/check",
	"POST /v1/apply":                     "/v1/apply",
	"POST /v1/gc":                        "/v1/gc",
	"POST /v1/shadow":                    "/v1/shadow",
	"POST /v1/snapshot":                  "/v1/snapshot",
	"POST /v1/replay":                    "/v1/replay",
	"POST /v1/replay/manifest":           "/v1/replay/manifest",
	"POST /v1/upgrade":                   "/v1/upgrade",
	"GET /v1/intents/{hash}":             "/v1/intents/sha256:" + strings.Repeat("0", 64),
	"GET /v1/pending":                    "/v1/pending",
	"POST /v1/intents/{hash}/cancel":     "/v1/intents/sha256:" + strings.Repeat("0", 64) + "/cancel",
	"GET /v1/keys":                       "/v1/keys",
	"POST /v1/keys":                      "/v1/keys",
	"DELETE /v1/keys/{id}":               "/v1/keys/ed25519:" + strings.Repeat("0", 32),
	"POST /v1/effects/claim":             "/v1/effects/claim",
	"POST /v1/receipts":                  "/v1/receipts",
	"POST /v1/frames":                    "/v1/frames",
	"GET /metrics":                       "/metrics",
	"GET /v1/backup":                     "/v1/backup",
	"POST /v1/token/rotate":              "/v1/token/rotate",
}

// run sends p and checks its answer; it records what it provoked.
func (aw *answersWorld) run(t *testing.T, p probe) httpAnswer {
	t.Helper()
	method := p.method
	if method == "" {
		method = p.route[:strings.IndexByte(p.route, ' ')]
	}
	before := aw.height()
	a := aw.call(t, p.base, method, p.path, p.body, p.hdr)
	after := aw.height()
	what := fmt.Sprintf("%s (%s %s)", p.name, method, p.path)
	if a.status != p.status {
		t.Errorf("%s: status %d, want %d: %.600s", what, a.status, p.status, a.body)
		return a
	}
	if err := checkAnswerShape(a, p.code); err != nil {
		t.Errorf("%s: %v: %.600s", what, err, a.body)
	}
	if p.says != "" && !strings.Contains(a.body, p.says) {
		t.Errorf("%s: answer does not say %q: %.600s", what, p.says, a.body)
	}
	if grew := after > before; grew != p.journals {
		t.Errorf("%s: journal height %d -> %d, want it to grow: %v", what, before, after, p.journals)
	}
	provokedMu.Lock()
	provoked[api.AnswerKey{Route: p.route, Status: p.status, Code: p.code}] = true
	provokedMu.Unlock()
	return a
}

// checkAnswerShape: a refusal is {"error": {"code", "message", "where"?}}
// with code; a success is JSON (an NDJSON stream for the journal, text for
// metrics) without an error.
func checkAnswerShape(a httpAnswer, code string) error {
	ct := a.header.Get("Content-Type")
	if code == "" {
		switch {
		case strings.HasPrefix(ct, "application/x-ndjson"):
			for _, line := range strings.Split(strings.TrimSpace(a.body), "\n") {
				if line != "" && !json.Valid([]byte(line)) {
					return fmt.Errorf("journal line %q is not JSON", line)
				}
			}
			return nil
		case strings.HasPrefix(ct, "text/plain"):
			return nil
		case strings.HasPrefix(ct, "application/gzip"): // a backup: gzip's magic
			if !strings.HasPrefix(a.body, "\x1f\x8b") {
				return fmt.Errorf("a gzip answer that is not gzip")
			}
			return nil
		case !json.Valid([]byte(a.body)):
			return fmt.Errorf("answer is not JSON (Content-Type %q)", ct)
		}
		var eb struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal([]byte(a.body), &eb) == nil && eb.Error != nil {
			return fmt.Errorf("a success carries an error")
		}
		return nil
	}
	return checkErrorBody([]byte(a.body), ct, code)
}

// checkErrorBody: body is the API's error shape with code.
func checkErrorBody(body []byte, ct, code string) error {
	if !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("error answer has Content-Type %q", ct)
	}
	var eb struct {
		Error *struct {
			Code    *string `json:"code"`
			Message *string `json:"message"`
			Where   *string `json:"where"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil {
		return fmt.Errorf("error body: %v", err)
	}
	switch {
	case eb.Error == nil || eb.Error.Code == nil || eb.Error.Message == nil:
		return fmt.Errorf("no error.code and error.message")
	case *eb.Error.Code != code && code != "*":
		return fmt.Errorf("error code %q, want %q", *eb.Error.Code, code)
	case *eb.Error.Message == "":
		return fmt.Errorf("empty error message")
	}
	return nil
}

func TestAPIAnswers(t *testing.T) {
	provokedMu.Lock()
	provoked = map[api.AnswerKey]bool{}
	provokedMu.Unlock()
	aw := newAnswersWorld(t)
	ctx := context.Background()
	const tally = "/v1/cells/t%2Ftally@1"
	recoverTally := "/v1/failed/t%2Ftally@1/recover"
	recoverJob := "/v1/failed/t%2Fjob@1/recover"
	add := func(key string, by int) string {
		return fmt.Sprintf(`{"schema":"t/Add@1","value":{"key":%q,"by":%d}}`, key, by)
	}
	start := func(id string) string { return fmt.Sprintf(`{"schema":"t/Start@1","value":{"id":%q}}`, id) }
	files := func(manifest string) string {
		return `{"files":[{"name":"manifest.json","content":` + manifest + `}]}`
	}
	// Another manifest: the tally workflow under a second name, so applying
	// it changes the world.
	changed := strings.Replace(answersManifest, `"name":"t/answers"`, `"name":"t/answers2"`, 1)

	// 401 and 405 on every route.
	for _, route := range slices.Sorted(mapsKeys(answerRoutes)) {
		path := answerRoutes[route]
		for _, auth := range []string{"-", "Bearer wrong"} {
			a := aw.run(t, probe{name: "auth " + auth, route: route, path: path, hdr: map[string]string{"Authorization": auth},
				status: 401, code: "unauthorized"})
			if a.header.Get("WWW-Authenticate") != `Bearer realm="aos"` {
				t.Errorf("%s 401: WWW-Authenticate %q", route, a.header.Get("WWW-Authenticate"))
			}
		}
		a := aw.run(t, probe{name: "method", route: route, method: "PUT", path: path, status: 405, code: "method_not_allowed"})
		if a.header.Get("Allow") == "" {
			t.Errorf("%s 405: no Allow header", route)
		}
	}

	// The scheme's name is case-insensitive and spaces may be several; a
	// scheme other than Bearer is refused as such.
	for _, auth := range []string{"bearer " + aw.token, "BEARER " + aw.token, "Bearer   " + aw.token} {
		aw.run(t, probe{name: "auth " + strings.Fields(auth)[0], route: "GET /v1/status", path: "/v1/status", hdr: map[string]string{"Authorization": auth}, status: 200})
	}
	for _, c := range []struct{ auth, says string }{
		{"Basic " + aw.token, "is not a bearer token"},
		{"Bearer", "is not a bearer token"},
		{"bearer x" + aw.token, "wrong bearer token"},
	} {
		aw.run(t, probe{name: "auth " + c.auth, route: "GET /v1/status", path: "/v1/status", hdr: map[string]string{"Authorization": c.auth}, status: 401, code: "unauthorized", says: c.says})
	}

	// Before the first apply.
	for _, p := range []probe{
		{name: "event before apply", route: "POST /v1/events", path: "/v1/events", body: add("a", 1), status: 409, code: "no_manifest"},
		{name: "cells before apply", route: "GET /v1/cells/{workflow}", path: tally, status: 409, code: "no_manifest"},
		{name: "cell before apply", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/a", status: 409, code: "no_manifest"},
		{name: "trace before apply", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/a", status: 409, code: "no_manifest"},
		{name: "timeline before apply", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a", status: 409, code: "no_manifest"},
		{name: "manifest before apply", route: "GET /v1/manifest", path: "/v1/manifest", status: 409, code: "no_manifest"},
		{name: "recover before apply", route: "POST /v1/failed/{workflow}/recover", path: recoverTally,
			body: `{"key":"a","action":"skip","fault_seq":1}`, status: 409, code: "no_manifest"},
		{name: "failed before apply", route: "GET /v1/failed", path: "/v1/failed", status: 200},
		{name: "shadow before apply", route: "POST /v1/shadow", path: "/v1/shadow", body: files(answersManifest), status: 200},
		{name: "apply", route: "POST /v1/apply", path: "/v1/apply", body: files(answersManifest), status: 200, journals: true, says: `"applied":true`},
	} {
		aw.run(t, p)
	}

	// The world at work: a tally a, a failed tally bad, jobs j1 (in flight),
	// j2 and j3.
	for _, p := range []probe{
		{name: "event", route: "POST /v1/events", path: "/v1/events", body: add("a", 1), status: 200, journals: true, says: `"seq"`},
		{name: "batch", route: "POST /v1/events", path: "/v1/events", body: "[" + add("a", 1) + "," + add("bad", 13) + "]", status: 200, journals: true, says: `"seqs"`},
		{name: "keyed event", route: "POST /v1/events", path: "/v1/events", body: add("a", 2), hdr: map[string]string{"Idempotency-Key": "k1"}, status: 200, journals: true},
		{name: "resend", route: "POST /v1/events", path: "/v1/events", body: add("a", 2), hdr: map[string]string{"Idempotency-Key": "k1"}, status: 200, says: `"duplicate":true`},
		{name: "idempotency conflict", route: "POST /v1/events", path: "/v1/events", body: add("a", 3), hdr: map[string]string{"Idempotency-Key": "k1"}, status: 409, code: "idempotency_conflict"},
		{name: "malformed", route: "POST /v1/events", path: "/v1/events", body: `{"schema":`, status: 400, code: "invalid_input"},
		{name: "unknown field", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Add@1","value":{},"x":1}`, status: 400, code: "invalid_input"},
		{name: "unknown schema", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Nope@1","value":{}}`, status: 400, code: "invalid_input"},
		{name: "stray brace after the body", route: "POST /v1/events", path: "/v1/events", body: add("a", 1) + "}", status: 400, code: "invalid_input", says: `"trailing data after the JSON value (at byte 47)"`},
		{name: "lone surrogate in a key", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Add@1","value":{"key":"\ud800","by":1}}`, status: 400, code: "invalid_input", says: `lone UTF-16 surrogate \\ud800`},
		{name: "batch over the bound", route: "POST /v1/events", path: "/v1/events", body: batchOf(api.DefaultMaxBatchEvents+1, add("a", 1)), status: 413, code: "too_large", says: fmt.Sprintf("a batch holds at most %d events", api.DefaultMaxBatchEvents)},
		{name: "batch at the bound", route: "POST /v1/events", path: "/v1/events", body: batchOf(api.DefaultMaxBatchEvents, add("c", 1)), status: 200, journals: true, says: `"seqs"`},
		{name: "envelope key twice", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Add@1","schema":"t/Add@1","value":{"key":"a","by":1}}`, status: 400, code: "invalid_input", says: `duplicate object key \"schema\"`},
		{name: "envelope key in another case", route: "POST /v1/events", path: "/v1/events", body: `{"Schema":"t/Add@1","value":{"key":"a","by":1}}`, status: 400, code: "invalid_input", says: `unknown field \"Schema\"`},
		{name: "batch element not an event", route: "POST /v1/events", path: "/v1/events", body: "[" + add("a", 1) + ",5]", status: 400, code: "invalid_input", says: "events[1]: json: at byte"},
		{name: "schema violation", route: "POST /v1/events", path: "/v1/events", body: `{"schema":"t/Add@1","value":{"key":"a"}}`, status: 400, code: "invalid_input", says: "t/Add@1"},
		{name: "empty batch", route: "POST /v1/events", path: "/v1/events", body: `[]`, status: 400, code: "invalid_input"},
		{name: "too large", route: "POST /v1/events", path: "/v1/events", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "job j1", route: "POST /v1/events", path: "/v1/events", body: start("j1"), status: 200, journals: true},
		{name: "job j2", route: "POST /v1/events", path: "/v1/events", body: start("j2"), status: 200, journals: true},
		{name: "job j3", route: "POST /v1/events", path: "/v1/events", body: start("j3"), status: 200, journals: true},
	} {
		aw.run(t, p)
	}
	if err := aw.w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	i1, i2, i3 := aw.intentOf(t, "j1"), aw.intentOf(t, "j2"), aw.intentOf(t, "j3")
	badFault := aw.faultOf(t, "t/tally@1", "bad")

	// Executors: a key for t/work@1, a claim, frames and receipts.
	payments, _ := receipts.GenerateKey()
	stranger, _ := receipts.GenerateKey()
	keyBody := func(name string, effects ...string) string {
		b, _ := json.Marshal(api.AddKeyRequest{Name: name, PublicKey: pubPEM(t, payments.Public().(ed25519.PublicKey)), Effects: effects})
		return string(b)
	}
	ghost := schemas.HashBytes([]byte("no such intent"))
	// another is a world that is not this one; a receipt or frame signed
	// for it, or for none (the first layout), is refused whatever else it
	// says, even for an intent this world has pending.
	world, another := aw.w.Identity(), "world:00112233445566778899aabbccddeeff"
	for _, p := range []probe{
		{name: "keys", route: "GET /v1/keys", path: "/v1/keys", status: 200, says: receipts.BuiltinExecutor},
		{name: "add key", route: "POST /v1/keys", path: "/v1/keys", body: keyBody("payments", workFx), status: 200, says: `"id"`},
		{name: "add key again", route: "POST /v1/keys", path: "/v1/keys", body: keyBody("payments", workFx), status: 409, code: "conflict"},
		{name: "key for sys/", route: "POST /v1/keys", path: "/v1/keys", body: keyBody("payments", "sys/timer.set@1"), status: 400, code: "invalid_input"},
		{name: "key malformed", route: "POST /v1/keys", path: "/v1/keys", body: `{"name":`, status: 400, code: "invalid_input"},
		{name: "key too large", route: "POST /v1/keys", path: "/v1/keys", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "remove unknown key", route: "DELETE /v1/keys/{id}", path: "/v1/keys/ed25519:" + strings.Repeat("0", 32), status: 404, code: "not_found"},
		{name: "claim", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"],"max":5000}`, status: 200, says: i1.String()},
		{name: "claim names the world", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"],"wait_ms":0}`, status: 200, says: `"world":"` + world + `"`},
		{name: "claim stray brace after the body", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/other@1"]}}`, status: 400, code: "invalid_input", says: "trailing data after the JSON value"},
		{name: "claim nothing open", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"]}`, status: 200, says: `"intents":[]`},
		{name: "claim an effect the executor's keys may not settle", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1","t/other@1"]}`, status: 403, code: "untrusted",
			says: `executor payments may not claim t/other@1: its keys may settle t/work@1`},
		{name: "claim by an executor no key is trusted for", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"squatter","effects":["t/work@1"],"lease_ms":3600000}`, status: 403, code: "untrusted",
			says: `executor squatter may not claim t/work@1: no key is trusted under that name`},
		{name: "claim as the built-in executors", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"` + receipts.BuiltinExecutor + `","effects":["t/work@1"]}`, status: 403, code: "untrusted"},
		{name: "claim without effects", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments"}`, status: 400, code: "invalid_input"},
		{name: "claim negative", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"],"lease_ms":-1}`, status: 400, code: "invalid_input", says: "lease_ms"},
		{name: "claim too large", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "claim without executors", route: "POST /v1/effects/claim", base: aw.bare, path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"]}`, status: 503, code: "unavailable"},
		{name: "frame", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i1, 1), status: 200, journals: true},
		{name: "frame again", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i1, 1), status: 409, code: "frame_refused"},
		{name: "frame stranger", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), stranger, "payments", workFx, i1, 2), status: 403, code: "untrusted"},
		{name: "frame for another world", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, another, payments, "payments", workFx, i1, 2), status: 403, code: "wrong_world", says: "is signed for " + another + ", but this world is " + world},
		{name: "frame in the first layout", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, "", payments, "payments", workFx, i1, 2), status: 403, code: "wrong_world", says: "under aos/frame/v2"},
		{name: "frame malformed", route: "POST /v1/frames", path: "/v1/frames", body: `{"intent_hash":`, status: 400, code: "invalid_input"},
		{name: "frame too large", route: "POST /v1/frames", path: "/v1/frames", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "frame without executors", route: "POST /v1/frames", base: aw.bare, path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i1, 2), status: 503, code: "unavailable"},
		{name: "receipt malformed", route: "POST /v1/receipts", path: "/v1/receipts", body: `{"intent_hash":`, status: 400, code: "invalid_input"},
		{name: "receipt stranger", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), stranger, "payments", workFx, i1, map[string]any{"ok": true}), status: 403, code: "untrusted"},
		{name: "receipt for another effect", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), aw.builtinKey, receipts.BuiltinExecutor, "sys/timer.set@1", i1, map[string]any{"ok": true}), status: 403, code: "untrusted", says: "but the intent is for effect t/work@1"},
		{name: "receipt unknown intent", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, ghost, map[string]any{"ok": true}), status: 404, code: "unknown_intent"},
		{name: "receipt for another world", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, another, payments, "payments", workFx, i1, map[string]any{"ok": true}), status: 403, code: "wrong_world", says: "is signed for " + another + ", but this world is " + world},
		{name: "receipt in the first layout", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, "", payments, "payments", workFx, i1, map[string]any{"ok": true}), status: 403, code: "wrong_world", says: "update the executor to sign the world the claim answers"},
		{name: "receipt too large", route: "POST /v1/receipts", path: "/v1/receipts", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "receipt without executors", route: "POST /v1/receipts", base: aw.bare, path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i1, map[string]any{"ok": true}), status: 503, code: "unavailable"},
		{name: "intent", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String(), status: 200, says: `"kind":"frame"`},
		{name: "intent not a hash", route: "GET /v1/intents/{hash}", path: "/v1/intents/nope", status: 400, code: "invalid_input"},
		{name: "intent unknown", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + ghost.String(), status: 404, code: "not_found"},
		{name: "intent by a prefix", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String()[:len("sha256:")+8], status: 200, says: `"intents":["` + i1.String() + `"]`},
		{name: "intent by a bare prefix", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String()[len("sha256:"):len("sha256:")+11], status: 200, says: `"kind":"frame"`},
		{name: "intent prefix too short", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String()[:len("sha256:")+7], status: 400, code: "invalid_input", says: "has 7 hex digits"},
		{name: "intent prefix of none", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + ghost.String()[:len("sha256:")+12], status: 404, code: "not_found", says: "no intent hash starts with"},
		{name: "pending", route: "GET /v1/pending", path: "/v1/pending", status: 200, says: `{"hash":"` + i1.String() + `","effect":"t/work@1"`},
		{name: "pending, a page of one", route: "GET /v1/pending", path: "/v1/pending?limit=1&effect=t/work@1", status: 200, says: `"next":"`},
		{name: "pending of another workflow", route: "GET /v1/pending", path: "/v1/pending?workflow=t/none@1", status: 200, says: `{"intents":[],"total":0}`},
		{name: "pending, bad limit", route: "GET /v1/pending", path: "/v1/pending?limit=1001", status: 400, code: "invalid_input", says: `"where":"limit"`},
		{name: "pending, bad after", route: "GET /v1/pending", path: "/v1/pending?after=12", status: 400, code: "invalid_input", says: `"where":"after"`},
		{name: "pending without executors", route: "GET /v1/pending", base: aw.bare, path: "/v1/pending", status: 503, code: "unavailable"},
	} {
		aw.run(t, p)
	}

	// Every route that takes a body reads it with the one strict reader:
	// its valid body with a stray ']' after it is refused, journaling
	// nothing; a body declared as something other than JSON is 415; one
	// that does not arrive within the body timeout is 408.
	validBodies := map[string]probe{
		"POST /v1/events":                    {path: "/v1/events", body: add("a", 1)},
		"POST /v1/limits":                    {path: "/v1/limits", body: `{"max_effects":15}`},
		"POST /v1/failed/{workflow}/recover": {path: recoverTally, body: fmt.Sprintf(`{"key":"bad","action":"skip","fault_seq":%d}`, badFault)},
		"POST /v1/apply":                     {path: "/v1/apply", body: files(answersManifest)},
		"POST /v1/gc":                        {path: "/v1/gc", body: `{}`},
		"POST /v1/shadow":                    {path: "/v1/shadow", body: files(answersManifest)},
		"POST /v1/replay/manifest":           {path: "/v1/replay/manifest", body: files(answersManifest)},
		"POST /v1/upgrade":                   {path: "/v1/upgrade", body: `{"workflow":"t/job@1","all":true,"dry_run":true}`},
		"POST /v1/keys":                      {path: "/v1/keys", body: keyBody("payments2", workFx)},
		"POST /v1/effects/claim":             {path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"]}`},
		"POST /v1/receipts":                  {path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i1, map[string]any{"ok": true})},
		"POST /v1/frames":                    {path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i1, 2)},
		"POST /v1/token/rotate":              {path: "/v1/token/rotate", body: `{"grace_ms":1000}`},
		"POST /v1/intents/{hash}/cancel":     {path: "/v1/intents/" + ghost.String() + "/cancel", body: `{"reason":"r"}`},
	}
	bodyRoutes := api.BodyRoutes(t)
	if len(bodyRoutes) != len(validBodies) {
		t.Errorf("docs/openapi.json has %d routes with a request body, the table here %d: %v", len(bodyRoutes), len(validBodies), bodyRoutes)
	}
	for _, route := range bodyRoutes {
		v, ok := validBodies[route]
		if !ok {
			t.Errorf("%s takes a body (docs/openapi.json): give it a valid body here", route)
			continue
		}
		aw.run(t, probe{name: "trailing ]", route: route, path: v.path, body: v.body + "]", status: 400, code: "invalid_input",
			says: fmt.Sprintf(`trailing data after the JSON value (at byte %d)"`, len(v.body))})
		aw.run(t, probe{name: "declared text/xml", route: route, path: v.path, body: v.body, hdr: map[string]string{"Content-Type": "text/xml"},
			status: 415, code: "unsupported_media_type", says: "send Content-Type: application/json"})
		aw.slowBody(t, route, v.path, v.body)
	}
	// What is JSON: application/json (with a UTF-8 charset or none) and the
	// +json types; no Content-Type reads as JSON too (every probe above
	// sends none). curl -d's form type is refused with a hint.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", "application/merge-patch+json"} {
		aw.run(t, probe{name: "limits as " + ct, route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":16}`, hdr: map[string]string{"Content-Type": ct}, status: 200})
	}
	for _, c := range []struct{ ct, says string }{
		{"application/x-www-form-urlencoded", "curl -d sends application/x-www-form-urlencoded"},
		{"application/json; charset=latin1", "a JSON body is UTF-8"},
		{"text/plain", `declared \"text/plain\"`},
		{"json", "not JSON"},
	} {
		aw.run(t, probe{name: "limits as " + c.ct, route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":17}`, hdr: map[string]string{"Content-Type": c.ct},
			status: 415, code: "unsupported_media_type", says: c.says})
	}
	// A route that reads no body is not refused for one that is not JSON:
	// the routes above are exactly those that read one.
	for _, route := range slices.Sorted(mapsKeys(answerRoutes)) {
		if slices.Contains(bodyRoutes, route) || strings.HasPrefix(route, "POST /v1/snapshot") || strings.HasPrefix(route, "POST /v1/replay") {
			continue
		}
		method, _, _ := strings.Cut(route, " ")
		if a := aw.call(t, "", method, answerRoutes[route], "<x/>", map[string]string{"Content-Type": "text/xml"}); a.status == 415 {
			t.Errorf("%s reads a body (415 for text/xml) but docs/openapi.json gives it no requestBody", route)
		}
	}

	// Apply and shadow refused while j1's intent is in flight.
	for _, p := range []probe{
		{name: "apply not quiescent", route: "POST /v1/apply", path: "/v1/apply", body: files(changed), status: 409, code: "not_quiescent", says: `"blocked_by":[{`},
		{name: "apply unchanged, not quiescent", route: "POST /v1/apply", path: "/v1/apply", body: files(answersManifest), status: 409, code: "not_quiescent"},
		{name: "apply dry run, not quiescent", route: "POST /v1/apply", path: "/v1/apply", body: `{"files":[{"name":"m.json","content":` + changed + `}],"dry_run":true}`, status: 409, code: "not_quiescent", says: `"dry_run":true`},
		{name: "apply malformed", route: "POST /v1/apply", path: "/v1/apply", body: `{"files":`, status: 400, code: "invalid_input"},
		{name: "apply path and files", route: "POST /v1/apply", path: "/v1/apply", body: `{"path":"/x","files":[{"name":"m.json","content":{}}]}`, status: 400, code: "invalid_input"},
		{name: "apply bad wait", route: "POST /v1/apply", path: "/v1/apply", body: `{"files":[{"name":"m.json","content":` + changed + `}],"wait":"soon"}`, status: 400, code: "invalid_input", says: "wait"},
		{name: "apply invalid manifest", route: "POST /v1/apply", path: "/v1/apply", body: files(`[{"$kind":"defschema","name":"x"}]`), status: 400, code: "invalid_manifest"},
		{name: "apply path to a device", route: "POST /v1/apply", path: "/v1/apply", body: `{"path":"/dev/zero"}`, status: 400, code: "invalid_manifest", says: "not a regular file"},
		{name: "apply too large", route: "POST /v1/apply", path: "/v1/apply", body: strings.Repeat(" ", api.DefaultMaxApplyBytes+1), status: 413, code: "too_large"},
		{name: "shadow not quiescent", route: "POST /v1/shadow", path: "/v1/shadow", body: `{"files":[{"name":"m.json","content":` + changed + `}],"events":[` + add("s", 1) + `]}`, status: 409, code: "not_quiescent", says: `"blocked_by"`},
		{name: "shadow window and events", route: "POST /v1/shadow", path: "/v1/shadow", body: `{"files":[{"name":"m.json","content":` + answersManifest + `}],"events":[` + add("s", 1) + `],"window":3}`, status: 400, code: "invalid_input"},
		{name: "shadow invalid manifest", route: "POST /v1/shadow", path: "/v1/shadow", body: files(`[{"$kind":"defschema","name":"x"}]`), status: 400, code: "invalid_manifest"},
		{name: "shadow path to a device", route: "POST /v1/shadow", path: "/v1/shadow", body: `{"path":"/dev/zero"}`, status: 400, code: "invalid_manifest", says: "not a regular file"},
		{name: "shadow too large", route: "POST /v1/shadow", path: "/v1/shadow", body: strings.Repeat(" ", api.DefaultMaxApplyBytes+1), status: 413, code: "too_large"},
	} {
		aw.run(t, p)
	}

	// Receipts that settle: j1 accepted; j2's payload fails t/WorkReceipt@1
	// and t/job@1 has no Rejected arm, so j2 fails; j3 fails by a second
	// start while its intent is in flight, so its receipt is dropped.
	for _, p := range []probe{
		{name: "receipt", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i1, map[string]any{"ok": true}), status: 200, journals: true, says: `"seq"`},
		{name: "receipt again", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i1, map[string]any{"ok": true}), status: 409, code: "duplicate"},
		{name: "frame after the receipt", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i1, 5), status: 409, code: "frame_refused"},
		{name: "receipt rejected", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i2, map[string]any{"ok": "yes"}), status: 200, journals: true, says: `"rejected"`},
		{name: "job j3 again", route: "POST /v1/events", path: "/v1/events", body: start("j3"), status: 200, journals: true},
		{name: "receipt late", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i3, map[string]any{"ok": true}), status: 409, code: "dropped", journals: true},
		{name: "receipt late again", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i3, map[string]any{"ok": true}), status: 409, code: "duplicate"},
	} {
		aw.run(t, p)
	}
	if err := aw.w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	j2Fault := aw.faultOf(t, jobWF, "j2")

	// An operator's cancel: j4's intent, in flight, is cancelled; t/job@1
	// takes no sys/EffectCancelled@1, so j4 fails. Then the cancel is
	// refused again, and so are the executor's receipt and frame for it.
	aw.run(t, probe{name: "job j4", route: "POST /v1/events", path: "/v1/events", body: start("j4"), status: 200, journals: true})
	if err := aw.w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	i4 := aw.intentOf(t, "j4")
	cancelI4 := "/v1/intents/" + i4.String() + "/cancel"
	for _, p := range []probe{
		{name: "cancel not a hash", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/nope/cancel", status: 400, code: "invalid_input"},
		{name: "cancel malformed", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, body: `{"reason":`, status: 400, code: "invalid_input"},
		{name: "cancel unknown field", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, body: `{"why":"x"}`, status: 400, code: "invalid_input", says: `unknown field \"why\"`},
		{name: "cancel reason too long", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, body: `{"reason":"` + strings.Repeat("x", 1025) + `"}`, status: 400, code: "invalid_input", says: "reason is 1025 bytes; at most 1024"},
		{name: "cancel too large", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "cancel unknown intent", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/" + ghost.String() + "/cancel", status: 404, code: "unknown_intent"},
		{name: "cancel a prefix of none", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/" + ghost.String()[:len("sha256:")+10] + "/cancel", status: 404, code: "unknown_intent", says: "no intent hash starts with"},
		{name: "cancel a short prefix", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/" + ghost.String()[:len("sha256:")+4] + "/cancel", status: 400, code: "invalid_input", says: "has 4 hex digits"},
		{name: "cancel settled intent", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/" + i1.String() + "/cancel", status: 409, code: "not_in_flight", says: "was settled by the receipt at seq"},
		{name: "cancel", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, body: `{"reason":"not needed","by":"ops"}`, status: 200, journals: true, says: `"delivered":false,"status":"failed"`},
		{name: "cancel again", route: "POST /v1/intents/{hash}/cancel", path: cancelI4, status: 409, code: "cancelled", says: "was cancelled already, at seq"},
		{name: "receipt for a cancelled intent", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), payments, "payments", workFx, i4, map[string]any{"ok": true}), status: 409, code: "cancelled", says: "cancelled by an operator at seq"},
		{name: "frame for a cancelled intent", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), payments, "payments", workFx, i4, 1), status: 409, code: "cancelled", says: "cancelled by an operator at seq"},
		{name: "intent shows the cancel", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i4.String(), status: 200, says: `"kind":"cancel"`},
	} {
		aw.run(t, p)
	}

	// Queries, limits, failed instances.
	for _, p := range []probe{
		{name: "apply unchanged", route: "POST /v1/apply", path: "/v1/apply", body: files(answersManifest), status: 200, says: `"unchanged":true`},
		{name: "apply dry run", route: "POST /v1/apply", path: "/v1/apply", body: `{"files":[{"name":"m.json","content":` + changed + `}],"dry_run":true}`, status: 200, says: `"dry_run":true`},
		{name: "shadow", route: "POST /v1/shadow", path: "/v1/shadow", body: `{"files":[{"name":"m.json","content":` + answersManifest + `}],"events":[` + add("s", 1) + `]}`, status: 200, says: `"deltas"`},
		{name: "status", route: "GET /v1/status", path: "/v1/status", status: 200, says: `"journal_height"`},
		{name: "limits", route: "GET /v1/limits", path: "/v1/limits", status: 200, says: `"max_effects"`},
		{name: "set limits", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":17}`, status: 200, journals: true, says: `"changed":true`},
		{name: "set limits unchanged", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":17}`, status: 200, says: `"changed":false`},
		{name: "set unknown limit", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_efects":17}`, status: 400, code: "invalid_input", says: "max_efects"},
		{name: "set negative limit", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":-1}`, status: 400, code: "invalid_input", says: "max_effects"},
		{name: "limits too large", route: "POST /v1/limits", path: "/v1/limits", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "quiescent", route: "GET /v1/quiescent", path: "/v1/quiescent?wait=1ms", status: 200, says: `"quiescent"`},
		{name: "quiescent bad wait", route: "GET /v1/quiescent", path: "/v1/quiescent?wait=soon", status: 400, code: "invalid_input"},
		{name: "cells", route: "GET /v1/cells/{workflow}", path: tally, status: 200, says: `"cells"`},
		{name: "cells bad limit", route: "GET /v1/cells/{workflow}", path: tally + "?limit=99999", status: 400, code: "invalid_input"},
		{name: "cells bad cursor", route: "GET /v1/cells/{workflow}", path: tally + "?after=zz", status: 400, code: "invalid_input"},
		{name: "cells unknown workflow", route: "GET /v1/cells/{workflow}", path: "/v1/cells/t%2Fnope@1", status: 404, code: "not_found"},
		{name: "cell", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/a", status: 200, says: `"state"`},
		{name: "cell bad key", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/%22%22", status: 400, code: "invalid_input"},
		{name: "cell key with a lone surrogate", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/%22%5Cud800%22", status: 400, code: "invalid_input", says: "lone UTF-16 surrogate"},
		{name: "cell key not UTF-8", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/%ED%A0%80", status: 400, code: "invalid_input", says: "not valid UTF-8"},
		{name: "cell none", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/zzz", status: 404, code: "not_found"},
		{name: "cell unknown workflow", route: "GET /v1/cells/{workflow}/{key}", path: "/v1/cells/t%2Fnope@1/a", status: 404, code: "not_found"},
		{name: "trace", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/a", status: 200, says: `"kind":"step"`},
		{name: "trace bad key", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/%22%22", status: 400, code: "invalid_input"},
		{name: "trace unknown workflow", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Fnope@1/a", status: 404, code: "not_found"},
		{name: "timeline", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a", status: 200, says: `"state_source"`},
		{name: "timeline bad key", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/%22%22", status: 400, code: "invalid_input"},
		{name: "timeline bad after", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a?after=x", status: 400, code: "invalid_input", says: `"where":"after"`},
		{name: "timeline bad limit", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a?limit=1001", status: 400, code: "invalid_input", says: `"where":"limit"`},
		{name: "timeline unknown workflow", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Fnope@1/a", status: 404, code: "not_found"},
		{name: "manifest", route: "GET /v1/manifest", path: "/v1/manifest", status: 200, says: `"source":[`},
		{name: "cells by status", route: "GET /v1/cells/{workflow}", path: tally + "?status=failed", status: 200, says: `"bad"`},
		{name: "cells by key", route: "GET /v1/cells/{workflow}", path: tally + "?key=a", status: 200, says: `"key":"a"`},
		{name: "cells bad status", route: "GET /v1/cells/{workflow}", path: tally + "?status=done", status: 400, code: "invalid_input", says: `"where":"status"`},
		{name: "cells bad key", route: "GET /v1/cells/{workflow}", path: tally + "?key=%22%22", status: 400, code: "invalid_input", says: `"where":"key"`},
		{name: "journal", route: "GET /v1/journal", path: "/v1/journal?kind=fault", status: 200, says: `"kind":"fault"`},
		{name: "journal bad kind", route: "GET /v1/journal", path: "/v1/journal?kind=nope", status: 400, code: "invalid_input"},
		{name: "journal check", route: "GET /v1/journal/check", path: "/v1/journal/check", status: 200, says: `"ok":true`},
		{name: "failed", route: "GET /v1/failed", path: "/v1/failed", status: 200, says: `"bad"`},
		{name: "failed bad limit", route: "GET /v1/failed", path: "/v1/failed?limit=x", status: 400, code: "invalid_input"},
		{name: "failed key without workflow", route: "GET /v1/failed", path: "/v1/failed?key=a", status: 400, code: "invalid_input"},
		{name: "failed unknown workflow", route: "GET /v1/failed", path: "/v1/failed?workflow=t%2Fnope@1", status: 400, code: "invalid_input"},
		{name: "failed unknown workflow with key", route: "GET /v1/failed", path: "/v1/failed?workflow=t%2Fnope@1&key=a", status: 400, code: "invalid_input"},
		{name: "recover malformed", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: `{"key":`, status: 400, code: "invalid_input"},
		{name: "recover bad action", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: fmt.Sprintf(`{"key":"bad","action":"undo","fault_seq":%d}`, badFault), status: 400, code: "invalid_input"},
		{name: "recover too large", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "recover unknown workflow", route: "POST /v1/failed/{workflow}/recover", path: "/v1/failed/t%2Fnope@1/recover", body: `{"key":"a","action":"skip","fault_seq":1}`, status: 404, code: "not_found"},
		{name: "recover not failed", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: `{"key":"a","action":"skip","fault_seq":1}`, status: 409, code: "not_failed"},
		{name: "recover stale", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: fmt.Sprintf(`{"key":"bad","action":"skip","fault_seq":%d}`, badFault-1), status: 409, code: "stale_fault"},
		{name: "recover not retryable", route: "POST /v1/failed/{workflow}/recover", path: recoverJob, body: fmt.Sprintf(`{"key":"j2","action":"retry","fault_seq":%d}`, j2Fault), status: 409, code: "not_retryable"},
		{name: "recover", route: "POST /v1/failed/{workflow}/recover", path: recoverTally, body: fmt.Sprintf(`{"key":"bad","action":"skip","fault_seq":%d}`, badFault), status: 200, journals: true, says: `"status":"completed"`},
		{name: "replay", route: "POST /v1/replay", path: "/v1/replay?verify=true", status: 200, says: `"ok":true`},
		{name: "replay bad verify", route: "POST /v1/replay", path: "/v1/replay?verify=maybe", status: 400, code: "invalid_input"},
		{name: "gc bad keep", route: "POST /v1/gc", path: "/v1/gc", body: `{"keep_snapshots":-1}`, status: 400, code: "invalid_input"},
		{name: "gc malformed", route: "POST /v1/gc", path: "/v1/gc", body: `{"keep_snapshots":`, status: 400, code: "invalid_input"},
		{name: "gc too large", route: "POST /v1/gc", path: "/v1/gc", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "snapshot", route: "POST /v1/snapshot", path: "/v1/snapshot", status: 200, journals: true, says: `"object"`},
		{name: "gc", route: "POST /v1/gc", path: "/v1/gc", body: `{}`, status: 200, says: `"freed_objects"`},
		{name: "metrics", route: "GET /metrics", path: "/metrics", status: 200, says: "aos_journal_height"},
		{name: "backup", route: "GET /v1/backup", path: "/v1/backup", status: 200},
		{name: "backup without a store", route: "GET /v1/backup", path: "/v1/backup", base: aw.bare, status: 503, code: "unavailable"},
		{name: "backup of a world on PostgreSQL", route: "GET /v1/backup", path: "/v1/backup", base: aw.pgLike, status: 501, code: "unsupported", says: "pg_dump"},
		{name: "token rotate", route: "POST /v1/token/rotate", path: "/v1/token/rotate", body: `{"grace_ms":60000}`, status: 200, says: `"grace_ms":60000`},
		{name: "token rotate negative grace", route: "POST /v1/token/rotate", path: "/v1/token/rotate", body: `{"grace_ms":-1}`, status: 400, code: "invalid_input", says: "grace_ms"},
		{name: "token rotate grace over a day", route: "POST /v1/token/rotate", path: "/v1/token/rotate", body: `{"grace_ms":86400001}`, status: 400, code: "invalid_input", says: "grace_ms"},
		{name: "token rotate malformed", route: "POST /v1/token/rotate", path: "/v1/token/rotate", body: `{"grace":1}`, status: 400, code: "invalid_input"},
		{name: "token rotate too large", route: "POST /v1/token/rotate", path: "/v1/token/rotate", body: strings.Repeat(" ", api.DefaultMaxBodyBytes+1), status: 413, code: "too_large"},
		{name: "token rotate without a token file", route: "POST /v1/token/rotate", path: "/v1/token/rotate", base: aw.bare, body: `{}`, status: 503, code: "unavailable"},
	} {
		aw.run(t, p)
	}
	// Parking: a failed job takes events parked, up to the bound; an apply
	// that changes its event leaves them undeliverable, so a recover must
	// drop them. A runaway guest: one timeout sets its module aside, the
	// next event for it is parked, and a resume delivers it.
	j3Fault := aw.faultOf(t, jobWF, "j3")
	guest := runawayGuest(t)
	runawayFiles := `{"files":[{"name":"manifest.json","content":` + fmt.Sprintf(runawayAnswersManifest, schemas.HashBytes(guest)) +
		`},{"name":"hostile.wasm","base64":"` + base64.StdEncoding.EncodeToString(guest) + `"}]}`
	hostile := func(key, act string) string {
		return fmt.Sprintf(`{"schema":"t/HostileEvent@1","value":{"key":%q,"act":%q}}`, key, act)
	}
	const resumeHostile = "/v1/modules/t%2Fhostile_mod@1/resume"
	for _, p := range []probe{
		{name: "parking bound", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_parked_per_instance":1}`, status: 200, journals: true, says: `"max_parked_per_instance":1`},
		{name: "event parked", route: "POST /v1/events", path: "/v1/events", body: start("j3"), status: 200, journals: true, says: `"parked":[{"key":"j3","workflow":"t/job@1"}]`},
		{name: "parked full", route: "POST /v1/events", path: "/v1/events", body: start("j3"), status: 409, code: "parked_full", says: "max_parked_per_instance 1"},
		{name: "apply a runaway guest", route: "POST /v1/apply", path: "/v1/apply", body: runawayFiles, status: 200, journals: true, says: `"applied":true`},
		{name: "recover, parked undeliverable", route: "POST /v1/failed/{workflow}/recover", path: recoverJob,
			body: fmt.Sprintf(`{"key":"j3","action":"skip","fault_seq":%d}`, j3Fault), status: 409, code: "parked_undeliverable", says: "drop_parked"},
		{name: "recover dropping parked", route: "POST /v1/failed/{workflow}/recover", path: recoverJob,
			body: fmt.Sprintf(`{"key":"j3","action":"skip","fault_seq":%d,"drop_parked":true}`, j3Fault), status: 200, journals: true, says: `"dropped":1`},
		{name: "modules", route: "GET /v1/modules", path: "/v1/modules", status: 200, says: `"status":"running"`},
		{name: "resume a running module", route: "POST /v1/modules/{module}/resume", path: resumeHostile, status: 409, code: "not_aside"},
		{name: "event for the runaway guest", route: "POST /v1/events", path: "/v1/events", body: hostile("k1", "loop"), status: 200, journals: true},
		{name: "event parked behind its module", route: "POST /v1/events", path: "/v1/events", body: hostile("k2", "count"), status: 200, journals: true,
			says: `"parked":[{"key":"k2","workflow":"t/hostile@1"}]`},
		{name: "modules, one set aside", route: "GET /v1/modules", path: "/v1/modules", status: 200, says: `"status":"aside"`},
		{name: "status, one set aside", route: "GET /v1/status", path: "/v1/status", status: 200, says: `"aside":[{"name":"t/hostile_mod@1"`},
		{name: "metrics, one set aside", route: "GET /metrics", path: "/metrics", status: 200, says: `aos_module_parked_inputs{module="t/hostile_mod@1"} 1`},
		{name: "resume", route: "POST /v1/modules/{module}/resume", path: resumeHostile, status: 200, journals: true, says: `"delivered":1`},
	} {
		aw.run(t, p)
	}

	// The key removed: the built-in one cannot be.
	var keys []api.KeyView
	if err := json.Unmarshal([]byte(aw.call(t, "", "GET", "/v1/keys", "", nil).body), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == receipts.BuiltinExecutor {
			aw.run(t, probe{name: "remove the built-in key", route: "DELETE /v1/keys/{id}", path: "/v1/keys/" + k.ID, status: 400, code: "invalid_input"})
		} else {
			aw.run(t, probe{name: "remove key", route: "DELETE /v1/keys/{id}", path: "/v1/keys/" + k.ID, status: 200, says: `"removed":true`})
		}
	}

	// A collection or snapshot while another runs: held at a CAS operation.
	aw.whileHeld(t, storefault.CASIterate, false, `{}`, "/v1/gc", probe{name: "gc while one runs", route: "POST /v1/gc", path: "/v1/gc", body: `{}`, status: 409, code: "conflict"})
	aw.run(t, probe{name: "event for the snapshot", route: "POST /v1/events", path: "/v1/events", body: add("a", 1), status: 200, journals: true})
	aw.whileHeld(t, storefault.CASPut, true, "", "/v1/snapshot", probe{name: "snapshot while one is written", route: "POST /v1/snapshot", path: "/v1/snapshot", status: 409, code: "not_idle"})

	// A storage read fails: 500 internal.
	for _, p := range []probe{
		{name: "status, journal read fails", route: "GET /v1/status", path: "/v1/status", status: 500, code: "internal"},
		{name: "journal, journal read fails", route: "GET /v1/journal", path: "/v1/journal", status: 500, code: "internal"},
		{name: "journal check, journal read fails", route: "GET /v1/journal/check", path: "/v1/journal/check", status: 500, code: "internal"},
		{name: "trace, journal read fails", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/a", status: 500, code: "internal"},
		{name: "timeline, journal read fails", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a", status: 500, code: "internal"},
		{name: "manifest, journal read fails", route: "GET /v1/manifest", path: "/v1/manifest", status: 500, code: "internal"},
		{name: "intent, journal read fails", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String(), status: 500, code: "internal"},
	} {
		aw.logFaults.Arm(storefault.Ops(storefault.JournalRead), 1)
		aw.run(t, p)
		aw.logFaults.Arm(nil, 0)
	}
	for _, p := range []probe{
		{name: "cells, cas read fails", route: "GET /v1/cells/{workflow}", path: tally, status: 500, code: "internal"},
		{name: "timeline, cas read fails", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a", status: 500, code: "internal"},
		{name: "gc, cas read fails", route: "POST /v1/gc", path: "/v1/gc", body: "{}", status: 500, code: "internal"},
	} {
		aw.casFaults.Arm(storefault.Ops(storefault.CASGet, storefault.CASIterate, storefault.CASHas), 1)
		aw.run(t, p)
		aw.casFaults.Arm(nil, 0)
	}

	// A journal write fails: the world stops, and every route that needs it
	// answers 503.
	aw.logFaults.Arm(storefault.Ops(storefault.JournalAppend), 1)
	aw.run(t, probe{name: "event, journal write fails", route: "POST /v1/events", path: "/v1/events", body: add("a", 1), status: 503, code: "unavailable"})
	for _, p := range []probe{
		{name: "event", route: "POST /v1/events", path: "/v1/events", body: add("a", 1)},
		{name: "status", route: "GET /v1/status", path: "/v1/status"},
		{name: "limits", route: "GET /v1/limits", path: "/v1/limits"},
		{name: "set limits", route: "POST /v1/limits", path: "/v1/limits", body: `{"max_effects":18}`},
		{name: "quiescent", route: "GET /v1/quiescent", path: "/v1/quiescent"},
		{name: "cells", route: "GET /v1/cells/{workflow}", path: tally},
		{name: "cell", route: "GET /v1/cells/{workflow}/{key}", path: tally + "/a"},
		{name: "failed", route: "GET /v1/failed", path: "/v1/failed"},
		{name: "recover", route: "POST /v1/failed/{workflow}/recover", path: recoverJob, body: fmt.Sprintf(`{"key":"j2","action":"skip","fault_seq":%d}`, j2Fault)},
		{name: "modules", route: "GET /v1/modules", path: "/v1/modules"},
		{name: "resume", route: "POST /v1/modules/{module}/resume", path: "/v1/modules/t%2Fhostile_mod@1/resume"},
		{name: "manifests", route: "GET /v1/manifests", path: "/v1/manifests"},
		{name: "retire", route: "POST /v1/manifests/{hash}/retire", path: "/v1/manifests/sha256:" + strings.Repeat("0", 64) + "/retire"},
		{name: "cancel", route: "POST /v1/intents/{hash}/cancel", path: "/v1/intents/" + ghost.String() + "/cancel"},
		{name: "apply", route: "POST /v1/apply", path: "/v1/apply", body: files(answersManifest)},
		{name: "shadow", route: "POST /v1/shadow", path: "/v1/shadow", body: files(answersManifest)},
		{name: "snapshot", route: "POST /v1/snapshot", path: "/v1/snapshot"},
		{name: "replay", route: "POST /v1/replay", path: "/v1/replay"},
		{name: "upgrade", route: "POST /v1/upgrade", path: "/v1/upgrade", body: `{"workflow":"t/job@1","all":true}`},
		{name: "gc", route: "POST /v1/gc", path: "/v1/gc", body: `{}`},
		{name: "claim", route: "POST /v1/effects/claim", path: "/v1/effects/claim", body: `{"executor":"payments","effects":["t/work@1"]}`},
		{name: "receipt", route: "POST /v1/receipts", path: "/v1/receipts", body: signedReceipt(t, aw.w.Identity(), aw.builtinKey, receipts.BuiltinExecutor, "sys/timer.set@1", ghost, map[string]any{})},
		{name: "frame", route: "POST /v1/frames", path: "/v1/frames", body: signedFrame(t, aw.w.Identity(), aw.builtinKey, receipts.BuiltinExecutor, "sys/timer.set@1", ghost, 1)},
	} {
		p.name = "stopped world: " + p.name
		p.status, p.code = 503, "unavailable"
		aw.run(t, p)
	}
	// What reads the journal or the keys alone still answers.
	for _, p := range []probe{
		{name: "journal", route: "GET /v1/journal", path: "/v1/journal"},
		{name: "journal check", route: "GET /v1/journal/check", path: "/v1/journal/check"},
		{name: "trace", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/a"},
		{name: "timeline", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a"},
		{name: "manifest", route: "GET /v1/manifest", path: "/v1/manifest"},
		{name: "replay under a manifest", route: "POST /v1/replay/manifest", path: "/v1/replay/manifest", body: files(answersManifest)},
		{name: "intent", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + i1.String()},
		{name: "keys", route: "GET /v1/keys", path: "/v1/keys"},
		{name: "metrics", route: "GET /metrics", path: "/metrics"},
	} {
		p.name = "stopped world: " + p.name
		p.status = 200
		aw.run(t, p)
	}
	t.Run("retention", func(t *testing.T) { probeRetention(t, files(answersManifest), add, start) })
	t.Run("pins", func(t *testing.T) { probePins(t, answersManifest, start) })
	t.Run("upgrade", func(t *testing.T) { probeUpgrade(t, answersManifest, start) })
	if !t.Failed() {
		t.Run("documented", func(t *testing.T) { checkAnswersDocumented(t, provoked) })
	}
}

// probeRetention provokes, on a world of its own, the answers of the
// routes that read the journal once retention dropped its oldest records:
// what reads from the start begins at the first record held and says where
// (never 500); a read from a seq it dropped is refused 410 naming the first
// seq held.
func probeRetention(t *testing.T, manifest string, add func(string, int) string, start func(string) string) {
	aw := newAnswersWorld(t)
	for _, p := range []probe{
		{name: "apply", route: "POST /v1/apply", path: "/v1/apply", body: manifest, status: 200, journals: true},
		{name: "event", route: "POST /v1/events", path: "/v1/events", body: add("a", 1), status: 200, journals: true},
		{name: "job", route: "POST /v1/events", path: "/v1/events", body: start("j1"), status: 200, journals: true},
		{name: "snapshot", route: "POST /v1/snapshot", path: "/v1/snapshot", status: 200, journals: true},
		{name: "event after", route: "POST /v1/events", path: "/v1/events", body: add("a", 2), status: 200, journals: true},
	} {
		aw.run(t, p)
	}
	dropped := aw.intentOf(t, "j1")
	aw.run(t, probe{name: "snapshot to keep", route: "POST /v1/snapshot", path: "/v1/snapshot", status: 200, journals: true, says: `"object"`})
	aw.run(t, probe{name: "gc dropping the journal", route: "POST /v1/gc", path: "/v1/gc", body: `{"keep_snapshots":1,"drop_journal":true}`, status: 200, says: `"journal":{`})
	var st struct {
		First uint64 `json:"journal_first"`
	}
	if err := json.Unmarshal([]byte(aw.run(t, probe{name: "status after retention", route: "GET /v1/status", path: "/v1/status", status: 200}).body), &st); err != nil || st.First < 3 {
		t.Fatalf("journal_first after gc --drop-journal: %d (%v), want past seq 2", st.First, err)
	}
	firstText := strconv.FormatUint(st.First, 10)
	retained := []probe{
		{name: "journal from a dropped seq", route: "GET /v1/journal", path: "/v1/journal?from=2", status: 410, code: "truncated", says: "starts at seq " + firstText},
		{name: "journal from the start after retention", route: "GET /v1/journal", path: "/v1/journal", status: 200, says: `"seq":` + firstText + `}`},
		{name: "journal follow from a dropped seq", route: "GET /v1/journal", path: "/v1/journal?from=2&follow=true", status: 410, code: "truncated"},
		{name: "trace after retention", route: "GET /v1/trace/{workflow}/{key}", path: "/v1/trace/t%2Ftally@1/a", status: 200},
		{name: "timeline after retention", route: "GET /v1/timeline/{workflow}/{key}", path: "/v1/timeline/t%2Ftally@1/a", status: 200, says: `"first":` + firstText},
		{name: "dropped intent", route: "GET /v1/intents/{hash}", path: "/v1/intents/" + dropped.String(), status: 404, code: "not_found", says: "starts at seq " + firstText},
		{name: "manifest after retention", route: "GET /v1/manifest", path: "/v1/manifest", status: 200},
		{name: "status after retention", route: "GET /v1/status", path: "/v1/status", status: 200, says: `"journal_first":` + firstText},
	}
	for _, p := range retained {
		a := aw.run(t, p)
		if strings.HasPrefix(p.name, "journal") && a.header.Get(api.HeaderJournalFirst) != firstText {
			t.Errorf("%s: %s %q, want %s", p.name, api.HeaderJournalFirst, a.header.Get(api.HeaderJournalFirst), firstText)
		}
	}
}

// whileHeld holds the next CAS operation op of a request to path (body)
// started in the background, sends p meanwhile, and lets the first go.
// With journals, the first request journals a record before op (a
// snapshot's checkpoint): p is sent once it is durable.
func (aw *answersWorld) whileHeld(t *testing.T, op storefault.Op, journals bool, body, path string, p probe) {
	t.Helper()
	h0 := aw.height()
	gate := storefault.NewGate(op)
	hook := gate.Hook
	aw.casGate.Store(&hook)
	defer aw.casGate.Store(nil)
	defer gate.Open()
	gate.Arm()
	first := make(chan httpAnswer, 1)
	go func() { first <- aw.call(t, "", "POST", path, body, nil) }()
	<-gate.Entered()
	if journals {
		if _, err := aw.log.Wait(context.Background(), h0); err != nil {
			t.Fatal(err)
		}
	}
	aw.run(t, p)
	gate.Open()
	if a := <-first; a.status != 200 {
		t.Errorf("the held %s: %d %s", path, a.status, a.body)
	}
}

// slowBody sends route (at path) on the short server the start of body,
// declaring all of it, and waits: the server answers 408 timeout once its
// body timeout passes, and then closes the connection. Nothing is
// journaled.
func (aw *answersWorld) slowBody(t *testing.T, route, path, body string) {
	t.Helper()
	before := aw.height()
	u, err := url.Parse(aw.short)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A bound on the test, not on the server: the server answers after
	// shortBodyTimeout.
	conn.SetDeadline(time.Now().Add(time.Minute))
	method, _, _ := strings.Cut(route, " ")
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, u.Host, aw.token, len(body), body[:len(body)/2])
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Errorf("%s with a slow body: no answer: %v", route, err)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a := httpAnswer{status: resp.StatusCode, body: string(b), header: resp.Header}
	if a.status != http.StatusRequestTimeout {
		t.Errorf("%s with a slow body: %d %s, want 408", route, a.status, a.body)
		return
	}
	if err := checkAnswerShape(a, "timeout"); err != nil || !strings.Contains(a.body, "did not arrive within "+shortBodyTimeout.String()) {
		t.Errorf("%s with a slow body: %v: %s", route, err, a.body)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Errorf("%s with a slow body: after the 408 the connection gave %q, %v; want it closed", route, rest, err)
	}
	if after := aw.height(); after != before {
		t.Errorf("%s with a slow body: journal height %d -> %d", route, before, after)
	}
	provokedMu.Lock()
	provoked[api.AnswerKey{Route: route, Status: http.StatusRequestTimeout, Code: "timeout"}] = true
	provokedMu.Unlock()
}

// batchOf is a POST /v1/events batch of n copies of event.
func batchOf(n int, event string) string {
	return "[" + strings.TrimSuffix(strings.Repeat(event+",", n), ",") + "]"
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// checkAnswersDocumented: docs/API.md's tables list exactly the answers
// provoked.
func checkAnswersDocumented(t *testing.T, got map[api.AnswerKey]bool) {
	t.Helper()
	doc := api.DocumentedAnswers(t)
	var undocumented, unprovoked []string
	for k := range got {
		if !doc[k] {
			undocumented = append(undocumented, k.String())
		}
	}
	for k := range doc {
		if !got[k] {
			unprovoked = append(unprovoked, k.String())
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unprovoked)
	if len(undocumented) > 0 {
		t.Errorf("answers provoked but not in docs/API.md's tables:\n%s", strings.Join(undocumented, "\n"))
	}
	if len(unprovoked) > 0 {
		t.Errorf("answers in docs/API.md's tables that TestAPIAnswers does not provoke:\n%s", strings.Join(unprovoked, "\n"))
	}
}
