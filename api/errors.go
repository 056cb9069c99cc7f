package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
)

// Error codes, stable across versions (clients branch on them).
const (
	CodeInvalidInput    = "invalid_input"
	CodeInvalidManifest = "invalid_manifest"
	CodeNotFound        = "not_found"
	CodeNoManifest      = "no_manifest"
	CodeNotQuiescent    = "not_quiescent"
	CodeNotIdle         = "not_idle" // a snapshot refused: another is still being written
	CodeUnauthorized    = "unauthorized"
	CodeTooLarge        = "too_large"
	// CodeUnsupportedMediaType: a request body declared as something other
	// than JSON (415).
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeUnavailable          = "unavailable"
	CodeTimeout              = "timeout"
	CodeInternal             = "internal"
	CodeLocked               = "locked"
	CodeConflict             = "conflict" // the thing already exists (a key already trusted)
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUntrusted            = "untrusted"      // a receipt not signed by a trusted executor key
	CodeDropped              = "dropped"        // a late receipt journaled as dropped (once per intent)
	CodeDuplicate            = "duplicate"      // a receipt for an intent already settled by a receipt, or already dropped once
	CodeUnknownIntent        = "unknown_intent" // a receipt for an intent not pending and not settled recently
	CodeFrameRefused         = "frame_refused"  // a stream frame for an intent not pending, or out of order
	CodeWrongWorld           = "wrong_world"    // a receipt or frame signed for another world, or for none (the first layout)
	// CodeIdempotencyConflict: an event reuses an idempotency key the world
	// remembers (or one given twice in the request) for another event.
	CodeIdempotencyConflict = "idempotency_conflict"
	// CodeTruncated: a journal read from a seq that retention dropped (410
	// Gone); the message names the first seq the journal still holds.
	CodeTruncated = "truncated"
	// CodeUnsupported: what was asked is not done for this world, and
	// asking again will not change that (GET /v1/backup of a world on
	// PostgreSQL); the message says what to do instead.
	CodeUnsupported = "unsupported"
)

// HeaderJournalFirst is the response header of GET /v1/journal that names
// the lowest seq the journal holds: 1, unless retention (aosd gc
// --drop-journal) dropped the records before it.
const HeaderJournalFirst = "Aos-Journal-First"

// Error is a refusal as the API reports it:
// {"error": {"code", "message", "where"}} with HTTP status Status.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Where   string `json:"where,omitempty"`
	err     error
}

func (e *Error) Error() string {
	if e.Where != "" {
		return e.Where + ": " + e.Message
	}
	return e.Message
}

// Unwrap gives the kernel error, when there is one.
func (e *Error) Unwrap() error { return e.err }

// errorBody is the JSON envelope of an error.
type errorBody struct {
	Error *Error `json:"error"`
}

// Wrap is an *Error saying message that unwraps to cause (nil: none), for
// a refusal worded outside this package (the world directory's, package
// host's).
func Wrap(cause error, status int, code, where, message string) *Error {
	return &Error{Status: status, Code: code, Where: where, Message: message, err: cause}
}

func newError(status int, code, where, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...), Where: where}
}

// AsError classifies err into an *Error, naming where when err does not.
func AsError(err error, where string) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Where == "" {
			e.Where = where
		}
		return e
	}
	var ps manifest.Problems
	var ie *kernel.InputError
	var tr *journal.Truncation
	switch {
	case errors.As(err, &ps):
		w := where
		if len(ps) > 0 {
			w = problemWhere(ps[0])
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidManifest, Message: ps.Error(), Where: w, err: err}
	case errors.As(err, &ie), errors.Is(err, kernel.ErrInvalid), errors.Is(err, kernel.ErrUpgrade):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrIdempotencyConflict):
		return &Error{Status: http.StatusConflict, Code: CodeIdempotencyConflict, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrPinned):
		return &Error{Status: http.StatusConflict, Code: CodePinned, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrParkedFull):
		return &Error{Status: http.StatusConflict, Code: CodeParkedFull, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrNoCell):
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrNoManifest):
		return &Error{Status: http.StatusConflict, Code: CodeNoManifest, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrNotQuiescent):
		return &Error{Status: http.StatusConflict, Code: CodeNotQuiescent, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, kernel.ErrSnapshotBusy):
		return &Error{Status: http.StatusConflict, Code: CodeNotIdle, Message: err.Error(), Where: where, err: err}
	case errors.As(err, &tr):
		return &Error{Status: http.StatusGone, Code: CodeTruncated, Where: where, err: err,
			Message: fmt.Sprintf("%v; the journal now starts at seq %d (aosd gc --drop-journal dropped what came before): read from seq %d or later, or from the start (from 0) for all it holds", err, tr.First, tr.First)}
	case errors.Is(err, kernel.ErrClosed), errors.Is(err, kernel.ErrBroken):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error(), Where: where, err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: CodeTimeout, Message: err.Error(), Where: where, err: err}
	default:
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error(), Where: where, err: err}
	}
}

func problemWhere(p manifest.Problem) string {
	w := p.File
	for _, s := range []string{p.Def, p.Pointer} {
		if s != "" {
			if w != "" {
				w += ": "
			}
			w += s
		}
	}
	return w
}
