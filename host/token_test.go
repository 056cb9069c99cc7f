package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// accepts says whether h's API accepts tok.
func accepts(t *testing.T, h *host.Host, tok string) bool {
	t.Helper()
	_, err := (&api.Client{Base: "http://" + h.Addr(), Token: tok}).Status(context.Background())
	if ae, ok := err.(*api.Error); ok && ae.Code == api.CodeUnauthorized {
		return false
	}
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return true
}

// rotate rotates h's token through its API with grace, holding tok.
func rotate(t *testing.T, h *host.Host, tok string, grace time.Duration) string {
	t.Helper()
	r, err := (&api.Client{Base: "http://" + h.Addr(), Token: tok}).RotateToken(context.Background(), grace)
	if err != nil || r.Token == "" {
		t.Fatalf("rotate: %+v %v", r, err)
	}
	return r.Token
}

// wantTokens checks which of toks h accepts.
func wantTokens(t *testing.T, when string, h *host.Host, toks map[string]bool) {
	t.Helper()
	for tok, want := range toks {
		if got := accepts(t, h, tok); got != want {
			t.Errorf("%s: token %.8s… accepted %v, want %v", when, tok, got, want)
		}
	}
}

// TestTokenGraceOutlivesRestart: a rotation's grace is kept in the world's
// files (token.grace), so a daemon that restarts during it still accepts
// the old token until it ends; a rotation without grace, a grace that
// ended, and a grace file that cannot be read accept only the current
// token, and the last still opens the world.
func TestTokenGraceOutlivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := host.Init(host.Dir(dir), kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	open := func() *host.Host {
		t.Helper()
		h, err := host.Open(context.Background(), dir, host.Options{Listen: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tok0, err := host.Dir(dir).Token()
	if err != nil {
		t.Fatal(err)
	}
	h := open()
	tok1 := rotate(t, h, tok0, 10*time.Minute)
	h.Close()
	h = open()
	wantTokens(t, "restart within the grace", h, map[string]bool{tok0: true, tok1: true, "wrong": false})
	tok2 := rotate(t, h, tok1, 0)
	h.Close()
	h = open()
	wantTokens(t, "restart after a rotation without grace", h, map[string]bool{tok0: false, tok1: false, tok2: true})
	h.Close()

	grace := host.Dir(dir).Path(host.TokenGraceFile)
	past := `{"token":"` + tok1 + `","until":"` + time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano) + `"}`
	if err := os.WriteFile(grace, []byte(past), 0o600); err != nil {
		t.Fatal(err)
	}
	h = open()
	wantTokens(t, "a grace that ended", h, map[string]bool{tok1: false, tok2: true})
	h.Close()
	if err := os.WriteFile(grace, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	h = open()
	wantTokens(t, "an unreadable grace file", h, map[string]bool{tok1: false, tok2: true})
	h.Close()
}

// TestTokenGraceOutlivesFailover: on a world on PostgreSQL the grace is in
// the database, so the node that opens the world after its owner stopped
// accepts the old token until the grace ends, as the owner did.
func TestTokenGraceOutlivesFailover(t *testing.T) {
	url, schema := pgURL(t)
	a, b := host.Dir(filepath.Join(t.TempDir(), "a")), host.Dir(filepath.Join(t.TempDir(), "b"))
	for _, d := range []host.Dir{a, b} {
		if _, err := host.InitPostgres(d, host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tok0, err := a.Token()
	if err != nil {
		t.Fatal(err)
	}
	ha, err := openPG(t, string(a), 0)
	if err != nil {
		t.Fatal(err)
	}
	tok1 := rotate(t, ha, tok0, 10*time.Minute)
	ha.Close()
	hb, err := openPG(t, string(b), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	wantTokens(t, "the next owner within the grace", hb, map[string]bool{tok0: true, tok1: true, "wrong": false})
}
