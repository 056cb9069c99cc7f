package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/views"
)

// body says how a route reads its request body.
type body struct {
	// into receives the body, decoded as strict JSON (unknown fields and
	// trailing data refused); nil with parse nil: the route reads no body.
	into any
	// shape is what the body should be, leading the decoder's message in
	// the 400 answer ("": the decoder's message alone).
	shape string
	// parse, when set, reads the body instead of strict JSON into into
	// (limits, receipts and frames have parsers of their own); its error is
	// answered as it maps (an *Error keeps its status and where).
	parse func([]byte) error
	// limit bounds the body (413 beyond); 0: Server.MaxBodyBytes.
	limit int64
}

// handle is the shape of every JSON route: read and decode the request
// body as b says, call, and answer 200 with call's result as JSON, or the
// error as the status and JSON error body it maps to (fail), naming where.
// Validation of the request's parameters belongs in call: an *Error it
// returns is answered as it is.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, where string, b body, call func() (any, error)) {
	if b.into != nil || b.parse != nil {
		raw, err := s.readBody(w, r, b.limit)
		if err == nil {
			err = b.decode(raw)
		}
		if err != nil {
			s.fail(w, err, "request body")
			return
		}
	}
	v, err := call()
	if err != nil {
		var refused *refusal
		if errors.As(err, &refused) {
			// The refusal carries a result beside the error (a refused
			// apply lists its blockers).
			writeJSON(w, refused.Err.Status, refused)
			return
		}
		s.fail(w, err, where)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// decode reads raw as b says; a body that does not decode is 400
// invalid_input at "request body".
func (b body) decode(raw []byte) error {
	if b.parse != nil {
		return b.parse(raw)
	}
	if err := views.Decode(raw, b.into); err != nil {
		var trailing *views.TrailingError
		if b.shape != "" && !errors.As(err, &trailing) {
			return newError(http.StatusBadRequest, CodeInvalidInput, "request body", "%s: %v", b.shape, err)
		}
		return newError(http.StatusBadRequest, CodeInvalidInput, "request body", "%v", err)
	}
	return nil
}

// maxPresize bounds the buffer readBody allocates on a request's word (its
// Content-Length) before the bytes arrive: a client that declares 8 MB and
// sends a trickle holds at most this much until it sends more.
const maxPresize = 256 << 10

// readBody reads a JSON request body of at most limit bytes (0:
// MaxBodyBytes): 415 unless it is declared JSON (checkContentType), 413
// beyond the limit, 408 when it does not arrive within BodyTimeout
// (bodyDeadline).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = s.MaxBodyBytes
	}
	b, err := readAll(http.MaxBytesReader(w, r.Body, limit), presize(r.ContentLength, limit))
	if err == nil {
		return b, nil
	}
	// On a refusal the body's deadline (bodyDeadline) stays: the server
	// would otherwise wait, with no bound, for the rest of a body it will
	// not read before it answers.
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, newError(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body",
			"body exceeds the %d-byte limit", limit)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		return nil, newError(http.StatusRequestTimeout, CodeTimeout, "request body",
			"the body did not arrive within %s (the server's body timeout); %d bytes came", s.BodyTimeout, len(b))
	}
	return nil, newError(http.StatusBadRequest, CodeInvalidInput, "request body", "cannot read body: %v", err)
}

// presize is the buffer to read a body of declared length n (-1: unknown)
// into: one byte more than the body, so the read that finds its end needs
// no growth, bounded by limit+1 and maxPresize; 512 (io.ReadAll's start)
// when the length is unknown.
func presize(n, limit int64) int {
	if n < 0 {
		return 512
	}
	return int(min(n, limit, maxPresize)) + 1
}

// readAll is io.ReadAll into a buffer of capacity size to start with.
func readAll(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as io.ReadAll does
		}
	}
}

// refusal is an error whose answer carries a result beside the error: the
// body of a refused apply is its result (with blocked_by) and the error.
type refusal struct {
	*ApplyOutput
	Err *Error `json:"error"`
}

func (r *refusal) Error() string { return r.Err.Error() }
func (r *refusal) Unwrap() error { return r.Err }

// preEncoded is an answer already encoded as JSON, newline included, as
// writeJSON's encoder would have written it: written as is.
type preEncoded []byte

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if p, ok := v.(preEncoded); ok {
		_, _ = w.Write(p)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *Error) {
	writeJSON(w, e.Status, errorBody{Error: e})
}

// fail answers err as its status and JSON error body, naming where when err
// does not.
func (s *Server) fail(w http.ResponseWriter, err error, where string) {
	e := AsError(err, where)
	if errors.Is(err, context.Canceled) {
		// The client went away (e.g. during a claim's long poll): nothing
		// failed here, and nobody is listening for the answer.
		s.Logger.Debug("client went away", "where", where)
		return
	}
	switch {
	case errors.Is(err, kernel.ErrBroken):
		// The kernel logged the storage failure once, as it stopped the
		// world; every request after it would repeat the cause.
		s.Logger.Debug("request refused: the world stopped after a storage failure", "where", e.Where)
	case e.Status >= 500:
		s.Logger.Error("request failed", "code", e.Code, "where", e.Where, "err", e.Message)
	}
	writeError(w, e)
}

// checkContentType refuses a request body declared as something other than
// JSON (415): application/json, with parameters (a charset, if given, must
// be UTF-8, the only encoding JSON has), and the structured-syntax
// application/*+json types are JSON. A body without Content-Type is read as
// JSON: many clients send none, and the route defines what its body is.
func checkContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	typ, params, err := mime.ParseMediaType(ct)
	if err == nil && (typ == "application/json" || strings.HasPrefix(typ, "application/") && strings.HasSuffix(typ, "+json")) {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8") {
			return nil
		}
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type header",
			"Content-Type %q: a JSON body is UTF-8; send Content-Type: application/json", ct)
	}
	hint := ""
	if typ == "application/x-www-form-urlencoded" {
		hint = " (curl -d sends application/x-www-form-urlencoded: add -H 'Content-Type: application/json', or use curl --json)"
	}
	return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "Content-Type header",
		"the body is declared %q, not JSON: send Content-Type: application/json%s", ct, hint)
}
