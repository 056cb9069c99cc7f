package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Error codes of a refused cancel (409), and of a receipt or frame for an
// intent an operator cancelled.
const (
	// CodeNotInFlight: the intent is settled (by a receipt, or by its
	// instance's failure); the message names the record that settled it.
	CodeNotInFlight = "not_in_flight"
	// CodeCancelled: the intent was cancelled by an operator: a second
	// cancel, or an executor's receipt or frame for it. The message names
	// the cancel record's seq.
	CodeCancelled = "cancelled"
)

// CancelRequest is the body of POST /v1/intents/{hash}/cancel (optional:
// no body is a cancel with no reason, by "operator").
type CancelRequest struct {
	// Reason is journaled with the cancel and delivered to the workflow
	// (at most kernel.MaxCancelReasonBytes of UTF-8).
	Reason string `json:"reason,omitempty"`
	// By names who asked (at most kernel.MaxCancelByBytes; default
	// "operator"). The API has one token, so this is the caller's word,
	// journaled as given, not an authenticated identity.
	By string `json:"by,omitempty"`
}

// CancelResult says what a cancel did (POST /v1/intents/{hash}/cancel,
// `aosd cancel --json`): kernel.CancelResult as JSON.
type CancelResult struct {
	Seq      uint64          `json:"seq"` // the cancel record
	Intent   schemas.Hash    `json:"intent"`
	Effect   string          `json:"effect"`
	Workflow string          `json:"workflow"` // the intent's origin workflow
	Key      json.RawMessage `json:"key"`      // its origin key, as JSON (null when unkeyed)
	// Delivered says the workflow was delivered sys/EffectCancelled@1
	// (its event schema takes it); else the instance failed (fault_seq,
	// reason), as for a rejected receipt it cannot carry.
	Delivered bool   `json:"delivered"`
	Status    string `json:"status"` // the instance's status afterwards (the cancel ran to idle)
	FaultSeq  uint64 `json:"fault_seq,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// CancelResultOf renders a kernel cancel result.
func CancelResultOf(r *kernel.CancelResult) *CancelResult {
	return &CancelResult{Seq: r.Seq, Intent: r.Intent, Effect: r.Effect, Workflow: r.Workflow, Key: records.KeyJSON(r.Key),
		Delivered: r.Delivered, Status: r.Status, FaultSeq: r.FaultSeq, Reason: r.Reason}
}

// Cancel implements Writer.
func (l *Local) Cancel(ctx context.Context, hash string, req CancelRequest) (*CancelResult, error) {
	h, err := l.resolveIntent(ctx, hash, CodeUnknownIntent)
	if err != nil {
		return nil, err
	}
	res, err := l.W.CancelIntent(ctx, kernel.CancelRequest{Intent: h, Reason: req.Reason, By: req.By})
	if err != nil {
		return nil, cancelError(err, "intent "+hash)
	}
	return CancelResultOf(&res), nil
}

// cancelError classifies a refused cancel: an intent the world does not
// know is 404, one that is settled or cancelled already a conflict with
// the world's state (409).
func cancelError(err error, where string) *Error {
	switch {
	case errors.Is(err, kernel.ErrIntentUnknown):
		return &Error{Status: http.StatusNotFound, Code: CodeUnknownIntent, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrIntentNotInFlight):
		return &Error{Status: http.StatusConflict, Code: CodeNotInFlight, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrIntentCancelled):
		return &Error{Status: http.StatusConflict, Code: CodeCancelled, Message: err.Error(), Where: where, err: err}
	}
	return AsError(err, where)
}

// Cancel implements Writer.
func (c *Client) Cancel(ctx context.Context, hash string, req CancelRequest) (*CancelResult, error) {
	var out CancelResult
	if err := c.call(ctx, "POST", "/v1/intents/"+url.PathEscape(hash)+"/cancel", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// cancelRoute is POST /v1/intents/{hash}/cancel.
func (s *Server) cancelRoute(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	strict := body{into: &req, shape: `body is not {"reason"?: TEXT, "by"?: TEXT}`}
	in := body{parse: func(b []byte) error {
		if len(bytes.TrimSpace(b)) == 0 {
			return nil // no body: no reason, by "operator"
		}
		return strict.decode(b)
	}}
	s.handle(w, r, "intent "+r.PathValue("hash"), in, func() (any, error) {
		res, err := s.Backend.Cancel(r.Context(), r.PathValue("hash"), req)
		if err != nil {
			return nil, err
		}
		s.Logger.Info("intent cancelled", "intent", res.Intent, "seq", res.Seq, "by", req.By, "status", res.Status)
		return res, nil
	})
}
