package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// MaxTokenGrace bounds how long a rotated-out token stays accepted.
const MaxTokenGrace = 24 * time.Hour

// TokenSet is the bearer tokens a server accepts: the current one and,
// after a rotation with a grace, the one before it until the grace ends
// (in this process's memory only: a restart forgets it). Safe for
// concurrent use.
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
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.cur
	s.cur = []byte("Bearer " + next)
	s.old, s.oldUntil = nil, time.Time{}
	if grace > 0 && len(prev) > len("Bearer ") && subtle.ConstantTimeCompare(prev, s.cur) != 1 {
		s.old, s.oldUntil = prev, s.now().Add(grace)
	}
	return s.oldUntil
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

// checkGrace refuses a grace out of range, naming grace_ms.
func checkGrace(ms int64) (time.Duration, error) {
	if ms < 0 || ms > MaxTokenGrace.Milliseconds() {
		return 0, newError(http.StatusBadRequest, CodeInvalidInput, "grace_ms", "grace_ms %d: want 0..%d (24 hours)", ms, MaxTokenGrace.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// newToken makes a fresh token as Init does.
func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteToken replaces the world's token file atomically (a new file, synced,
// renamed over the old, the directory synced), mode 0600.
func (d Dir) WriteToken(tok string) error {
	tmp := d.Path(TokenFile + ".tmp")
	os.Remove(tmp)
	if err := writeNew(tmp, []byte(tok+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp, d.Path(TokenFile)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", d.Path(TokenFile), err)
	}
	return syncDir(string(d))
}

// checkTokenText refuses a token file's text that cannot be a bearer
// token: empty, or with characters a header value cannot carry.
func checkTokenText(path, tok string) error {
	if tok == "" {
		return fmt.Errorf("%s is empty", path)
	}
	for _, c := range tok {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("%s holds a character a bearer token cannot carry (%q)", path, c)
		}
	}
	return nil
}

// rotateToken writes a fresh token to the world's file and, once it is
// durable, makes the server accept it, the old one for grace.
func (h *Host) rotateToken(grace time.Duration) (*TokenRotation, error) {
	h.tokMu.Lock()
	defer h.tokMu.Unlock()
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	if err := h.dir.WriteToken(tok); err != nil {
		return nil, err
	}
	until := h.tokens.Rotate(tok, grace)
	h.log.Info("token rotated", "file", h.dir.Path(TokenFile), "grace", grace)
	out := &TokenRotation{Token: tok, File: h.dir.Path(TokenFile), GraceMs: grace.Milliseconds(), Daemon: true}
	if !until.IsZero() {
		out.OldValidUntil = &until
	}
	return out, nil
}

// ReloadToken makes the server accept the token the world's file holds now
// (after an operator replaced it, e.g. on SIGHUP), the one it replaces for
// grace. A file that cannot be read, or holds no usable token, changes
// nothing.
func (h *Host) ReloadToken(grace time.Duration) (changed bool, err error) {
	h.tokMu.Lock()
	defer h.tokMu.Unlock()
	tok, err := h.dir.Token()
	if err != nil {
		return false, err
	}
	if err := checkTokenText(h.dir.Path(TokenFile), tok); err != nil {
		return false, err
	}
	if tok == h.tokens.Current() {
		return false, nil
	}
	h.tokens.Rotate(tok, grace)
	h.log.Info("token reloaded", "file", h.dir.Path(TokenFile), "grace", grace)
	return true, nil
}

// RotateToken rotates the token of the world in d: through its daemon when
// one serves it (which accepts the new token at once, and the old one for
// grace), else by writing a fresh token file (no process holds the old one
// then, and grace does not apply).
func RotateToken(ctx context.Context, d Dir, opt ConnectOptions, grace time.Duration) (*TokenRotation, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if _, err := checkGrace(grace.Milliseconds()); err != nil {
		return nil, err
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if found.client != nil {
		var out TokenRotation
		if err := found.client.call(ctx, "POST", "/v1/token/rotate", TokenRotateRequest{GraceMs: grace.Milliseconds()}, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	if found.info != nil {
		// A daemon is alive but does not answer: it would go on accepting
		// the token the file no longer holds.
		return nil, &Error{Code: CodeLocked, Where: string(d), Message: fmt.Sprintf(
			"world is served by aosd serve (pid %d, %s) which does not answer (%v); the token was not rotated (the daemon would go on accepting the old one)",
			found.info.PID, found.info.Addr, found.probeErr)}
	}
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	if err := d.WriteToken(tok); err != nil {
		return nil, err
	}
	return &TokenRotation{File: d.Path(TokenFile)}, nil
}

// rotateTokenRoute is POST /v1/token/rotate.
func (s *Server) rotateTokenRoute(w http.ResponseWriter, r *http.Request) {
	var req TokenRotateRequest
	s.handle(w, r, "token rotate", body{into: &req, shape: `{"grace_ms": N}`}, func() (any, error) {
		grace, err := checkGrace(req.GraceMs)
		if err != nil {
			return nil, err
		}
		if s.RotateToken == nil {
			return nil, newError(http.StatusServiceUnavailable, CodeUnavailable, "token rotate", "this server cannot rotate its token (it keeps no token file)")
		}
		return s.RotateToken(grace)
	})
}
