package httpcall_test

import (
	"errors"
	"testing"

	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
	"github.com/aos-kernel/aos/sdk/httpcall"
)

// TestJSONRequestValidates: a request JSON builds, with a retry policy, is
// a valid sys/HttpRequestParams@2 carrying the JSON body.
func TestJSONRequestValidates(t *testing.T) {
	req, err := httpcall.JSON("POST", "https://pay.example/charges", map[string]any{"order": "o-1", "amount": 1250})
	if err != nil {
		t.Fatal(err)
	}
	req.Retry = &httpcall.Retry{MaxAttempts: 5, InitialBackoffMs: 200, RetryStatuses: []uint64{500, 503}}
	b, err := sdk.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.NewRegistry().Validate(httpcall.SchemaParams, b); err != nil {
		t.Fatalf("params do not validate: %v", err)
	}
	js, _ := schemas.ToJSON(b)
	want := `{"body":"eyJhbW91bnQiOjEyNTAsIm9yZGVyIjoiby0xIn0=","headers":{"Accept":"application/json","Content-Type":"application/json"},` +
		`"method":"POST","retry":{"initial_backoff_ms":200,"max_attempts":5,"retry_statuses":[500,503]},"url":"https://pay.example/charges"}`
	if string(js) != want {
		t.Errorf("params\n%s\nwant\n%s", js, want)
	}
	if _, err := httpcall.JSON("POST", "u", func() {}); err == nil {
		t.Error("a body JSON cannot encode was taken")
	}
}

// TestResult reads the three kinds of sys/http.request@2 receipt: a
// response (a 500 is one), a failure, another effect's.
func TestResult(t *testing.T) {
	ok := sdk.ReceiptEnvelope{Effect: httpcall.Effect, Status: sdk.StatusOK,
		Payload: mustMarshal(t, httpcall.Response{Status: 500, Headers: map[string]string{}, Body: []byte(`{"id":"ch_1"}`), Attempts: 3})}
	resp, err := httpcall.Result(&ok)
	if err != nil || resp.Status != 500 || resp.Attempts != 3 || resp.Success() {
		t.Fatalf("ok receipt: %+v %v", resp, err)
	}
	var body struct{ ID string }
	if err := resp.JSON(&body); err != nil || body.ID != "ch_1" {
		t.Fatalf("json body: %+v %v", body, err)
	}
	failed := sdk.ReceiptEnvelope{Effect: httpcall.Effect, Status: sdk.StatusTimeout,
		Payload: mustMarshal(t, map[string]any{"attempts": uint64(2), "error": "no response within 1s"})}
	_, err = httpcall.Result(&failed)
	var he *httpcall.Error
	if !errors.As(err, &he) || he.Attempts != 2 || he.Status != sdk.StatusTimeout || he.Error() != "http request timeout after 2 attempts: no response within 1s" {
		t.Fatalf("failed receipt: %v", err)
	}
	other := sdk.ReceiptEnvelope{Effect: sdk.EffectTimerSet, IntentHash: "sha256:ab", Status: sdk.StatusOK}
	if _, err := httpcall.Result(&other); err == nil || err.Error() != "receipt of intent sha256:ab is for sys/timer.set@1, not sys/http.request@2" {
		t.Fatalf("timer receipt: %v", err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := sdk.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShapesMatchSchemas: Request and Response validate against their
// built-in schemas, filled and with every optional field left out, and a
// Response decodes what the executor writes.
func TestShapesMatchSchemas(t *testing.T) {
	reg := schemas.NewRegistry()
	full := httpcall.Request{Method: "POST", URL: "https://x/y", Headers: map[string]string{"a": "b"}, Body: []byte("{}"), TimeoutMs: 9, MaxBodyBytes: 10,
		Retry: &httpcall.Retry{MaxAttempts: 4, InitialBackoffMs: 50, MaxBackoffMs: 800, Multiplier: 3, RetryStatuses: []uint64{500}, NoStatusRetry: true}}
	for _, v := range []any{full, httpcall.Request{Method: "GET", URL: "u"}, httpcall.Request{Method: "GET", URL: "u", Retry: &httpcall.Retry{}}} {
		if err := reg.Validate(httpcall.SchemaParams, mustMarshal(t, v)); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
	for _, v := range []httpcall.Response{{Status: 200, Headers: map[string]string{}, Body: []byte{}, Attempts: 1}, {Status: 503, Headers: map[string]string{"a": "b"}, Body: []byte("x"), Truncated: true, Attempts: 3}} {
		if err := reg.Validate(httpcall.SchemaResponse, mustMarshal(t, v)); err != nil {
			t.Errorf("%+v: %v", v, err)
		}
	}
}
