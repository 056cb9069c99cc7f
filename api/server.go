package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aos-kernel/aos/inspector"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/views"
)

// DefaultMaxBodyBytes bounds a request body (413 beyond it).
const DefaultMaxBodyBytes = 8 << 20

// DefaultMaxApplyBytes bounds a POST /v1/apply body, which may carry wasm
// artifacts (a Go-built module is a few MiB, a third more in base64).
const DefaultMaxApplyBytes = 64 << 20

// HTTPLimits bound the HTTP API's connections and requests, so that clients
// that send slowly, or not at all, cannot hold the server's connections
// (and file descriptors) for as long as they like, and one request cannot
// hold the world's loop for long. Zero fields take the defaults.
type HTTPLimits struct {
	// HeaderTimeout: a request's line and headers must arrive within it
	// (DefaultHeaderTimeout); the server closes a connection that sends
	// them too slowly, without an answer.
	HeaderTimeout time.Duration
	// BodyTimeout: once its headers are in, a request's body must arrive
	// within it (DefaultBodyTimeout), else 408. Requests without a body
	// (a journal follow stream, a claim's long poll once its body is in)
	// are not cut by it.
	BodyTimeout time.Duration
	// IdleTimeout: a kept-alive connection without a request in flight is
	// closed after it (DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxBatchEvents bounds the events of one POST /v1/events
	// (DefaultMaxBatchEvents), else 413.
	MaxBatchEvents int
}

// The HTTP API's default limits (docs/API.md, "Limits of a connection").
const (
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout    = time.Minute
	DefaultIdleTimeout    = 2 * time.Minute
	DefaultMaxBatchEvents = 1000
)

// WithDefaults is l with its zero fields set to the defaults.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	if l.HeaderTimeout == 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxBatchEvents == 0 {
		l.MaxBatchEvents = DefaultMaxBatchEvents
	}
	return l
}

// Server serves the HTTP API over a Backend (normally a Local).
type Server struct {
	Backend      Backend
	Token        string // bearer token every route requires
	Logger       *slog.Logger
	Metrics      *prometheus.Registry // served at GET /metrics; nil: none
	MaxBodyBytes int64                // default DefaultMaxBodyBytes
	// Executors, when set, serves the external executor protocol
	// (claim, receipts, frames); without it those routes answer 503.
	Executors *Executors
	// Backup, when set, writes the world's backup (BackupFormat) for GET
	// /v1/backup; without it that route answers 503.
	Backup func(w io.Writer) error
	// NoBackup, when set, is why this world is not backed up through
	// GET /v1/backup at all (a world on PostgreSQL: its database's own
	// tools back it up); that route then answers 501 with it.
	NoBackup string
	// Tokens, when set, are the bearer tokens accepted instead of Token,
	// so the token can be rotated while the server runs; RotateToken, when
	// set, serves POST /v1/token/rotate (without it that route answers 503).
	Tokens      *TokenSet
	RotateToken func(grace time.Duration) (*TokenRotation, error)
	// BodyTimeout bounds how long a request's body may take to arrive once
	// its headers are in (408 beyond); default DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxBatchEvents bounds the events of one POST /v1/events (413
	// beyond); default DefaultMaxBatchEvents.
	MaxBatchEvents int
	// Cluster, when set, is the node's view of the world's ownership,
	// answered as "cluster" by GET /v1/status (a world several nodes serve).
	Cluster func() *ClusterStatus
}

// route is one API endpoint. Handler builds the mux from routes() alone, and
// docs/openapi.json documents exactly these (openapi_test.go holds the two
// equal), so a route added here without documentation fails the tests.
type route struct {
	method  string
	pattern string           // a ServeMux path pattern; {name} segments are path parameters
	handler http.HandlerFunc // nil: not served by this Server (the catch-all answers 404)
}

// routes is the API's route table.
func (s *Server) routes() []route {
	var metrics http.HandlerFunc
	if s.Metrics != nil {
		metrics = promhttp.HandlerFor(s.Metrics, promhttp.HandlerOpts{}).ServeHTTP
	}
	return []route{
		{"POST", "/v1/events", s.events},
		{"GET", "/v1/status", s.status},
		{"GET", "/v1/limits", s.limitsRoute},
		{"POST", "/v1/limits", s.setLimitsRoute},
		{"GET", "/v1/quiescent", s.quiescent},
		{"GET", "/v1/cells/{workflow}", s.cells},
		{"GET", "/v1/cells/{workflow}/{key}", s.cell},
		{"GET", "/v1/trace/{workflow}/{key}", s.trace},
		{"GET", "/v1/timeline/{workflow}/{key}", s.timeline},
		{"GET", "/v1/manifest", s.manifestRoute},
		{"GET", "/v1/manifests", s.manifestsRoute},
		{"POST", "/v1/manifests/{hash}/retire", s.retireRoute},
		{"GET", "/v1/failed", s.failedRoute},
		{"POST", "/v1/failed/{workflow}/recover", s.recoverRoute},
		{"GET", "/v1/modules", s.modulesRoute},
		{"POST", "/v1/modules/{module}/resume", s.resumeRoute},
		{"GET", "/v1/journal", s.journal},
		{"GET", "/v1/journal/check", s.journalCheckRoute},
		{"POST", "/v1/apply", s.apply},
		{"POST", "/v1/gc", s.gcRoute},
		{"POST", "/v1/shadow", s.shadowRoute},
		{"POST", "/v1/snapshot", s.snapshotRoute},
		{"POST", "/v1/replay", s.replayRoute},
		{"POST", "/v1/replay/manifest", s.replayManifestRoute},
		{"POST", "/v1/upgrade", s.upgradeRoute},
		{"GET", "/v1/intents/{hash}", s.intentRoute},
		{"POST", "/v1/intents/{hash}/cancel", s.cancelRoute},
		{"GET", "/v1/pending", s.needsExecutors(s.pendingRoute)},
		{"GET", "/v1/keys", s.keysRoute},
		{"POST", "/v1/keys", s.addKeyRoute},
		{"DELETE", "/v1/keys/{id}", s.removeKeyRoute},
		{"GET", "/v1/backup", s.backupRoute},
		{"POST", "/v1/token/rotate", s.rotateTokenRoute},
		{"POST", "/v1/effects/claim", s.needsExecutors(s.claimRoute)},
		{"POST", "/v1/receipts", s.needsExecutors(s.receiptRoute)},
		{"POST", "/v1/frames", s.needsExecutors(s.frameRoute)},
		{"GET", "/metrics", metrics},
	}
}

// needsExecutors answers 503 unless the server runs executors. It checks on
// every request, so Executors may be set after Handler is built.
func (s *Server) needsExecutors(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Executors == nil {
			writeError(w, newError(http.StatusServiceUnavailable, CodeUnavailable, r.URL.Path, "this server runs no executors"))
			return
		}
		h(w, r)
	}
}

// Handler returns the API's routes, all behind bearer-token auth, and the
// web inspector's pages (package inspector) on every other path.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if s.BodyTimeout == 0 {
		s.BodyTimeout = DefaultBodyTimeout
	}
	if s.MaxBatchEvents == 0 {
		s.MaxBatchEvents = DefaultMaxBatchEvents
	}
	mux := http.NewServeMux()
	allowed := map[string][]string{} // pattern -> methods, for 405 answers
	var patterns []string
	for _, rt := range s.routes() {
		if rt.handler != nil {
			mux.HandleFunc(rt.method+" "+rt.pattern, rt.handler)
			if allowed[rt.pattern] == nil {
				patterns = append(patterns, rt.pattern)
			}
			allowed[rt.pattern] = append(allowed[rt.pattern], rt.method)
		}
	}
	// A known path with another method: 405 with Allow, not 404. The
	// method-less pattern only matches what the method patterns do not.
	for _, p := range patterns {
		methods := append([]string(nil), allowed[p]...)
		if slices.Contains(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		allow := strings.Join(methods, ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" "+r.URL.Path, "method not allowed (allowed: %s)", allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, CodeNotFound, r.Method+" "+r.URL.Path, "no such route"))
	})
	api := s.auth(s.logRequests(mux))
	ui := s.logRequests(inspector.Handler())
	return s.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isAPIPath(r.URL.Path) {
			api.ServeHTTP(w, r)
			return
		}
		ui.ServeHTTP(w, r)
	}))
}

// bodyDeadline bounds how long a request's body may take to arrive: a
// request that has one (declared, or chunked) gets a read deadline of
// BodyTimeout from when its handler starts. It is the Server's, not only
// the http.Server's (ReadTimeout), so that it holds wherever the handler is
// mounted and a late body is answered 408 with the API's error body.
// net/http clears a connection's read deadline when it starts the read that
// notices a client going away, at once for a request without a body and at
// the end of the body otherwise, so neither a journal follow stream nor a
// claim's long poll is cut by it (TestHostStreamsOutliveTheBodyTimeout). A
// body the handler does not read (a route that takes none) is still
// bounded: the server reads and discards it before it answers, under the
// deadline.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// w is net/http's own writer here, which has SetReadDeadline (what
		// http.ResponseController would find, without allocating one).
		if d, ok := w.(readDeadliner); ok && r.ContentLength != 0 && s.BodyTimeout > 0 {
			_ = d.SetReadDeadline(time.Now().Add(s.BodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// readDeadliner is a ResponseWriter that sets its connection's read
// deadline (net/http's, over HTTP/1 and HTTP/2).
type readDeadliner interface {
	SetReadDeadline(time.Time) error
}

// isAPIPath says whether a request goes to the API (behind the token) rather
// than to the inspector's pages, which hold no data and are served without
// it: /v1 and everything under it (unknown routes there answer the API's
// JSON 404), and /metrics.
func isAPIPath(p string) bool {
	return p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/metrics"
}

func (s *Server) auth(next http.Handler) http.Handler {
	tokens := s.Tokens
	if tokens == nil {
		tokens = NewTokenSet(s.Token, nil)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("Authorization")
		got, bearer := bearerToken(h)
		if !bearer || !tokens.Check("Bearer "+got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="aos"`)
			msg := "missing bearer token (send Authorization: Bearer <token from the world's token file>)"
			switch {
			case bearer:
				msg = "wrong bearer token"
			case h != "":
				msg = "the Authorization header is not a bearer token (send Authorization: Bearer <token from the world's token file>)"
			}
			writeError(w, newError(http.StatusUnauthorized, CodeUnauthorized, "Authorization header", "%s", msg))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken is the token of an Authorization header value of the Bearer
// scheme. The scheme's name is case-insensitive (RFC 9110 section 11.1:
// "bearer", "BEARER" and "Bearer" are one scheme), and one or more spaces
// separate it from the token.
func bearerToken(h string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(rest, " "), true
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) { r.code = code; r.ResponseWriter.WriteHeader(code) }

// Unwrap lets http.ResponseController reach the connection (a body's read
// deadline, readBody).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		lvl := slog.LevelDebug
		if rec.code >= 500 {
			lvl = slog.LevelError
		} else if rec.code >= 400 {
			lvl = slog.LevelInfo
		}
		s.Logger.Log(r.Context(), lvl, "http", "method", r.Method, "path", r.URL.Path, "status", rec.code, "dur", time.Since(t0))
	})
}

// events: body {"schema","value","idempotency_key"?} -> {"seq","duplicate"};
// or [{...}, ...] -> {"seqs","duplicates"}. A single event may take its
// idempotency key from the Idempotency-Key header instead.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	var in eventsBody
	decode := func(b []byte) error {
		var err error
		if in, err = parseEvents(b, s.MaxBatchEvents); err != nil {
			var trailing *views.TrailingError
			var tooMany *batchTooLarge
			switch {
			case errors.As(err, &tooMany):
				return newError(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body", "%v", err)
			case errors.As(err, &trailing):
				return newError(http.StatusBadRequest, CodeInvalidInput, "request body", "%v", err)
			}
			return newError(http.StatusBadRequest, CodeInvalidInput, "request body", "%s: %v", eventsShape, err)
		}
		return nil
	}
	s.handle(w, r, "events", body{parse: decode}, func() (any, error) {
		evs, e := eventsIn(in, r.Header.Values("Idempotency-Key"))
		if e != nil {
			return nil, e
		}
		res, err := s.Backend.Send(r.Context(), evs)
		if err != nil {
			return nil, err
		}
		return eventsAnswer(res, in.batch), nil
	})
}

// eventsAnswer is POST /v1/events' answer, written by hand: the bytes
// encoding/json gives {"seq", "duplicate"} (or {"seqs", "duplicates"}) as
// a map, keys sorted, without the map, the reflection and the sort on the
// hottest route. When an event was parked for some of its targets (they
// cannot take it now: failed, or their module set aside), "parked" lists
// them: [{"key", "workflow"}] for one event, [{"event", "key", "workflow"}]
// for a batch (event is the index in the request).
func eventsAnswer(res []kernel.Ingested, batch bool) preEncoded {
	if !batch {
		b := make([]byte, 0, 48)
		b = append(b, `{"duplicate":`...)
		b = strconv.AppendBool(b, res[0].Duplicate)
		if len(res[0].Parked) > 0 {
			b = append(b, `,"parked":`...)
			b = appendParked(b, res[:1], false)
		}
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, res[0].Seq, 10)
		return append(b, "}\n"...)
	}
	b := make([]byte, 0, 32+len(res)*14)
	b = append(b, `{"duplicates":[`...)
	for i, x := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendBool(b, x.Duplicate)
	}
	b = append(b, ']')
	for _, x := range res {
		if len(x.Parked) > 0 {
			b = append(b, `,"parked":`...)
			b = appendParked(b, res, true)
			break
		}
	}
	b = append(b, `,"seqs":[`...)
	for i, x := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, x.Seq, 10)
	}
	return append(b, "]}\n"...)
}

// parkedEntry is one target an event was parked for, in the answer.
type parkedEntry struct {
	Event    *int            `json:"event,omitempty"`
	Key      json.RawMessage `json:"key"`
	Workflow string          `json:"workflow"`
}

// ParkedTarget is an instance an event was parked for, as the answer of
// POST /v1/events and `aosd send --json` show it.
type ParkedTarget struct {
	Workflow string          `json:"workflow"`
	Key      json.RawMessage `json:"key"`
}

// appendParked appends the parked targets of res as a JSON array, as
// encoding/json (HTML left unescaped) writes it.
func appendParked(b []byte, res []kernel.Ingested, batch bool) []byte {
	var es []parkedEntry
	for i := range res {
		for _, t := range res[i].Parked {
			e := parkedEntry{Key: records.KeyJSON(t.Key), Workflow: t.Workflow}
			if batch {
				e.Event = &i
			}
			es = append(es, e)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(es) // strings and valid raw JSON: it cannot fail
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "status", body{}, func() (any, error) {
		st, err := s.Backend.Status(r.Context())
		if err == nil && s.Cluster != nil {
			st.Cluster = s.Cluster()
		}
		return st, err
	})
}

// quiescent: ?wait=DUR waits up to DUR; answers {"quiescent": bool}.
func (s *Server) quiescent(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "quiescent", body{}, func() (any, error) {
		d := time.Duration(0)
		if v := r.URL.Query().Get("wait"); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d < 0 {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "wait", "wait %q is not a duration like 30s", v)
			}
		}
		q, err := s.Backend.WaitQuiescent(r.Context(), d)
		if err != nil {
			return nil, err
		}
		return map[string]bool{"quiescent": q}, nil
	})
}

func (s *Server) cells(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "cells", body{}, func() (any, error) {
		var q CellsQuery
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit",
					"%q is not a page size: want 1..%d", v, kernel.MaxCellPage)
			}
			q.Limit = n
		}
		q.After = r.URL.Query().Get("after")
		q.Status = ParseStatuses(r.URL.Query()["status"])
		if ks, ok := r.URL.Query()["key"]; ok {
			q.Key, q.HasKey = ks[len(ks)-1], true
		}
		if ps, ok := r.URL.Query()["pin"]; ok {
			q.Pin = ps[len(ps)-1]
			if q.Pin == "" {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "pin",
					"empty: want a live manifest's hash (sha256:<64 hex>; GET /v1/manifests lists them)")
			}
		}
		return s.Backend.Cells(r.Context(), r.PathValue("workflow"), q)
	})
}

func (s *Server) cell(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "cell", body{}, func() (any, error) {
		return s.Backend.Cell(r.Context(), r.PathValue("workflow"), r.PathValue("key"))
	})
}

func (s *Server) trace(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "trace", body{}, func() (any, error) {
		return s.Backend.Trace(r.Context(), r.PathValue("workflow"), r.PathValue("key"))
	})
}

// timeline: ?after=SEQ&limit=N, one page of a cell's timeline.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "timeline", body{}, func() (any, error) {
		var q views.TimelineQuery
		if v := r.URL.Query().Get("after"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "after", "after %q is not a sequence number (the next of an earlier page)", v)
			}
			q.After = n
		}
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit",
					"%q is not a page size: want 1..%d", v, views.MaxTimelinePage)
			}
			q.Limit = n
		}
		return s.Backend.Timeline(r.Context(), r.PathValue("workflow"), r.PathValue("key"), q)
	})
}

func (s *Server) manifestRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "manifest", body{}, func() (any, error) { return s.Backend.Manifest(r.Context()) })
}

// ParseJournalQuery reads from, limit, kind (repeated or comma-separated)
// and follow from URL query values.
func ParseJournalQuery(get func(string) []string) (JournalQuery, error) {
	var q JournalQuery
	one := func(k string) string {
		if v := get(k); len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	if v := one("from"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return q, newError(http.StatusBadRequest, CodeInvalidInput, "from", "from %q is not a sequence number", v)
		}
		q.From = n
	}
	if v := one("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return q, newError(http.StatusBadRequest, CodeInvalidInput, "limit", "limit %q is not a non-negative integer", v)
		}
		q.Limit = n
	}
	for _, v := range get("kind") {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				// Checked here, before a follow stream sends its 200.
				if !knownKind(k) {
					return q, newError(http.StatusBadRequest, CodeInvalidInput, "kind", "unknown record kind %q (kinds: %s)", k, strings.Join(kindNames, ", "))
				}
				q.Kinds = append(q.Kinds, k)
			}
		}
	}
	if v := one("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return q, newError(http.StatusBadRequest, CodeInvalidInput, "follow", "follow %q is not true or false", v)
		}
		q.Follow = b
	}
	return q, nil
}

// journal streams JSON lines; with follow=true it flushes after every record
// and keeps going until the client goes away or the daemon stops.
func (s *Server) journal(w http.ResponseWriter, r *http.Request) {
	q, err := ParseJournalQuery(func(k string) []string { return r.URL.Query()[k] })
	if err != nil {
		s.fail(w, err, "journal")
		return
	}
	flusher, _ := w.(http.Flusher)
	bw := bufio.NewWriter(w)
	started := false
	start := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			if q.Follow && flusher != nil {
				flusher.Flush() // let the client see the stream has begun
			}
		}
	}
	q.Start = func(first uint64) {
		w.Header().Set(HeaderJournalFirst, strconv.FormatUint(first, 10))
		if q.Follow {
			start()
		}
	}
	err = s.Backend.Journal(r.Context(), q, func(line json.RawMessage) error {
		start()
		if _, err := bw.Write(line); err != nil {
			return err
		}
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
		if q.Follow {
			if err := bw.Flush(); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		return nil
	})
	if err != nil && !started {
		var tr *journal.Truncation
		if errors.As(err, &tr) {
			w.Header().Set(HeaderJournalFirst, strconv.FormatUint(tr.First, 10))
		}
		s.fail(w, err, "journal")
		return
	}
	if err != nil {
		// Mid-stream: the status is sent. End with an error line the client
		// recognises rather than truncating silently.
		e := AsError(err, "journal")
		b, _ := json.Marshal(errorBody{Error: e})
		bw.Write(b)
		bw.WriteByte('\n')
	}
	start()
	bw.Flush()
}

func (s *Server) apply(w http.ResponseWriter, r *http.Request) {
	var req ApplyRequest
	in := body{into: &req, limit: max(s.MaxBodyBytes, DefaultMaxApplyBytes),
		shape: `body is not {"files": [{"name", "content" | "base64"}], "dry_run", "wait"} or {"path", ...}`}
	s.handle(w, r, "apply", in, func() (any, error) {
		out, err := s.Backend.Apply(r.Context(), req)
		if err != nil && out != nil {
			// 409 (or 400) carries both the error and the apply result.
			return nil, &refusal{ApplyOutput: out, Err: AsError(err, "apply")}
		}
		return out, err
	})
}
