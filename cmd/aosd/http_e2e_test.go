package main_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sagaGo is the saga of docs/sdk.md ("Typed HTTP"): charge, ship, and
// refund the charge when shipping refuses, written with the sdk's typed
// HTTP helpers.
const sagaGo = `package pay

import (
	"fmt"

	"github.com/aos-kernel/aos/sdk"
	"github.com/aos-kernel/aos/sdk/httpcall"
)

var Module = sdk.NewModule("com.acme/pay")

func init() { sdk.Workflow(Module, "step", Step) }

type Order struct {
	Key      string ` + "`cbor:\"key\"`" + `
	Amount   int64  ` + "`cbor:\"amount\"`" + `
	Payments string ` + "`cbor:\"payments\"`" + ` // base URLs of the services
	Shipping string ` + "`cbor:\"shipping\"`" + `
}

type State struct {
	Stage          string ` + "`cbor:\"stage\"`" + `
	Payments       string ` + "`cbor:\"payments\"`" + `
	Shipping       string ` + "`cbor:\"shipping\"`" + `
	ChargeID       string ` + "`cbor:\"charge_id,omitempty\"`" + `
	ChargeAttempts uint64 ` + "`cbor:\"charge_attempts,omitempty\"`" + `
	Why            string ` + "`cbor:\"why,omitempty\"`" + `
}

func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	switch ev.Tag {
	case "Order":
		if st != nil {
			return st, nil
		}
		var o Order
		if err := ev.As(&o); err != nil {
			return nil, err
		}
		req, err := httpcall.JSON("POST", o.Payments+"/charges", map[string]any{"order": o.Key, "amount": o.Amount})
		if err != nil {
			return nil, err
		}
		req.Retry = &httpcall.Retry{MaxAttempts: 4, InitialBackoffMs: 20, RetryStatuses: []uint64{500, 502, 503, 504}}
		httpcall.Send(c, req, sdk.IssuerRef("charge"))
		return &State{Stage: "charging", Payments: o.Payments, Shipping: o.Shipping}, nil
	case "Receipt":
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		resp, err := httpcall.Result(&r)
		failed := ""
		if err != nil {
			failed = err.Error()
		} else if !resp.Success() {
			failed = fmt.Sprintf("status %d", resp.Status)
		}
		switch r.IssuerRef {
		case "charge":
			if failed != "" {
				st.Stage, st.Why = "charge_failed", failed
				return st, nil
			}
			var ch struct{ ID string ` + "`json:\"id\"`" + ` }
			if err := resp.JSON(&ch); err != nil {
				return nil, err
			}
			st.Stage, st.ChargeID, st.ChargeAttempts = "shipping", ch.ID, resp.Attempts
			ship, err := httpcall.JSON("POST", st.Shipping+"/shipments", map[string]any{"charge": ch.ID})
			if err != nil {
				return nil, err
			}
			httpcall.Send(c, ship, sdk.IssuerRef("ship"))
		case "ship":
			if failed == "" {
				st.Stage = "shipped"
				return st, nil
			}
			st.Stage, st.Why = "refunding", "shipping: "+failed
			refund := httpcall.Request{Method: "POST", URL: st.Payments + "/charges/" + st.ChargeID + "/refund",
				Headers: map[string]string{"Idempotency-Key": "refund-" + st.ChargeID}}
			httpcall.Send(c, refund, sdk.IssuerRef("refund"))
		case "refund":
			if failed != "" {
				st.Stage, st.Why = "refund_failed", failed
			} else {
				st.Stage = "refunded"
			}
		}
	}
	return st, nil
}
`

const sagaSchemas = `[
  {"$kind": "defschema", "name": "com.acme/PayKey@1", "schema": {"type": "string", "minLength": 1}},
  {"$kind": "defschema", "name": "com.acme/Order@1",
   "schema": {"type": "object", "additionalProperties": false, "required": ["key", "amount", "payments", "shipping"],
              "properties": {"key": {"$ref": "com.acme/PayKey@1"}, "amount": {"type": "integer"},
                             "payments": {"type": "string"}, "shipping": {"type": "string"}}}},
  {"$kind": "defschema", "name": "com.acme/PayEvent@1",
   "variant": {"Order": "com.acme/Order@1", "Receipt": "sys/EffectReceiptEnvelope@1"}},
  {"$kind": "defschema", "name": "com.acme/PayState@1",
   "schema": {"type": "object", "additionalProperties": false, "required": ["stage", "payments", "shipping"],
              "properties": {"stage": {"type": "string"}, "payments": {"type": "string"}, "shipping": {"type": "string"},
                             "charge_id": {"type": "string"}, "charge_attempts": {"type": "integer"}, "why": {"type": "string"}}}}
]`

const sagaWorkflow = `[
  {"$kind": "defmodule", "name": "com.acme/pay@1",
   "runtime": {"kind": "wasm", "artifact": "pay.wasm", "source": "../wasm",
               "hash": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}},
  {"$kind": "defworkflow", "name": "com.acme/pay.step@1", "state": "com.acme/PayState@1", "event": "com.acme/PayEvent@1",
   "key_schema": "com.acme/PayKey@1", "effects_emitted": ["sys/http.request@2"],
   "impl": {"module": "com.acme/pay@1", "entrypoint": "step"}}
]`

const sagaManifest = `{"$kind": "manifest", "name": "com.acme/pay",
 "routing": {"subscriptions": [{"event": "com.acme/Order@1", "workflow": "com.acme/pay.step@1", "key_field": "key"}]}}`

// services are the loopback payments and shipping services the saga
// calls: a charge answers 500 once and then 201, shipping refuses with
// 400, a refund answers 200. Each request's path and Idempotency-Key are
// recorded.
type services struct {
	mu   sync.Mutex
	seen []string // "PATH KEY"
}

func (s *services) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
	charges := 0
	for _, l := range s.seen {
		if strings.HasPrefix(l, "/charges ") {
			charges++
		}
	}
	s.mu.Unlock()
	switch {
	case r.URL.Path == "/charges" && charges == 1:
		w.WriteHeader(http.StatusInternalServerError)
	case r.URL.Path == "/charges":
		if !strings.Contains(string(body), `"amount":1250`) || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"ch_1"}`)
	case r.URL.Path == "/shipments":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"address incomplete"}`)
	case r.URL.Path == "/charges/ch_1/refund":
		fmt.Fprint(w, `{"refunded":true}`)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// TestTypedHTTPSaga builds a wasm workflow from source that uses the sdk's
// typed HTTP (package sdk/httpcall: JSON, Retry, Send, Result, Response.JSON) and runs it
// in a real daemon against loopback services: the charge's 500 is retried
// under the call's policy, the shipping 400 is not retried and the saga
// refunds; every request but the refund bears its intent hash as
// Idempotency-Key, the same on the retry, and the refund keeps its own.
func TestTypedHTTPSaga(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pay")
	if r := aosdIn(t, wd, "new", dir, "--module", "com.acme/pay"); r.code != 0 {
		t.Fatalf("aosd new: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, text := range map[string]string{"pay.go": sagaGo, "manifest/schemas.json": sagaSchemas,
		"manifest/workflow.json": sagaWorkflow, "manifest/manifest.json": sagaManifest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := aosdIn(t, dir, "build", "manifest"); r.code != 0 {
		t.Fatalf("aosd build: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	svc := &services{}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	world := newWorld(t)
	ok(t, world, "apply", filepath.Join(dir, "manifest"))
	startDaemon(t, world)
	order := fmt.Sprintf(`{"key":"o-1","amount":1250,"payments":%q,"shipping":%q}`, srv.URL, srv.URL)
	if out := ok(t, world, "send", "com.acme/Order@1", order, "--wait", "60s"); strings.Contains(out, "not quiescent") {
		t.Fatalf("send: %s", out)
	}
	var cell struct {
		State map[string]any `json:"state"`
	}
	jsonOut(t, world, &cell, "cells", "show", "com.acme/pay.step@1", "o-1")
	st := cell.State
	if st["stage"] != "refunded" || st["charge_id"] != "ch_1" || st["charge_attempts"] != float64(2) ||
		st["why"] != "shipping: status 400" {
		t.Fatalf("saga state: %v", st)
	}

	svc.mu.Lock()
	seen := append([]string(nil), svc.seen...)
	svc.mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("requests: %q, want 2 charges, 1 shipment, 1 refund", seen)
	}
	charge1, charge2, ship, refund := strings.Fields(seen[0]), strings.Fields(seen[1]), strings.Fields(seen[2]), strings.Fields(seen[3])
	if charge1[0] != "/charges" || charge2[0] != "/charges" || ship[0] != "/shipments" || refund[0] != "/charges/ch_1/refund" {
		t.Fatalf("requests: %q", seen)
	}
	if !strings.HasPrefix(charge1[1], "sha256:") || charge2[1] != charge1[1] || !strings.HasPrefix(ship[1], "sha256:") || ship[1] == charge1[1] {
		t.Errorf("Idempotency-Keys: %q (want the charge's intent hash twice, then the shipment's)", seen)
	}
	if refund[1] != "refund-ch_1" {
		t.Errorf("the refund's own Idempotency-Key was not kept: %q", refund[1])
	}
	// The keys are the intent hashes: the trace names them, and tells the
	// story: each call, its attempts, each status, each state change.
	tr := ok(t, world, "trace", "com.acme/pay.step@1", "o-1")
	for _, want := range []string{
		"intent   sys/http.request@2 POST " + srv.URL + `/charges (ref "charge"): ` + charge1[1] + ", opened by step ",
		`sys/http.request@2 (ref "charge") attempt 1 sent`,
		`sys/http.request@2 (ref "charge") attempt 2 sent after 20 ms (attempt 1: status 500)`,
		`sys/http.request@2 ok: HTTP 201, attempt 2 from aos/builtin (ref "charge") for ` + charge1[1],
		"sys/http.request@2 POST " + srv.URL + `/shipments (ref "ship"): ` + ship[1],
		`sys/http.request@2 ok: HTTP 400, attempt 1 from aos/builtin (ref "ship")`,
		`(sys/http.request@2 ok (ref "ship")) -> state sha256:`,
		`~ /stage "refunding"`,
		`+ /why "shipping: status 400"`,
		`~ /stage "refunded"`,
	} {
		if !strings.Contains(tr, want) {
			t.Errorf("the trace lacks %q:\n%s", want, tr)
		}
	}
}
