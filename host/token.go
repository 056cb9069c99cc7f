package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/aos-kernel/aos/api"
)

// newToken makes a fresh token as Init does.
func newToken() (string, error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// WriteToken replaces the world's token file atomically (a new file, synced,
// renamed over the old, the directory synced), mode 0600. A world on
// PostgreSQL keeps its token in the database, which only its owner writes:
// see RotateToken.
func (d Dir) WriteToken(tok string) error { return writeToken(dirFiles(d), tok) }

// writeToken replaces the token in the world's files.
func writeToken(f files, tok string) error { return f.write(TokenFile, []byte(tok+"\n")) }

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

// TokenGraceFile is the world file that keeps a token rotation's grace: the
// token the rotation replaced and until when it stays accepted, as JSON
// {"token", "until"} (mode 0600, as the token; in the database for a world
// on PostgreSQL). It is written before the new token, so the world's files
// never hold a new token whose rotation forgot the old one, and read at
// every open: a restart, or a failover to another node, keeps accepting
// the old token until the grace ends. After the grace, or after a rotation
// without one, it holds nothing that is accepted.
const TokenGraceFile = "token.grace"

// tokenGrace is TokenGraceFile's content.
type tokenGrace struct {
	Token string    `json:"token,omitempty"`
	Until time.Time `json:"until,omitzero"`
}

// writeGrace records that old stays accepted until until (the zero time:
// no token but the current one is).
func writeGrace(f files, old string, until time.Time) error {
	g := tokenGrace{}
	if !until.IsZero() && old != "" {
		g = tokenGrace{Token: old, Until: until.UTC()}
	}
	b, _ := json.Marshal(g)
	return f.write(TokenGraceFile, append(b, '\n'))
}

// loadTokens is the token set of the world whose files are f: its token,
// and the one a rotation replaced while that rotation's grace lasts. A
// grace file that is missing (a world from before it, or never rotated)
// grants nothing; one that cannot be read grants nothing and is logged:
// the grace is a courtesy to clients still holding the old token, never a
// reason to refuse to open the world.
func loadTokens(f files, log *slog.Logger) (*api.TokenSet, string, error) {
	tok, err := readToken(f)
	if err != nil {
		return nil, "", err
	}
	ts := api.NewTokenSet(tok, nil)
	b, err := f.read(TokenGraceFile)
	if errors.Is(err, fs.ErrNotExist) {
		return ts, tok, nil
	}
	var g tokenGrace
	if err == nil {
		err = json.Unmarshal(b, &g)
	}
	if err == nil && g.Token != "" {
		err = checkTokenText(f.where(TokenGraceFile), g.Token)
	}
	if err != nil {
		if log != nil {
			log.Warn("token grace not restored: only the current token is accepted", "file", f.where(TokenGraceFile), "err", err)
		}
		return ts, tok, nil
	}
	if g.Token != "" {
		// The set holds g.Token as current for a moment, then tok with
		// g.Token for what is left of the grace (nothing once it ended).
		ts = api.NewTokenSet(g.Token, nil)
		ts.RotateUntil(tok, g.Until)
	}
	return ts, tok, nil
}

// rotateToken writes a fresh token to the world's file and, once it is
// durable, makes the server accept it, the old one for grace.
func (h *Host) rotateToken(grace time.Duration) (*api.TokenRotation, error) {
	h.tokMu.Lock()
	defer h.tokMu.Unlock()
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	var until time.Time
	if grace > 0 {
		until = time.Now().Add(grace)
	}
	if err := writeGrace(h.store.files, h.tokens.Current(), until); err != nil {
		return nil, err
	}
	if err := writeToken(h.store.files, tok); err != nil {
		return nil, err
	}
	until = h.tokens.RotateUntil(tok, until)
	h.log.Info("token rotated", "file", h.store.files.where(TokenFile), "grace", grace)
	out := &api.TokenRotation{Token: tok, File: h.store.files.where(TokenFile), GraceMs: grace.Milliseconds(), Daemon: true}
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
	tok, err := readToken(h.store.files)
	if err != nil {
		return false, err
	}
	if err := checkTokenText(h.store.files.where(TokenFile), tok); err != nil {
		return false, err
	}
	if tok == h.tokens.Current() {
		return false, nil
	}
	var until time.Time
	if grace > 0 {
		until = time.Now().Add(grace)
	}
	if err := writeGrace(h.store.files, h.tokens.Current(), until); err != nil {
		return false, err
	}
	h.tokens.RotateUntil(tok, until)
	h.log.Info("token reloaded", "file", h.store.files.where(TokenFile), "grace", grace)
	return true, nil
}

// RotateToken rotates the token of the world in d: through its daemon when
// one serves it (which accepts the new token at once, and the old one for
// grace), else by writing a fresh token file (no process holds the old one
// then, and grace does not apply).
func RotateToken(ctx context.Context, d Dir, opt ConnectOptions, grace time.Duration) (*api.TokenRotation, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if _, err := api.CheckGrace(grace.Milliseconds()); err != nil {
		return nil, err
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if found.client != nil {
		return found.client.RotateToken(ctx, grace)
	}
	if found.info != nil {
		// A daemon is alive but does not answer: it would go on accepting
		// the token the file no longer holds.
		return nil, &api.Error{Code: api.CodeLocked, Where: string(d), Message: fmt.Sprintf(
			"world is served by aosd serve (pid %d, %s) which does not answer (%v); the token was not rotated (the daemon would go on accepting the old one)",
			found.info.PID, found.info.Addr, found.probeErr)}
	}
	pc, err := d.Postgres()
	if err != nil {
		return nil, err
	}
	if pc != nil {
		return rotatePostgresToken(ctx, d, pc, opt, grace)
	}
	tok, err := newToken()
	if err != nil {
		return nil, err
	}
	if err := d.WriteToken(tok); err != nil {
		return nil, err
	}
	return &api.TokenRotation{File: d.Path(TokenFile)}, nil
}

// rotatePostgresToken is RotateToken for a world on PostgreSQL that no
// daemon of this directory serves: through the node that owns it, when
// one answers, else here as its owner (taking the lease for the write, and
// releasing it after).
func rotatePostgresToken(ctx context.Context, d Dir, pc *PostgresConfig, opt ConnectOptions, grace time.Duration) (*api.TokenRotation, error) {
	pg, err := openPostgresDB(pc, "", opt.Store, nil)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", d, err)
	}
	pg.dir = d
	if !opt.Direct {
		if c, ok := ownerClient(ctx, pg); ok {
			pg.close()
			return c.RotateToken(ctx, grace)
		}
	}
	if err := pg.open(opt.Store, roleOwner); err != nil {
		return nil, fmt.Errorf("world %s: the token was not rotated: %w", d, err)
	}
	f := pgFiles{pg}
	tok, err := newToken()
	if err == nil {
		err = writeToken(f, tok)
	}
	if err = errors.Join(err, pg.close()); err != nil {
		return nil, err
	}
	return &api.TokenRotation{File: f.where(TokenFile)}, nil
}
