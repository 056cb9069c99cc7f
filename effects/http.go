package effects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	neturl "net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// AttemptExecutor is an Executor that runs its own retries, by a policy
// that comes with each call: the dispatcher does not retry it. first is the
// number the first attempt of this run takes (above 1 when the intent was
// published again after a restart); starting is called before each attempt
// is made and returns once the attempt is on the journal, so an attempt
// cut short by a crash is still counted. It returns the receipt, or an
// error the dispatcher settles as "error", and the number of the last
// attempt made.
type AttemptExecutor interface {
	Executor
	ExecuteAttempts(ctx context.Context, it kernel.OpenIntent, first uint64, starting func(AttemptStart)) (receipts.Status, []byte, uint64, error)
}

// AttemptStart is what is journaled before an attempt: a stream frame of
// seq Attempt with payload {"attempt", "last_error"?, "waited_ms"?,
// "resumed"?}.
type AttemptStart struct {
	Attempt   uint64
	LastError string        // why the attempt before failed ("" for a run's first)
	Waited    time.Duration // the pause since that failure
	Resumed   bool          // the first attempt after a restart: the one before may have been sent
}

// IdempotencyHeader is the header the built-in HTTP executors send the
// intent hash in, unless the call sets it itself: a server that keys on it
// performs a request re-sent after a retry or a restart once.
const IdempotencyHeader = "Idempotency-Key"

// The default retry policy of sys/http.request@2 (docs/sdk.md).
const (
	defaultHTTPAttempts   = 3
	defaultHTTPBackoff    = 100 * time.Millisecond
	defaultHTTPMaxBackoff = 5 * time.Second
	defaultHTTPMultiplier = 2
)

// defaultRetryStatuses are the statuses sys/http.request@2 retries when
// the call names none: too many requests, and the gateway answers that
// say the server behind did not take the request.
var defaultRetryStatuses = []uint64{429, 502, 503, 504}

// HTTP2 performs sys/http.request@2: sys/http.request@1 with the call's
// own retry policy. It retries network errors and per-attempt timeouts,
// and the statuses the policy lists; any other response, or the last
// attempt's, settles the intent "ok" with that status and the number of
// attempts made. When no attempt got a response the receipt is "error"
// ("timeout" if the last attempt timed out) with {"attempts", "error"}.
type HTTP2 struct{ Client *http.Client }

var _ AttemptExecutor = HTTP2{}

// httpPolicy is a call's retry policy with its defaults filled in.
type httpPolicy struct {
	attempts   uint64
	backoff    time.Duration
	maxBackoff time.Duration
	multiplier uint64
	statuses   []uint64
}

func httpPolicyOf(p map[string]any) httpPolicy {
	pol := httpPolicy{attempts: defaultHTTPAttempts, backoff: defaultHTTPBackoff, maxBackoff: defaultHTTPMaxBackoff,
		multiplier: defaultHTTPMultiplier, statuses: defaultRetryStatuses}
	r, _ := p["retry"].(map[string]any)
	if n, ok := uintField(r, "max_attempts"); ok && n > 0 {
		pol.attempts = n
	}
	if n, ok := uintField(r, "initial_backoff_ms"); ok {
		pol.backoff = time.Duration(n) * time.Millisecond
	}
	if n, ok := uintField(r, "max_backoff_ms"); ok {
		pol.maxBackoff = time.Duration(n) * time.Millisecond
	}
	if n, ok := uintField(r, "multiplier"); ok && n > 0 {
		pol.multiplier = n
	}
	if list, ok := r["retry_statuses"].([]any); ok && len(list) > 0 {
		pol.statuses = nil
		for _, v := range list {
			if n, ok := uintValue(v); ok {
				pol.statuses = append(pol.statuses, n)
			}
		}
	}
	if b, _ := r["no_status_retry"].(bool); b {
		pol.statuses = nil
	}
	pol.maxBackoff = max(pol.maxBackoff, pol.backoff)
	return pol
}

// retriesStatus reports whether a response with this status is retried.
func (p httpPolicy) retriesStatus(status int) bool {
	return slices.Contains(p.statuses, uint64(status))
}

// wait is the pause after failed attempt n (1-based within the policy):
// backoff times multiplier^(n-1), capped at maxBackoff, or what the
// server's Retry-After asked if that is longer (still capped).
func (p httpPolicy) wait(n uint64, retryAfter time.Duration) time.Duration {
	d := p.backoff
	for i := uint64(1); i < n && d < p.maxBackoff; i++ {
		d *= time.Duration(p.multiplier)
	}
	return min(max(d, retryAfter), p.maxBackoff)
}

// Execute implements Executor: one run from attempt 1, no reports.
func (h HTTP2) Execute(ctx context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error) {
	st, b, _, err := h.ExecuteAttempts(ctx, it, 1, nil)
	return st, b, err
}

// ExecuteAttempts implements AttemptExecutor. Attempts made before a
// restart (first > 1) count against max_attempts, but a run always makes
// at least one.
func (h HTTP2) ExecuteAttempts(ctx context.Context, it kernel.OpenIntent, first uint64, starting func(AttemptStart)) (receipts.Status, []byte, uint64, error) {
	p, err := decodeParams(it)
	if err != nil {
		return "", nil, first, err
	}
	pol := httpPolicyOf(p)
	first = max(first, 1)
	next := AttemptStart{Attempt: first, Resumed: first > 1}
	for attempt := first; ; attempt++ {
		if starting != nil {
			starting(next)
			if ctx.Err() != nil {
				return "", nil, attempt, ctx.Err()
			}
		}
		res, failure, retryAfter := httpAttempt(ctx, h.Client, it, p)
		if ctx.Err() != nil {
			return "", nil, attempt, ctx.Err()
		}
		var why string
		switch {
		case failure != nil:
			why = failure.Error()
		case pol.retriesStatus(res.status):
			why = fmt.Sprintf("status %d", res.status)
		default:
			return receipts.StatusOK, res.payload(attempt), attempt, nil
		}
		if attempt >= pol.attempts {
			if failure == nil {
				return receipts.StatusOK, res.payload(attempt), attempt, nil
			}
			st := receipts.StatusError
			if errors.Is(failure, errAttemptTimeout) {
				st = receipts.StatusTimeout
			}
			return st, schemas.MustMarshal(map[string]any{"attempts": attempt, "error": why}), attempt, nil
		}
		if errors.Is(failure, errBadRequest) {
			return receipts.StatusError, schemas.MustMarshal(map[string]any{"attempts": attempt, "error": why}), attempt, nil
		}
		wait := pol.wait(attempt-first+1, retryAfter)
		next = AttemptStart{Attempt: attempt + 1, LastError: why, Waited: wait}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", nil, attempt, ctx.Err()
		case <-t.C:
		}
	}
}

var (
	errAttemptTimeout = errors.New("no response in time")
	errBadRequest     = errors.New("request cannot be built")
)

// httpResult is one attempt's response.
type httpResult struct {
	status    int
	headers   map[string]any
	body      []byte
	truncated bool
}

func (r httpResult) payload(attempts uint64) []byte {
	out := map[string]any{"status": uint64(r.status), "headers": r.headers, "body": r.body, "attempts": attempts}
	if r.truncated {
		out["truncated"] = true
	}
	return schemas.MustMarshal(out)
}

// httpAttempt sends the request once. A failure wraps errAttemptTimeout
// (no response within timeout_ms), errBadRequest (never sent: a bad
// method or URL, not worth retrying) or is a network error.
func httpAttempt(ctx context.Context, client *http.Client, it kernel.OpenIntent, p map[string]any) (httpResult, error, time.Duration) {
	timeout := defaultHTTPTimeout
	if ms, ok := uintField(p, "timeout_ms"); ok && ms > 0 {
		timeout = min(time.Duration(ms)*time.Millisecond, maxHTTPTimeout)
	}
	limit := int64(defaultHTTPBody)
	if n, ok := uintField(p, "max_body_bytes"); ok && n > 0 {
		limit = min(int64(n), maxHTTPBody)
	}
	method, _ := p["method"].(string)
	url, _ := p["url"].(string)
	body, _ := p["body"].([]byte)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, strings.ToUpper(method), url, bytes.NewReader(body))
	if err != nil {
		return httpResult{}, fmt.Errorf("%w: %v", errBadRequest, err), 0
	}
	setHeaders(req, p, it)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return httpResult{}, fmt.Errorf("%w: %s %s: no response within %s", errAttemptTimeout, method, url, timeout), 0
		}
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the method and URL
		}
		return httpResult{}, fmt.Errorf("%s %s: %v", method, url, err), 0
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return httpResult{}, fmt.Errorf("%w: %s %s: body not read within %s", errAttemptTimeout, method, url, timeout), 0
		}
		return httpResult{}, fmt.Errorf("%s %s: read body: %v", method, url, err), 0
	}
	res := httpResult{status: resp.StatusCode, headers: map[string]any{}, body: data}
	if int64(len(data)) > limit {
		res.body, res.truncated = data[:limit], true
	}
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		res.headers[strings.ToLower(k)] = strings.Join(resp.Header.Values(k), ", ")
	}
	return res, nil, retryAfter(resp.Header.Get("Retry-After"))
}

// retryAfter reads a Retry-After header given in seconds (an HTTP date,
// or nothing, is 0: the policy's own wait applies).
func retryAfter(v string) time.Duration {
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Second
}

// setHeaders copies the call's headers onto req and adds the intent hash
// as Idempotency-Key unless the call set that header (in any case).
func setHeaders(req *http.Request, p map[string]any, it kernel.OpenIntent) {
	hs, _ := p["headers"].(map[string]any)
	for k, v := range hs {
		if s, ok := v.(string); ok {
			req.Header.Set(k, s)
		}
	}
	if req.Header.Get(IdempotencyHeader) == "" {
		req.Header.Set(IdempotencyHeader, it.Hash.String())
	}
}
