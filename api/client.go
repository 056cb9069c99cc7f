package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/views"
)

// Client is a Backend over the HTTP API of a running daemon.
type Client struct {
	Base  string // e.g. http://127.0.0.1:7878
	Token string
	HTTP  *http.Client // default: no overall timeout (journal --follow streams)
}

// ErrTokenRefused: the server answered 401, refusing the client's token.
var ErrTokenRefused = errors.New("api: the server refuses the token")

// Ping asks the server for its status (GET /v1/status) and says whether it
// answers: nil for 200, an error wrapping ErrTokenRefused for 401, and an
// error naming the status for any other.
func (c *Client) Ping(ctx context.Context) error {
	resp, err := c.do(ctx, "GET", "/v1/status", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusUnauthorized:
		return fmt.Errorf("GET /v1/status: HTTP 401: %w", ErrTokenRefused)
	}
	return fmt.Errorf("GET /v1/status: HTTP %d", resp.StatusCode)
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", c.Base, err)
	}
	return resp, nil
}

// call does one request and decodes a 2xx answer into out, or an error body
// into an *Error (and, for a refused apply, into out as well).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("daemon at %s: read answer: %w", c.Base, err)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, b, out)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("daemon at %s: %s %s: bad answer: %w", c.Base, method, path, err)
	}
	return nil
}

func decodeError(status int, b []byte, out any) error {
	var eb errorBody
	if json.Unmarshal(b, &eb) != nil || eb.Error == nil {
		return &Error{Status: status, Code: CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", status, strings.TrimSpace(string(b)))}
	}
	eb.Error.Status = status
	if out != nil {
		_ = json.Unmarshal(b, out)
	}
	return eb.Error
}

// Status implements Reader.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var s Status
	if err := c.call(ctx, "GET", "/v1/status", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Cells implements Reader.
func (c *Client) Cells(ctx context.Context, workflow string, q CellsQuery) (*CellPage, error) {
	var out CellPage
	v := url.Values{}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if len(q.Status) > 0 {
		v.Set("status", strings.Join(q.Status, ","))
	}
	if q.HasKey {
		v.Set("key", q.Key)
	}
	if q.Pin != "" {
		v.Set("pin", q.Pin)
	}
	p := "/v1/cells/" + url.PathEscape(workflow)
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	if err := c.call(ctx, "GET", p, nil, &out); err != nil {
		return nil, err
	}
	if out.Cells == nil {
		out.Cells = []CellInfo{}
	}
	return &out, nil
}

// Cell implements Reader.
func (c *Client) Cell(ctx context.Context, workflow, key string) (*CellView, error) {
	var out CellView
	if err := c.call(ctx, "GET", "/v1/cells/"+url.PathEscape(workflow)+"/"+escapeKey(key), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// escapeKey escapes a key for the last path segment; an empty key (unkeyed
// workflow) travels as "null".
func escapeKey(key string) string {
	if key == "" {
		key = "null"
	}
	return url.PathEscape(key)
}

// Trace implements Reader.
func (c *Client) Trace(ctx context.Context, workflow, key string) ([]views.TraceEntry, error) {
	var out []views.TraceEntry
	if err := c.call(ctx, "GET", "/v1/trace/"+url.PathEscape(workflow)+"/"+escapeKey(key), nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Timeline implements Reader.
func (c *Client) Timeline(ctx context.Context, workflow, key string, q views.TimelineQuery) (*views.TimelinePage, error) {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	p := "/v1/timeline/" + url.PathEscape(workflow) + "/" + escapeKey(key)
	if len(v) > 0 {
		p += "?" + v.Encode()
	}
	var out views.TimelinePage
	if err := c.call(ctx, "GET", p, nil, &out); err != nil {
		return nil, err
	}
	if out.Entries == nil {
		out.Entries = []views.TimelineEntry{}
	}
	return &out, nil
}

// Manifest implements Reader.
func (c *Client) Manifest(ctx context.Context) (*ManifestView, error) {
	var out ManifestView
	if err := c.call(ctx, "GET", "/v1/manifest", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Journal implements Reader.
func (c *Client) Journal(ctx context.Context, q JournalQuery, fn func(json.RawMessage) error) error {
	v := url.Values{}
	if q.From > 0 {
		v.Set("from", strconv.FormatUint(q.From, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if len(q.Kinds) > 0 {
		v.Set("kind", strings.Join(q.Kinds, ","))
	}
	if q.Follow {
		v.Set("follow", "true")
	}
	resp, err := c.do(ctx, "GET", "/v1/journal?"+v.Encode(), nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return decodeError(resp.StatusCode, b, nil)
	}
	if q.Start != nil {
		if first, err := strconv.ParseUint(resp.Header.Get(HeaderJournalFirst), 10, 64); err == nil {
			q.Start(first)
		}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"error":`)) {
			status := http.StatusInternalServerError
			if bytes.Contains(line, []byte(`"code":"`+CodeTruncated+`"`)) {
				status = http.StatusGone // the records were dropped while the stream ran
			}
			return decodeError(status, line, nil)
		}
		if err := fn(json.RawMessage(append([]byte(nil), line...))); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("daemon at %s: journal stream: %w", c.Base, err)
	}
	return nil
}

// Send implements Writer. A parked target's key comes back as the
// canonical CBOR of its JSON form, converted without a schema: exact for
// keys of text and numbers, and rendering as the same JSON (KeyJSON) for
// any key.
func (c *Client) Send(ctx context.Context, evs []Event) ([]kernel.Ingested, error) {
	var out struct {
		Seqs       []uint64 `json:"seqs"`
		Duplicates []bool   `json:"duplicates"`
		Parked     []struct {
			Event    int             `json:"event"`
			Workflow string          `json:"workflow"`
			Key      json.RawMessage `json:"key"`
		} `json:"parked"`
	}
	if err := c.call(ctx, "POST", "/v1/events", evs, &out); err != nil {
		return nil, err
	}
	if out.Duplicates != nil && len(out.Duplicates) != len(out.Seqs) {
		return nil, fmt.Errorf("daemon at %s: events: %d seqs but %d duplicate flags", c.Base, len(out.Seqs), len(out.Duplicates))
	}
	res := make([]kernel.Ingested, len(out.Seqs))
	for i, seq := range out.Seqs {
		res[i] = kernel.Ingested{Seq: seq, Duplicate: out.Duplicates != nil && out.Duplicates[i]}
	}
	for _, p := range out.Parked {
		if p.Event < 0 || p.Event >= len(res) {
			return nil, fmt.Errorf("daemon at %s: events: a parked target of event %d, of %d events", c.Base, p.Event, len(res))
		}
		var key []byte
		if string(p.Key) != "null" {
			k, err := receipts.PayloadFromJSON(p.Key)
			if err != nil {
				return nil, fmt.Errorf("daemon at %s: events: parked target key %s: %w", c.Base, p.Key, err)
			}
			key = k
		}
		res[p.Event].Parked = append(res[p.Event].Parked, kernel.Target{Workflow: p.Workflow, Key: key})
	}
	return res, nil
}

// Apply implements Writer.
func (c *Client) Apply(ctx context.Context, req ApplyRequest) (*ApplyOutput, error) {
	var out ApplyOutput
	err := c.call(ctx, "POST", "/v1/apply", req, &out)
	if err != nil {
		if out.ManifestHash != "" {
			return &out, err
		}
		return nil, err
	}
	return &out, nil
}

// WaitQuiescent implements Reader.
func (c *Client) WaitQuiescent(ctx context.Context, d time.Duration) (bool, error) {
	var out struct {
		Quiescent bool `json:"quiescent"`
	}
	if err := c.call(ctx, "GET", "/v1/quiescent?wait="+url.QueryEscape(d.String()), nil, &out); err != nil {
		return false, err
	}
	return out.Quiescent, nil
}
