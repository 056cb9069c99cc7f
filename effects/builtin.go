package effects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Builtins returns the built-in executors over the world's CAS.
func Builtins(store cas.Store, client *http.Client) map[string]Executor {
	if client == nil {
		client = &http.Client{}
	}
	return map[string]Executor{
		"sys/timer.set@1":    Timer{},
		"sys/http.request@1": HTTP{Client: client},
		"sys/http.request@2": HTTP2{Client: client},
		"sys/blob.put@1":     BlobPut{Store: store},
		"sys/blob.get@1":     BlobGet{Store: store},
	}
}

// BuiltinEffects are the effects Builtins executes, sorted: what the
// built-in executors' key is trusted for.
func BuiltinEffects() []string { return EffectsOf(Builtins(nil, nil)) }

// EffectsOf lists the effects of an executor map, sorted.
func EffectsOf(exs map[string]Executor) []string {
	return slices.Sorted(maps.Keys(exs))
}

func decodeParams(it kernel.OpenIntent) (map[string]any, error) {
	v, err := schemas.Decode(it.Params)
	if err != nil {
		return nil, fmt.Errorf("intent %s: params: %w", it.Hash, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("intent %s: params are not an object", it.Hash)
	}
	return m, nil
}

func uintField(m map[string]any, k string) (uint64, bool) { return uintValue(m[k]) }

func uintValue(v any) (uint64, bool) {
	switch n := v.(type) {
	case uint64:
		return n, true
	case int64:
		if n >= 0 {
			return uint64(n), true
		}
	}
	return 0, false
}

// Timer fires sys/timer.set@1 at deliver_at_ns (wall clock, Unix ns). A
// timer pending at a crash fires after restart, because the world publishes
// every intent still in flight when it reopens; one already due fires at once.
type Timer struct{}

// Execute implements Executor.
func (Timer) Execute(ctx context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error) {
	p, err := decodeParams(it)
	if err != nil {
		return "", nil, err
	}
	at, _ := uintField(p, "deliver_at_ns")
	if wait := time.Until(time.Unix(0, int64(at))); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", nil, ctx.Err()
		case <-t.C:
		}
	}
	out := map[string]any{"delivered_at_ns": uint64(time.Now().UnixNano())}
	if k, ok := p["key"].(string); ok {
		out["key"] = k
	}
	return receipts.StatusOK, schemas.MustMarshal(out), nil
}

// HTTP performs sys/http.request@1 with net/http. Transport failures are
// transient (retried per the effect's policy, by default 3 attempts); any
// response is a result, whatever its status code. The intent hash goes as
// Idempotency-Key unless the call sets that header. Bodies beyond max_body_bytes (default 1 MiB, at most 16 MiB)
// are cut and marked truncated; timeout_ms defaults to 30 s, at most 5 min.
type HTTP struct{ Client *http.Client }

const (
	defaultHTTPTimeout = 30 * time.Second
	maxHTTPTimeout     = 5 * time.Minute
	defaultHTTPBody    = 1 << 20
	maxHTTPBody        = 16 << 20
)

// Execute implements Executor.
func (h HTTP) Execute(ctx context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error) {
	p, err := decodeParams(it)
	if err != nil {
		return "", nil, err
	}
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
		return "", nil, fmt.Errorf("intent %s: request: %w", it.Hash, err)
	}
	setHeaders(req, p, it)
	resp, err := h.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return receipts.StatusTimeout, schemas.MustMarshal(map[string]any{"error": fmt.Sprintf("no response within %s", timeout)}), nil
		}
		return "", nil, fmt.Errorf("%w: %s %s: %v", ErrTransient, method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return "", nil, fmt.Errorf("%w: read body of %s: %v", ErrTransient, url, err)
	}
	truncated := int64(len(data)) > limit
	if truncated {
		data = data[:limit]
	}
	headers := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(resp.Header)) {
		headers[strings.ToLower(k)] = strings.Join(resp.Header.Values(k), ", ")
	}
	out := map[string]any{"status": uint64(resp.StatusCode), "headers": headers, "body": data}
	if truncated {
		out["truncated"] = true
	}
	return receipts.StatusOK, schemas.MustMarshal(out), nil
}

// BlobPut stores bytes in the CAS (sys/blob.put@1).
type BlobPut struct{ Store cas.Store }

// Execute implements Executor.
func (b BlobPut) Execute(_ context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error) {
	p, err := decodeParams(it)
	if err != nil {
		return "", nil, err
	}
	data, _ := p["bytes"].([]byte)
	h, err := b.Store.Put(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: blob put: %v", ErrTransient, err)
	}
	return receipts.StatusOK, schemas.MustMarshal(map[string]any{"blob_ref": h.String(), "size": uint64(len(data))}), nil
}

// BlobGet reads bytes from the CAS (sys/blob.get@1). A missing blob settles
// the intent with status "error".
type BlobGet struct{ Store cas.Store }

// Execute implements Executor.
func (b BlobGet) Execute(_ context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error) {
	p, err := decodeParams(it)
	if err != nil {
		return "", nil, err
	}
	ref, _ := p["blob_ref"].(string)
	h, err := schemas.ParseHash(ref)
	if err != nil {
		return "", nil, err
	}
	data, err := b.Store.Get(h)
	if errors.Is(err, cas.ErrNotFound) {
		return receipts.StatusError, schemas.MustMarshal(map[string]any{"error": "no blob " + ref}), nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("%w: blob get: %v", ErrTransient, err)
	}
	return receipts.StatusOK, schemas.MustMarshal(map[string]any{"bytes": data, "size": uint64(len(data))}), nil
}
