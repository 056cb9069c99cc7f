// Package httpcall is typed HTTP for workflows: the sys/http.request@2
// effect's request, retry policy, response and failure as Go types, with
// helpers for JSON bodies. A step asks for a call with Send; the built-in
// executor makes it after the step is durable, retrying as the call's
// policy says, and the receipt comes back to the cell, read with Result.
// docs/sdk.md ("Typed HTTP") says what every field and outcome means.
//
// It is a package of its own, beside the sdk rather than in it, so that
// only the wasm guests that make HTTP calls link it (and encoding/json):
// every other module keeps its bytes, and so its hash, whatever is added
// here.
//
// Its types are the sys/ shapes of the effect, here rather than in
// modules/sys: a guest's bytes include a build ID hashed from the sources
// of every package it links, so a shape added to modules/sys would change
// every module's hash, HTTP or not.
//
// What it must not touch: what the sdk must not (it is linked into wasm
// guests): the standard library and the sdk only; no clock, randomness or
// I/O.
package httpcall

import (
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/sdk"
)

// The typed HTTP effect and its schemas (schemas/sys.go). A workflow lists
// Effect in effects_emitted.
const (
	Effect         = "sys/http.request@2"
	SchemaParams   = "sys/HttpRequestParams@2"
	SchemaResponse = "sys/HttpRequestReceipt@2"
)

// Request is sys/HttpRequestParams@2: one HTTP call and its retry policy.
// Method and URL are required; the rest may be left zero. Build one by
// hand, or with JSON for a JSON body.
type Request struct {
	Method       string            `cbor:"method"`
	URL          string            `cbor:"url"`
	Headers      map[string]string `cbor:"headers,omitempty"`
	Body         []byte            `cbor:"body,omitempty"`
	TimeoutMs    uint64            `cbor:"timeout_ms,omitempty"`     // per attempt; 0: 30 s, at most 5 min
	MaxBodyBytes uint64            `cbor:"max_body_bytes,omitempty"` // 0: 1 MiB, at most 16 MiB
	Retry        *Retry            `cbor:"retry,omitempty"`          // nil: the default policy
}

// Retry is the call's retry policy; a zero field takes its default: 3
// attempts in all, 100 ms before the second, each wait twice the last, at
// most 5 s, retrying network errors, timeouts and the statuses 429, 502,
// 503 and 504.
type Retry struct {
	MaxAttempts      uint64   `cbor:"max_attempts,omitempty"`       // attempts in all, first included; default 3, at most 20
	InitialBackoffMs uint64   `cbor:"initial_backoff_ms,omitempty"` // wait before the second attempt; default 100
	MaxBackoffMs     uint64   `cbor:"max_backoff_ms,omitempty"`     // cap on any wait; default 5000
	Multiplier       uint64   `cbor:"multiplier,omitempty"`         // each wait is the last times this; default 2
	RetryStatuses    []uint64 `cbor:"retry_statuses,omitempty"`     // statuses that retry; default 429, 502, 503, 504
	NoStatusRetry    bool     `cbor:"no_status_retry,omitempty"`    // retry no status (network errors still retry)
}

// Response is sys/HttpRequestReceipt@2, the payload of an "ok" receipt:
// the response the last attempt got, whatever its status, and how many
// attempts were made.
type Response struct {
	Status    uint64            `cbor:"status"`
	Headers   map[string]string `cbor:"headers"` // names lower-case; repeated values joined with ", "
	Body      []byte            `cbor:"body"`
	Truncated bool              `cbor:"truncated,omitempty"` // the body was cut at max_body_bytes
	Attempts  uint64            `cbor:"attempts"`
}

// failure is the payload of an "error" or "timeout" receipt.
type failure struct {
	Attempts uint64 `cbor:"attempts"`
	Error    string `cbor:"error"`
}

// Success reports whether the response's status is 2xx.
func (r *Response) Success() bool { return r.Status >= 200 && r.Status < 300 }

// JSON decodes the response body as JSON into v (a pointer).
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("http response body (status %d): %w", r.Status, err)
	}
	return nil
}

// Error is what an "error" or "timeout" receipt says: no attempt got a
// response (the payload {"attempts", "error"}).
type Error struct {
	Status   string // the receipt status: sdk.StatusError or sdk.StatusTimeout
	Attempts uint64
	Reason   string // the last attempt's error
}

func (e *Error) Error() string {
	return fmt.Sprintf("http request %s after %d attempts: %s", e.Status, e.Attempts, e.Reason)
}

// JSON is a Request whose body is body encoded with encoding/json, with
// Content-Type and Accept set to application/json. A nil body sends none
// (Accept is still set). A body that cannot be encoded is an error naming
// the request.
func JSON(method, url string, body any) (Request, error) {
	req := Request{Method: method, URL: url, Headers: map[string]string{"Accept": "application/json"}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return Request{}, fmt.Errorf("%s %s: json body: %w", method, url, err)
		}
		req.Body = b
		req.Headers["Content-Type"] = "application/json"
	}
	return req, nil
}

// Send asks for sys/http.request@2 from the step c: the built-in executor
// makes the call after the step commits, retrying as req.Retry says, and
// sends the intent hash as Idempotency-Key unless req.Headers sets that
// header. Its receipt comes back to this cell; read it with Result. Use
// sdk.IssuerRef to tell the receipts of several calls apart.
func Send(c *sdk.Ctx, req Request, opts ...sdk.EffectOption) {
	c.Effect(Effect, req, opts...)
}

// Result reads a sys/http.request@2 receipt: the response (any status, a
// 500 included) for an "ok" receipt, an *Error when no attempt got a
// response, or an error if the receipt is for another effect or its
// payload does not decode.
func Result(r *sdk.ReceiptEnvelope) (*Response, error) {
	if r.Effect != Effect {
		return nil, fmt.Errorf("receipt of intent %s is for %s, not %s", r.IntentHash, r.Effect, Effect)
	}
	if r.OK() {
		resp := new(Response)
		if err := r.DecodePayload(resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
	var f failure
	if err := r.DecodePayload(&f); err != nil {
		return nil, err
	}
	return nil, &Error{Status: r.Status, Attempts: f.Attempts, Reason: f.Error}
}
