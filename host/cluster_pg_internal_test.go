package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/pgdb"
)

var clusterSchemas atomic.Int64

// pgWorld makes a world on the shared PostgreSQL cluster (a schema of its
// own) and a node directory for each of nodes; it returns the directories
// and the database's URL and schema.
func pgWorld(t *testing.T, nodes int) (dirs []string, url, schema string) {
	t.Helper()
	url, schema = pgtest.Shared(t).URL(""), fmt.Sprintf("hc%d", clusterSchemas.Add(1))
	for i := range nodes {
		d := filepath.Join(t.TempDir(), fmt.Sprintf("n%d", i))
		if _, err := InitPostgres(Dir(d), PostgresInit{URL: url, Schema: schema}, kernel.Config{}, StoreOptions{}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return dirs, url, schema
}

// pgNode is a node of the world in dir as RunNode makes it, listening on
// loopback, a standby until the test opens the world on it (ownNow); its
// lease view is read from the database, and no loop runs it: the test
// drives it.
func pgNode(t *testing.T, dir string) *Node {
	t.Helper()
	d := Dir(dir)
	pc, err := d.Postgres()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := openPostgresDB(pc, "", StoreOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.db.Close() })
	n := &Node{dir: d, id: pc.Node, co: ClusterOptions{}.WithDefaults(), log: slog.New(slog.DiscardHandler), lease: ps.db,
		lim: api.HTTPLimits{}.WithDefaults(), metrics: api.NewClusterMetrics()}
	n.tokens = func() (*api.TokenSet, error) {
		ts, _, err := loadTokens(pgFiles{ps}, nil)
		return ts, err
	}
	n.standbyMetrics = newNodeMetrics(n.metrics)
	n.proxy = newForwarder(n)
	n.setRole(api.RoleStandby, nil, nil)
	if err := n.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.close() })
	n.open = func(ctx context.Context) (*Host, error) {
		return Open(ctx, dir, Options{Store: StoreOptions{Advertise: n.co.Advertise, LeaseTTL: n.co.Lease}})
	}
	return n
}

// ownNow has n take the free lease at its first look and serve the world
// as its owner; it returns the world and the end of its requests' life.
func ownNow(t *testing.T, n *Node) (*Host, context.CancelFunc) {
	t.Helper()
	h := n.first(context.Background())
	if h == nil {
		t.Fatalf("node %s did not open the world at its first look (lease %+v)", n.id, n.status())
	}
	return h, n.become(h)
}

// TestStandbyStatusCarriesItsView: GET /v1/status through a standby is the
// owner's status with the standby's own cluster view in it (its identity,
// role standby, the owner it forwards to and the epoch it read), so an
// operator asking any node learns what that node thinks.
func TestStandbyStatusCarriesItsView(t *testing.T) {
	dirs, _, _ := pgWorld(t, 2)
	a, b := pgNode(t, dirs[0]), pgNode(t, dirs[1])
	h, end := ownNow(t, a)
	defer func() { end(); a.stepDown(h, "shutdown") }()
	if hb := b.first(context.Background()); hb != nil {
		hb.Close()
		t.Fatalf("a second node opened the world while %s owns it", a.id)
	}
	epoch := a.status().Epoch
	ts, err := b.tokens()
	if err != nil {
		t.Fatal(err)
	}
	tok := ts.Current()
	req, _ := http.NewRequest("GET", "http://"+b.Addr()+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st api.Status
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &st) != nil {
		t.Fatalf("status through the standby: %d %s", resp.StatusCode, body)
	}
	// The rest is the owner's answer.
	if st.World != h.Kernel().Identity() || st.Lease == nil || st.Lease.Node != a.id || !st.Lease.Owner || st.Lease.Epoch != epoch {
		t.Fatalf("status through the standby is not the owner's: world %s lease %+v; want %s, owner %s at epoch %d",
			st.World, st.Lease, h.Kernel().Identity(), a.id, epoch)
	}
	want := api.ClusterStatus{Node: b.id, Role: api.RoleStandby, Owner: a.id, OwnerAddress: a.Addr(), Epoch: epoch, Address: b.Addr()}
	if st.Cluster == nil || *st.Cluster != want {
		t.Fatalf("cluster view through the standby %+v, want the standby's own %+v", st.Cluster, want)
	}
	if epoch == 0 || a.id == b.id {
		t.Fatalf("epoch %d, nodes %s and %s: the test proves nothing", epoch, a.id, b.id)
	}
}

// schemaOnlyManifest is a manifest whose apply journals a record and
// needs no module.
const schemaOnlyManifest = `[
 {"$kind":"defschema","name":"com.test/Note@1","schema":{"type":"string"}},
 {"$kind":"manifest","name":"com.test/notes","routing":{"subscriptions":[]}}
]`

// TestOwnerStepsDownWhenFenced: an owner whose lease another node took
// (pgdb Acquire with Force: the next epoch) and whose write then met the
// fence steps down at its next check ("fenced"), ending its requests'
// life; before that, each check keeps it serving. The test drives the
// checks with its own ticks: a check that does not step down is seen at
// once, as the owner taking the next tick.
func TestOwnerStepsDownWhenFenced(t *testing.T) {
	dirs, url, schema := pgWorld(t, 1)
	n := pgNode(t, dirs[0])
	h, end := ownNow(t, n)
	n.mu.RLock()
	life := n.life
	n.mu.RUnlock()
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time) // unbuffered: a send returns once own took it
	done := make(chan string, 1)
	go func() { done <- n.own(ctx, h, end, ticks) }()
	defer func() {
		cancel()
		n.stepDown(h, <-done)
	}()
	// tick has the owner check once more; it returns why the owner
	// stepped down instead, if it did.
	tick := func() (string, bool) {
		select {
		case ticks <- time.Time{}:
			return "", true
		case reason := <-done:
			done <- reason
			return reason, false
		}
	}
	for i := range 2 {
		if reason, ok := tick(); !ok {
			t.Fatalf("the owner stepped down (%q) at check %d while it held the lease", reason, i)
		}
	}

	db, err := pgdb.Open(context.Background(), pgdb.Config{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	taken, err := db.Acquire(context.Background(), pgdb.Claim{Owner: "intruder", Address: "127.0.0.1:1", TTL: time.Hour, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if taken.Epoch != n.status().Epoch+1 {
		t.Fatalf("the takeover's epoch %d, want %d", taken.Epoch, n.status().Epoch+1)
	}
	mf := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(mf, []byte(schemaOnlyManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := h.Local().Apply(context.Background(), api.ApplyRequest{Path: mf}); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("a manifest applied on the owner whose lease was taken: %+v %v; want refused by the fence", out, err)
	}
	if reason, ok := tick(); !ok {
		t.Fatalf("the owner stepped down (%q) before its check", reason)
	}
	select {
	case reason := <-done:
		if reason != "fenced" {
			t.Fatalf("stepped down %q, want fenced", reason)
		}
		done <- reason
	case ticks <- time.Time{}:
		t.Fatal("the owner went on serving after a check that found its lease taken and its write fenced")
	}
	if life.Err() == nil {
		t.Fatal("the owner's requests go on living after it stepped down")
	}
}

// TestOneNodeProcessPerDirectory: a second `aosd serve` on a node
// directory another process serves as a standby (holding no lease) is
// refused at once, naming the lock, rather than running beside it as a
// second standby that finds the directory locked whenever the lease is free.
func TestOneNodeProcessPerDirectory(t *testing.T) {
	dirs, _, _ := pgWorld(t, 2)
	owner, err := Open(context.Background(), dirs[1], Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunNode(ctx, dirs[0], Options{Listen: "127.0.0.1:0", Ready: func(addr string) { ready <- addr }}, ClusterOptions{})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the first node ended before serving: %v", err)
	}
	// Bounded: without the lock the second process would run as a standby
	// until this ends, and return no error.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	err = RunNode(sctx, dirs[0], Options{Listen: "127.0.0.1:0"}, ClusterOptions{})
	if !errors.Is(err, ErrNodeLocked) || !strings.Contains(err.Error(), NodeLockFile) {
		t.Errorf("a second node process on the same directory: %v; want ErrNodeLocked naming %s", err, NodeLockFile)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the first node: %v", err)
	}
}
