package sdk

import (
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/modules/sys"
)

// EffectHTTPRequest is the typed HTTP effect, sys/http.request@2. A
// workflow lists it in effects_emitted and emits it with Ctx.HTTP.
const EffectHTTPRequest = sys.EffectHTTPRequest

// HTTPRequest is sys/HttpRequestParams@2 (fields: sys.HTTPRequest): one
// HTTP call, made by the built-in executor after the step commits, with its
// retry policy. Method and URL are required; the rest may be left zero.
// Build one by hand or with JSONRequest.
type HTTPRequest sys.HTTPRequest

// HTTPRetry is the call's retry policy (fields: sys.HTTPRetry); a zero
// field takes its default: 3 attempts in all, 100 ms before the second,
// each wait twice the last, at most 5 s, retrying network errors,
// timeouts and the statuses 429, 502, 503 and 504. docs/sdk.md says what
// each status becomes.
type HTTPRetry = sys.HTTPRetry

// HTTPResponse is sys/HttpRequestReceipt@2 (fields: sys.HTTPResponse), the
// payload of an "ok" sys/http.request@2 receipt: the response the last
// attempt got, whatever its status, and how many attempts were made.
type HTTPResponse sys.HTTPResponse

// Success reports whether the response's status is 2xx.
func (r *HTTPResponse) Success() bool { return r.Status >= 200 && r.Status < 300 }

// JSON decodes the response body as JSON into v (a pointer).
func (r *HTTPResponse) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("http response body (status %d): %w", r.Status, err)
	}
	return nil
}

// HTTPError is what an "error" or "timeout" sys/http.request@2 receipt
// says: no attempt got a response (the payload {"attempts", "error"}).
type HTTPError struct {
	Status   string // the receipt status: StatusError or StatusTimeout
	Attempts uint64
	Reason   string // the last attempt's error
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("http request %s after %d attempts: %s", e.Status, e.Attempts, e.Reason)
}

// JSONRequest is an HTTPRequest whose body is body encoded as JSON, with
// Content-Type and Accept set to application/json. A body that cannot be
// encoded is an error; a nil body sends none.
func JSONRequest(method, url string, body any) (HTTPRequest, error) {
	req := HTTPRequest{Method: method, URL: url, Headers: map[string]string{"Accept": "application/json"}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return HTTPRequest{}, fmt.Errorf("%s %s: json body: %w", method, url, err)
		}
		req.Body = b
		req.Headers["Content-Type"] = "application/json"
	}
	return req, nil
}

// HTTP asks for sys/http.request@2: the built-in executor makes the call
// after the step commits, retrying as req.Retry says, and sends the intent
// hash as Idempotency-Key unless req.Headers sets that header. Its receipt
// comes back to this cell; read it with ReceiptEnvelope.HTTPResponse. Use
// IssuerRef to tell the receipts of several calls apart.
func (c *Ctx) HTTP(req HTTPRequest, opts ...EffectOption) {
	c.Effect(EffectHTTPRequest, sys.HTTPRequest(req), opts...)
}

// HTTPResponse reads a sys/http.request@2 receipt: the response (any
// status, a 500 included) for an "ok" receipt, an *HTTPError when no
// attempt got a response, or an error if the receipt is for another
// effect or its payload does not decode.
func (r *ReceiptEnvelope) HTTPResponse() (*HTTPResponse, error) {
	if r.Effect != EffectHTTPRequest {
		return nil, fmt.Errorf("receipt of intent %s is for %s, not %s", r.IntentHash, r.Effect, EffectHTTPRequest)
	}
	if r.OK() {
		resp := new(HTTPResponse)
		if err := r.DecodePayload((*sys.HTTPResponse)(resp)); err != nil {
			return nil, err
		}
		return resp, nil
	}
	var f sys.HTTPFailure
	if err := r.DecodePayload(&f); err != nil {
		return nil, err
	}
	return nil, &HTTPError{Status: r.Status, Attempts: f.Attempts, Reason: f.Error}
}
