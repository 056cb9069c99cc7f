package api

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxTokenGrace bounds how long a rotated-out token stays accepted.
const MaxTokenGrace = 24 * time.Hour

// TokenSet is the bearer tokens a server accepts: the current one and,
// after a rotation with a grace, the one before it until the grace ends
// (the host keeps that grace in the world's files, so a restart or a
// failover keeps it: host.TokenGraceFile). Safe for concurrent use.
type TokenSet struct {
	mu       sync.RWMutex
	cur, old []byte // "Bearer " + token
	oldUntil time.Time
	now      func() time.Time
}

// NewTokenSet accepts tok. now is the clock graces are measured on (nil:
// time.Now).
func NewTokenSet(tok string, now func() time.Time) *TokenSet {
	if now == nil {
		now = time.Now
	}
	return &TokenSet{cur: []byte("Bearer " + tok), now: now}
}

// Check says whether an Authorization header value carries an accepted
// token. Each comparison takes constant time.
func (s *TokenSet) Check(header string) bool {
	got := []byte(header)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.cur) > len("Bearer ") && subtle.ConstantTimeCompare(got, s.cur) == 1 {
		return true
	}
	return s.old != nil && s.now().Before(s.oldUntil) && subtle.ConstantTimeCompare(got, s.old) == 1
}

// Rotate makes next the current token. With a positive grace the token it
// replaces stays accepted that long, and any earlier one is dropped; with
// none only next is accepted. It returns when the old token stops being
// accepted (the zero time: at once).
func (s *TokenSet) Rotate(next string, grace time.Duration) time.Time {
	var until time.Time
	if grace > 0 {
		until = s.now().Add(grace)
	}
	return s.RotateUntil(next, until)
}

// RotateUntil is Rotate with the end of the grace given as a time (the
// zero time: none).
func (s *TokenSet) RotateUntil(next string, until time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.cur
	s.cur = []byte("Bearer " + next)
	s.old, s.oldUntil = nil, time.Time{}
	if until.After(s.now()) && len(prev) > len("Bearer ") && subtle.ConstantTimeCompare(prev, s.cur) != 1 {
		s.old, s.oldUntil = prev, until
	}
	return s.oldUntil
}

// Previous is the token a rotation replaced and when it stops being
// accepted ("" and the zero time when none is).
func (s *TokenSet) Previous() (string, time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.old == nil || !s.now().Before(s.oldUntil) {
		return "", time.Time{}
	}
	return strings.TrimPrefix(string(s.old), "Bearer "), s.oldUntil
}

// Current is the current token.
func (s *TokenSet) Current() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return strings.TrimPrefix(string(s.cur), "Bearer ")
}

// TokenRotation is the answer of POST /v1/token/rotate and `aosd token
// rotate --json` (which leaves out Token: it is in the file).
type TokenRotation struct {
	// Token is the new token (the API's answer only).
	Token string `json:"token,omitempty"`
	// File is the world's token file, which holds it.
	File string `json:"file"`
	// GraceMs is how long the token it replaced stays accepted;
	// OldValidUntil when that ends (null: it was refused at once, or no
	// daemon served the world).
	GraceMs       int64      `json:"grace_ms"`
	OldValidUntil *time.Time `json:"old_valid_until"`
	// Daemon says a running daemon rotated it (and accepts it already).
	Daemon bool `json:"daemon"`
}

// TokenRotateRequest is POST /v1/token/rotate's body.
type TokenRotateRequest struct {
	GraceMs int64 `json:"grace_ms,omitempty"`
}

// CheckGrace refuses a grace out of range (0..MaxTokenGrace), naming
// grace_ms.
func CheckGrace(ms int64) (time.Duration, error) {
	if ms < 0 || ms > MaxTokenGrace.Milliseconds() {
		return 0, newError(http.StatusBadRequest, CodeInvalidInput, "grace_ms", "grace_ms %d: want 0..%d (24 hours)", ms, MaxTokenGrace.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// rotateTokenRoute is POST /v1/token/rotate.
func (s *Server) rotateTokenRoute(w http.ResponseWriter, r *http.Request) {
	var req TokenRotateRequest
	s.handle(w, r, "token rotate", body{into: &req, shape: `{"grace_ms": N}`}, func() (any, error) {
		grace, err := CheckGrace(req.GraceMs)
		if err != nil {
			return nil, err
		}
		if s.RotateToken == nil {
			return nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "token rotate", "this server cannot rotate its token (it keeps no token file)")
		}
		return s.RotateToken(grace)
	})
}

// RotateToken asks the daemon to rotate its token (POST /v1/token/rotate):
// it accepts the new one at once and the one before it for grace.
func (c *Client) RotateToken(ctx context.Context, grace time.Duration) (*TokenRotation, error) {
	var out TokenRotation
	if err := c.call(ctx, "POST", "/v1/token/rotate", TokenRotateRequest{GraceMs: grace.Milliseconds()}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
