package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
)

// Error codes of a refused recover (409).
const (
	CodeNotFailed    = "not_failed"    // the instance is not failed
	CodeStaleFault   = "stale_fault"   // the instance is failed by another fault than the one named
	CodeNotRetryable = "not_retryable" // retry cannot deliver the failed input again; reset or skip can
	// CodeParkedUndeliverable: the current manifest cannot take an event
	// parked for the instance; the recover must drop them (drop_parked).
	CodeParkedUndeliverable = "parked_undeliverable"
)

// FailedQuery selects failed instances: GET /v1/failed.
type FailedQuery struct {
	Workflow string  // "" for all workflows
	Key      *string // with Workflow: only this key, as the user typed it (see ParseKey)
	Limit    int     // 0: kernel.DefaultFailedLimit; cut to kernel.MaxFailedLimit
	After    string  // the Next of the previous page
}

// FailedPage is one page of failed instances.
type FailedPage struct {
	Failed []FailedInfo `json:"failed"`
	Next   string       `json:"next,omitempty"` // cursor of the next page; absent on the last
}

// RecoverRequest is the body of POST /v1/failed/{workflow}/recover.
type RecoverRequest struct {
	// Key is the instance's key as JSON (absent or null for an unkeyed
	// workflow); it is read like the key of GET /v1/cells/{workflow}/{key}.
	Key      json.RawMessage `json:"key,omitempty"`
	Action   string          `json:"action"`    // retry, reset or skip
	FaultSeq uint64          `json:"fault_seq"` // the fault it answers (FailedInfo.FaultSeq)
	// DropParked drops the events parked for the instance instead of
	// delivering them after the action; the answer says how many.
	DropParked bool `json:"drop_parked,omitempty"`
}

// keyText is the request's key as the text ParseKey reads.
func (r *RecoverRequest) keyText() string {
	if len(r.Key) == 0 {
		return ""
	}
	return string(r.Key)
}

// Failed implements Reader.
func (l *Local) Failed(ctx context.Context, q FailedQuery) (*FailedPage, error) {
	if q.Key != nil {
		if q.Workflow == "" {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, "key", "a key filter needs a workflow")
		}
		page := &FailedPage{Failed: []FailedInfo{}}
		k, err := l.failedKey(ctx, q.Workflow, *q.Key)
		if e := (*Error)(nil); errors.As(err, &e) && e.Code == CodeNotFound {
			// A workflow the manifest does not have: as without a key, a
			// filter naming a workflow with no failed instances is
			// invalid_input (400), and one with failed instances none of
			// which has the key has no rows.
			if _, _, ferr := l.W.Failed(ctx, q.Workflow, 1, ""); ferr != nil {
				return nil, AsError(ferr, "workflow "+q.Workflow)
			}
			return page, nil
		}
		if err != nil {
			return nil, err
		}
		fi, err := l.W.FailedInstance(ctx, q.Workflow, k)
		switch {
		case errors.Is(err, kernel.ErrNotFailed):
			return page, nil
		case err != nil:
			return nil, AsError(err, fmt.Sprintf("workflow %s key %s", q.Workflow, records.KeyJSON(k)))
		}
		page.Failed = append(page.Failed, FailedInfoOf(fi))
		return page, nil
	}
	rows, next, err := l.W.Failed(ctx, q.Workflow, q.Limit, q.After)
	if err != nil {
		where := "failed"
		if q.Workflow != "" {
			where = "workflow " + q.Workflow
		}
		return nil, AsError(err, where)
	}
	page := &FailedPage{Failed: make([]FailedInfo, len(rows)), Next: next}
	for i := range rows {
		page.Failed[i] = FailedInfoOf(&rows[i])
	}
	return page, nil
}

// failedKey parses a typed key as key does, except that a workflow the
// manifest no longer has, which has no key schema to parse with, is looked
// up among its failed instances by the key's JSON (the text as JSON, or as a
// JSON string), so they can still be listed, reset and skipped.
func (l *Local) failedKey(ctx context.Context, workflow, key string) ([]byte, error) {
	if m := l.W.Manifest(); m == nil || m.Workflows[workflow] != nil {
		return l.key(workflow, key)
	}
	if key == "" {
		key = "null" // an unkeyed workflow's instance
	}
	texts := [][]byte{}
	if json.Valid([]byte(key)) {
		texts = append(texts, []byte(key))
	}
	asString, _ := json.Marshal(key)
	want := map[string]bool{}
	for _, t := range append(texts, asString) {
		var b bytes.Buffer
		if json.Compact(&b, t) == nil {
			want[b.String()] = true
		}
	}
	k, ok, err := l.W.FailedKey(ctx, workflow, func(key []byte) bool {
		var b bytes.Buffer
		return json.Compact(&b, records.KeyJSON(key)) == nil && want[b.String()]
	})
	if err != nil {
		return nil, AsError(err, "workflow "+workflow)
	}
	if !ok {
		return l.key(workflow, key) // says the workflow is unknown
	}
	return k, nil
}

// Recover implements Writer.
func (l *Local) Recover(ctx context.Context, workflow string, req RecoverRequest) (*RecoverResult, error) {
	k, err := l.failedKey(ctx, workflow, req.keyText())
	if err != nil {
		return nil, err
	}
	res, err := l.W.RecoverInstance(ctx, kernel.RecoverRequest{Workflow: workflow, Key: k, Action: req.Action,
		FaultSeq: req.FaultSeq, DropParked: req.DropParked})
	if err != nil {
		return nil, recoverError(err, fmt.Sprintf("workflow %s key %s", workflow, records.KeyJSON(k)))
	}
	out := RecoverResult(res)
	return &out, nil
}

// recoverError classifies a refused recover: a stale or impossible one is a
// conflict with the world's state (409).
func recoverError(err error, where string) *Error {
	for _, c := range []struct {
		err  error
		code string
	}{{kernel.ErrNotFailed, CodeNotFailed}, {kernel.ErrStaleFault, CodeStaleFault}, {kernel.ErrNotRetryable, CodeNotRetryable},
		{kernel.ErrParkedUndeliverable, CodeParkedUndeliverable}} {
		if errors.Is(err, c.err) {
			return &Error{Status: http.StatusConflict, Code: c.code, Message: err.Error(), Where: where, err: err}
		}
	}
	return AsError(err, where)
}

// Failed implements Reader.
func (c *Client) Failed(ctx context.Context, q FailedQuery) (*FailedPage, error) {
	v := url.Values{}
	if q.Workflow != "" {
		v.Set("workflow", q.Workflow)
	}
	if q.Key != nil {
		v.Set("key", *q.Key)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.After != "" {
		v.Set("after", q.After)
	}
	var out FailedPage
	if err := c.call(ctx, "GET", "/v1/failed?"+v.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Recover implements Writer.
func (c *Client) Recover(ctx context.Context, workflow string, req RecoverRequest) (*RecoverResult, error) {
	var out RecoverResult
	if err := c.call(ctx, "POST", "/v1/failed/"+url.PathEscape(workflow)+"/recover", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// failedRoute is GET /v1/failed?workflow=&key=&limit=&after=.
func (s *Server) failedRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "failed", body{}, func() (any, error) {
		qv := r.URL.Query()
		q := FailedQuery{Workflow: qv.Get("workflow"), After: qv.Get("after")}
		if v := qv.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit", "limit %q is not a non-negative integer", v)
			}
			q.Limit = n
		}
		if qv.Has("key") {
			k := qv.Get("key")
			q.Key = &k
		}
		return s.Backend.Failed(r.Context(), q)
	})
}

// recoverRoute is POST /v1/failed/{workflow}/recover.
func (s *Server) recoverRoute(w http.ResponseWriter, r *http.Request) {
	var req RecoverRequest
	in := body{into: &req, shape: `body is not {"key": JSON, "action": "retry"|"reset"|"skip", "fault_seq": N, "drop_parked"?: BOOL}`}
	s.handle(w, r, "recover", in, func() (any, error) {
		return s.Backend.Recover(r.Context(), r.PathValue("workflow"), req)
	})
}
