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
// What it must not touch: what the sdk must not (it is linked into wasm
// guests): the standard library, the sdk and modules/sys only; no clock,
// randomness or I/O.
package httpcall

import (
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/sdk"
)

// Effect is the typed HTTP effect, sys/http.request@2. A workflow lists it
// in effects_emitted.
const Effect = sys.EffectHTTPRequest

// Request is sys/HttpRequestParams@2 (fields: sys.HTTPRequest): one HTTP
// call and its retry policy. Method and URL are required; the rest may be
// left zero. Build one by hand, or with JSON for a JSON body.
type Request = sys.HTTPRequest

// Retry is the call's retry policy (fields: sys.HTTPRetry); a zero field
// takes its default: 3 attempts in all, 100 ms before the second, each
// wait twice the last, at most 5 s, retrying network errors, timeouts and
// the statuses 429, 502, 503 and 504.
type Retry = sys.HTTPRetry

// Response is sys/HttpRequestReceipt@2 (fields: sys.HTTPResponse), the
// payload of an "ok" receipt: the response the last attempt got, whatever
// its status, and how many attempts were made.
type Response sys.HTTPResponse

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
		if err := r.DecodePayload((*sys.HTTPResponse)(resp)); err != nil {
			return nil, err
		}
		return resp, nil
	}
	var f sys.HTTPFailure
	if err := r.DecodePayload(&f); err != nil {
		return nil, err
	}
	return nil, &Error{Status: r.Status, Attempts: f.Attempts, Reason: f.Error}
}
