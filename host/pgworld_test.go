package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/pgdb"
	"github.com/aos-kernel/aos/schemas"
)

// One throwaway cluster serves the package's Postgres tests (each keeps to
// a schema of its own); the other tests never start it.
func TestMain(m *testing.M) { pgtest.Main(m) }

var pgSchemas atomic.Int64

// pgURL is the shared cluster's URL and a schema no other test uses.
func pgURL(t *testing.T) (string, string) {
	t.Helper()
	return pgtest.Shared(t).URL(""), fmt.Sprintf("hw%d", pgSchemas.Add(1))
}

// A keyed counter on a built-in module: no wasm to build.
const counterManifest = `[
 {"$kind":"defschema","name":"com.test/CountEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountState@1","schema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}},
 {"$kind":"defworkflow","name":"com.test/counter@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[
   {"event":"com.test/CountEvent@1","workflow":"com.test/counter@1","key_field":"key"}]}}
]`

func counterModule() modules.Builtin {
	return modules.Builtin{Name: "test/counter", Identity: "test/counter@1", Entrypoints: map[string]modules.StepFunc{
		"step": func(in *modules.Input) (*modules.Output, error) {
			var ev, st struct {
				Key   string `cbor:"key"`
				By    int64  `cbor:"by"`
				Count int64  `cbor:"count"`
			}
			if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
				return nil, err
			}
			if in.State != nil {
				if err := schemas.UnmarshalTrusted(in.State, &st); err != nil {
					return nil, err
				}
			}
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": st.Count + ev.By})}, nil
		}}}
}

// openPG opens the world in dir as `aosd serve` does, with the counter.
func openPG(t *testing.T, dir string, ttl time.Duration) (*host.Host, error) {
	t.Helper()
	return host.Open(context.Background(), dir, host.Options{Listen: "127.0.0.1:0", Modules: []modules.Builtin{counterModule()},
		Store: host.StoreOptions{LeaseTTL: ttl}})
}

func applyCounter(t *testing.T, b api.Backend) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.json"), []byte(counterManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := b.Apply(context.Background(), api.ApplyRequest{Path: filepath.Join(dir, "m.json")})
	if err != nil || !out.Applied {
		t.Fatalf("apply: %+v %v", out, err)
	}
}

func count(key string, by int) api.Event {
	return api.Event{Schema: "com.test/CountEvent@1", Value: json.RawMessage(fmt.Sprintf(`{"key":%q,"by":%d}`, key, by))}
}

// cellCount is the counter's state for key, -1 when there is no cell.
func cellCount(t *testing.T, b api.Backend, key string) int {
	t.Helper()
	c, err := b.Cell(context.Background(), "com.test/counter@1", key)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Code == api.CodeNotFound {
		return -1
	}
	if err != nil {
		t.Fatalf("cell %s: %v", key, err)
	}
	var st struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(c.State, &st); err != nil {
		t.Fatal(err)
	}
	return st.Count
}

// TestPostgresWorld: init --postgres makes a world whose directory holds
// only postgres.json (no password in it, no token, no key, no store): the
// token, key and journal are in the database. A second directory joins the
// same world. The world serves, keeps what it acknowledged across a
// reopen, and reads work while it is closed.
func TestPostgresWorld(t *testing.T) {
	url, schema := pgURL(t)
	withPassword := strings.Replace(url, "postgres@", "postgres:s3cret-pw@", 1)
	dir := filepath.Join(t.TempDir(), "a")
	c, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: withPassword, Schema: schema}, kernel.Config{}, host.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.PasswordNotWritten || c.Joined || !strings.HasPrefix(c.World, "world:") || c.Postgres.Schema != schema {
		t.Fatalf("created %+v", c)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		if e.Name() != host.WasmCacheDir { // the node's compiled code
			names = append(names, e.Name())
		}
	}
	if len(names) != 1 || names[0] != host.PostgresFile {
		t.Fatalf("the world directory holds %v, want only %s (and the node's %s)", names, host.PostgresFile, host.WasmCacheDir)
	}
	pj, _ := os.ReadFile(filepath.Join(dir, host.PostgresFile))
	if strings.Contains(string(pj), "s3cret") || !strings.Contains(string(pj), schema) {
		t.Fatalf("postgres.json:\n%s", pj)
	}
	if _, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err == nil {
		t.Fatal("init over a world directory succeeded")
	}

	dirB := filepath.Join(t.TempDir(), "b")
	j, err := host.InitPostgres(host.Dir(dirB), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !j.Joined || j.World != c.World || j.ExecutorPublicKey != c.ExecutorPublicKey || j.Postgres.Node == c.Postgres.Node {
		t.Fatalf("joined %+v; created %+v", j, c)
	}
	tokA, errA := host.Dir(dir).Token()
	tokB, errB := host.Dir(dirB).Token()
	if errA != nil || errB != nil || tokA == "" || tokA != tokB {
		t.Fatalf("tokens %q %v, %q %v: want one token, from the database", tokA, errA, tokB, errB)
	}

	h, err := openPG(t, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	applyCounter(t, h.Local())
	for i := range 5 {
		if _, err := h.Local().Send(context.Background(), []api.Event{count("k", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed: a read opens it without its lease; the other node serves it.
	r, err := host.Connect(context.Background(), host.Dir(dir), host.ConnectOptions{ReadOnly: true,
		Config: kernel.Config{Builtins: builtinsOf(t, counterModule())}})
	if err != nil {
		t.Fatal(err)
	}
	if n := cellCount(t, r, "k"); n != 15 {
		t.Fatalf("read-only: count %d, want 15", n)
	}
	r.Close()
	hb, err := openPG(t, dirB, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	if n := cellCount(t, hb.Local(), "k"); n != 15 {
		t.Fatalf("on the other node: count %d, want 15", n)
	}
	if hb.Kernel().Identity() != c.World {
		t.Fatalf("identity %s, want %s", hb.Kernel().Identity(), c.World)
	}
	// Its backup is PostgreSQL's to make: the API says so for good (501),
	// naming the schema and the tool, rather than "try again" (503).
	req, _ := http.NewRequest("GET", "http://"+hb.Addr()+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+hb.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), "unsupported") ||
		!strings.Contains(string(body), "pg_dump --schema="+schema) {
		t.Fatalf("GET /v1/backup of a world on PostgreSQL: %d %s; want 501 unsupported naming pg_dump --schema=%s", resp.StatusCode, body, schema)
	}
}

func builtinsOf(t *testing.T, ms ...modules.Builtin) *modules.Builtins {
	t.Helper()
	b := modules.NewBuiltins()
	for _, m := range ms {
		if err := b.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestPostgresOwnedElsewhere: while one node serves a world, another
// node's open as owner is refused, naming the owner and its address; its
// reads go through the owner (Connect finds it in the lease).
func TestPostgresOwnedElsewhere(t *testing.T) {
	url, schema := pgURL(t)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{dirA, dirB} {
		if _, err := host.InitPostgres(host.Dir(d), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := openPG(t, dirA, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	applyCounter(t, a.Local())
	if _, err := a.Local().Send(context.Background(), []api.Event{count("x", 7)}); err != nil {
		t.Fatal(err)
	}
	_, err = openPG(t, dirB, time.Minute)
	if !errors.Is(err, host.ErrOwnedElsewhere) || !strings.Contains(err.Error(), a.Addr()) {
		t.Fatalf("second owner: %v; want ErrOwnedElsewhere naming %s", err, a.Addr())
	}
	c, err := host.Connect(context.Background(), host.Dir(dirB), host.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Remote || c.Addr != a.Addr() {
		t.Fatalf("connect from the other node: remote %v at %q; want the owner at %s", c.Remote, c.Addr, a.Addr())
	}
	if n := cellCount(t, c, "x"); n != 7 {
		t.Fatalf("count %d through the owner, want 7", n)
	}
	// Direct and read-only: a reader, without the lease, while A owns.
	rd, err := host.Connect(context.Background(), host.Dir(dirB), host.ConnectOptions{Direct: true, ReadOnly: true,
		Config: kernel.Config{Builtins: builtinsOf(t, counterModule())}})
	if err != nil {
		t.Fatalf("read-only direct connect while another node owns: %v", err)
	}
	if n := cellCount(t, rd, "x"); n != 7 || rd.Remote {
		t.Fatalf("reader: count %d remote %v, want 7 read here", n, rd.Remote)
	}
	if st, err := rd.Status(context.Background()); err != nil || st.Lease == nil || st.Lease.Owner {
		t.Fatalf("reader status: %+v %v; want a lease view, not owner", st, err)
	}
	if _, err := rd.Send(context.Background(), []api.Event{count("x", 1)}); err == nil {
		t.Fatal("a reader acknowledged an event")
	}
	rd.Close()
	if n := cellCount(t, a.Local(), "x"); n != 7 {
		t.Fatalf("after the reader's refused send: count %d on the owner, want 7", n)
	}
	_, err = host.Connect(context.Background(), host.Dir(dirB), host.ConnectOptions{Direct: true})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeLocked || !strings.Contains(err.Error(), a.Addr()) {
		t.Fatalf("direct connect as owner from the other node: %v; want locked, naming %s", err, a.Addr())
	}
}

// TestPostgresStepDown: owner A serves; B takes the lease by force (the
// next epoch). A's next write fails and nothing of it is journaled after
// B's epoch; A says it stepped down (its metric); B serves and holds
// everything A acknowledged.
func TestPostgresStepDown(t *testing.T) {
	url, schema := pgURL(t)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	var nodeB string
	for _, d := range []string{dirA, dirB} {
		c, err := host.InitPostgres(host.Dir(d), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodeB = c.Postgres.Node
	}
	// A long lease: the renewal (every 20 s) does not find the takeover
	// first; the fenced append must.
	a, err := openPG(t, dirA, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	applyCounter(t, a.Local())
	if st, err := a.Local().Status(context.Background()); err != nil || st.Lease == nil || !st.Lease.Owner || st.Lease.Epoch == 0 {
		t.Fatalf("status of the owner: %+v %v", st, err)
	}
	acked := 0
	for i := range 10 {
		if _, err := a.Local().Send(context.Background(), []api.Event{count("k", 1)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		acked++
	}
	heightA := a.Kernel().Journal().Height()

	db, err := pgdb.Open(context.Background(), pgdb.Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lb, err := db.Acquire(context.Background(), pgdb.Claim{Owner: nodeB, Address: "b:1", TTL: time.Minute, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Local().Send(context.Background(), []api.Event{count("k", 100)}); err == nil {
		t.Fatal("the fenced owner acknowledged an event")
	}
	metric := func() string {
		resp, err := httpGet(a, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, want := range []string{"aos_lease_owned 0", fmt.Sprintf("aos_lease_epoch %d", lb.Epoch-1)} {
		if m := metric(); !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, grepLines(m, "aos_lease"))
		}
	}
	_, err = a.Local().Status(context.Background())
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnavailable || !strings.Contains(err.Error(), "stepped down") || !strings.Contains(err.Error(), nodeB) {
		t.Fatalf("status of the fenced owner: %v; want unavailable, stepped down, naming %s", err, nodeB)
	}
	if err := db.Release(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	b, err := openPG(t, dirB, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n := cellCount(t, b.Local(), "k"); n != acked {
		t.Fatalf("B sees count %d, want the %d A acknowledged", n, acked)
	}
	if h := b.Kernel().Journal().Height(); h != heightA {
		t.Fatalf("journal height %d on B, want %d: the fenced owner journaled something", h, heightA)
	}
}

// httpGet GETs path from h's API with its token.
func httpGet(h *host.Host, path string) (string, error) {
	req, err := http.NewRequest("GET", "http://"+h.Addr()+path, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+h.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPostgresStepDownOnRenewal: an owner whose renewal finds another
// owner steps down before any write of its own meets the fence: its status
// says so, its next write is refused, and nothing of it is journaled.
func TestPostgresStepDownOnRenewal(t *testing.T) {
	url, schema := pgURL(t)
	dir := filepath.Join(t.TempDir(), "a")
	if _, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := openPG(t, dir, 600*time.Millisecond) // renewed every 200 ms
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	applyCounter(t, a.Local())
	height := a.Kernel().Journal().Height()
	db, err := pgdb.Open(context.Background(), pgdb.Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Acquire(context.Background(), pgdb.Claim{Owner: "intruder", TTL: time.Hour, Force: true}); err != nil {
		t.Fatal(err)
	}
	// Wait for the renewal to find it (a condition, bounded).
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := a.Local().Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Lease.SteppedDown != "" {
			if st.Lease.Owner || !strings.Contains(st.Lease.SteppedDown, "intruder") {
				t.Fatalf("stepped down: %+v", st.Lease)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after another node took the lease, the owner has not stepped down: %+v", st.Lease)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
	if _, err := a.Local().Send(context.Background(), []api.Event{count("k", 1)}); err == nil || !strings.Contains(err.Error(), "stepped down") {
		t.Fatalf("send after stepping down: %v; want refused, saying it stepped down", err)
	}
	j, err := db.Follow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.Height() != height {
		t.Fatalf("journal height %d in the database, want %d: the node that stepped down journaled something", j.Height(), height)
	}
}

// TestPostgresOneProcessPerNode: a second process (here a second Host) on
// the same node directory is refused by the directory's lock, and does not
// take the node's lease back from the first: the first goes on writing.
func TestPostgresOneProcessPerNode(t *testing.T) {
	url, schema := pgURL(t)
	dir := filepath.Join(t.TempDir(), "a")
	if _, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := openPG(t, dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	applyCounter(t, a.Local())
	if _, err := openPG(t, dir, time.Minute); !errors.Is(err, host.ErrNodeLocked) {
		t.Fatalf("a second serve on one node directory: %v, want ErrNodeLocked", err)
	}
	_, err = host.Connect(context.Background(), host.Dir(dir), host.ConnectOptions{Direct: true})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeLocked {
		t.Fatalf("a direct writer on the node directory: %v, want locked", err)
	}
	if _, err := a.Local().Send(context.Background(), []api.Event{count("k", 2)}); err != nil {
		t.Fatalf("the first process after the second was refused: %v", err)
	}
	if n := cellCount(t, a.Local(), "k"); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
}

// TestPostgresPasswordFromEnvironment: with password authentication, init
// connects with the password its URL carries and writes none; a later
// command without one is refused, saying where aos takes it from; with
// PGPASSWORD it works.
func TestPostgresPasswordFromEnvironment(t *testing.T) {
	cl := pgtest.Start(t)
	ctx := context.Background()
	db, err := pgdb.Open(ctx, pgdb.Config{URL: cl.URL(""), Schema: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, cl.URL(""))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE ROLE aosuser LOGIN PASSWORD 'pw-not-kept'",
		"GRANT CREATE ON DATABASE postgres TO aosuser",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	hba := "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(cl.Dir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	url := fmt.Sprintf("postgres://aosuser:pw-not-kept@127.0.0.1:%d/postgres?sslmode=disable", cl.Port)
	dir := filepath.Join(t.TempDir(), "w")
	c, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: url}, kernel.Config{}, host.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.PasswordNotWritten {
		t.Fatal("init did not say the password was not written")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, host.PostgresFile)); strings.Contains(string(b), "pw-not-kept") {
		t.Fatalf("postgres.json holds the password:\n%s", b)
	}
	if _, err := host.Dir(dir).Token(); err == nil || !strings.Contains(err.Error(), "PGPASSWORD") {
		t.Fatalf("a command without the password: %v; want refused, naming PGPASSWORD", err)
	}
	t.Setenv("PGPASSWORD", "pw-not-kept")
	if tok, err := host.Dir(dir).Token(); err != nil || tok == "" {
		t.Fatalf("with PGPASSWORD: %q %v", tok, err)
	}
}

// TestPostgresRenewalMetrics: while the database cannot renew the owner's
// lease (another session holds its row locked, so each renewal times out),
// aos_lease_renewal_failures_total counts the failures; once it can again,
// aos_lease_renewed_timestamp_seconds moves past the stall, and the node
// still owns the world (a failed renewal is not a lost lease).
func TestPostgresRenewalMetrics(t *testing.T) {
	url, schema := pgURL(t)
	dir := filepath.Join(t.TempDir(), "a")
	if _, err := host.InitPostgres(host.Dir(dir), host.PostgresInit{URL: url, Schema: schema}, kernel.Config{}, host.StoreOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := openPG(t, dir, 3*time.Second) // renewed every second, each renewal given a second
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	metric := func(name string) float64 {
		t.Helper()
		m, err := httpGet(a, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(m, "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == name {
				v, err := strconv.ParseFloat(f[1], 64)
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				return v
			}
		}
		t.Fatalf("no %s in the metrics:\n%s", name, grepLines(m, "aos_lease"))
		return 0
	}
	if f := metric("aos_lease_renewal_failures_total"); f != 0 {
		t.Fatalf("renewal failures before any stall: %v", f)
	}
	taken := metric("aos_lease_renewed_timestamp_seconds")
	if taken == 0 {
		t.Fatal("aos_lease_renewed_timestamp_seconds is 0 after the lease was taken")
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "partitions"}.Sanitize()+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// Wait (bounded) for a renewal to fail on the lock: the next one,
	// within two seconds, times out after one.
	deadline := time.Now().Add(15 * time.Second)
	for metric("aos_lease_renewal_failures_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("15 s with the lease's row locked and no renewal failure counted")
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, with a deadline
	}
	stalled := metric("aos_lease_renewed_timestamp_seconds")
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for metric("aos_lease_renewed_timestamp_seconds") <= stalled {
		if time.Now().After(deadline) {
			t.Fatal("the lease's row unlocked, and no renewal succeeded since")
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, with a deadline
	}
	if metric("aos_lease_owned") != 1 {
		t.Fatal("the node no longer owns the world after renewals failed and resumed")
	}
}
