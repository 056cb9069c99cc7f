package main_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// The failover tests run a world on a real PostgreSQL (a throwaway
// cluster, internal/pgtest) served by real aosd processes, one world
// directory each, all naming the same database: one owns the world, the
// others are standbys that forward to it. The owner is SIGKILLed or
// SIGSTOPped, or the database crashes, while clients send keyed events.
//
// Test leases are short (failoverLease) so the tests spend little time
// waiting for one to lapse; BenchmarkFailover uses aosd serve's defaults.

const (
	failoverLease = 2 * time.Second
	failoverPoll  = 250 * time.Millisecond
	// failoverWait bounds how long a test waits for a takeover or for
	// clients' progress before it fails (a hang guard, not a timing
	// assertion: a healthy run takes a few seconds).
	failoverWait = 2 * time.Minute
)

// pgNode is one aosd serve of a world on PostgreSQL.
type pgNode struct {
	dir string
	id  string // its identity, the lease's owner while it owns
	// env is added to aosd serve's environment (nil: snapshots every 300
	// records, so the tests' kills land in and around snapshots).
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	addr string
	errb *syncBuffer
}

// nodeWorld is a world on a PostgreSQL cluster and the nodes serving it.
type nodeWorld struct {
	pg    *pgtest.Cluster
	url   string
	nodes []*pgNode
	tok   string
}

// newNodeWorld starts a PostgreSQL cluster (pg may be a shared one: then the
// world gets a schema of its own) and makes n world directories on it.
func newNodeWorld(t testing.TB, pg *pgtest.Cluster, n int) *nodeWorld {
	t.Helper()
	w := &nodeWorld{pg: pg, url: pg.URL("")}
	schema := fmt.Sprintf("w%d", time.Now().UnixNano())
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
		ok(t, dir, "init", "--postgres", w.url, "--schema", schema)
		node := &pgNode{dir: dir, id: pgNodeID(t, dir)}
		w.nodes = append(w.nodes, node)
	}
	w.tok = pgToken(t, w.url, schema)
	return w
}

// pgNodeID is the node identity init wrote to dir's postgres.json.
func pgNodeID(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "postgres.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		Node string `json:"node"`
	}
	if err := json.Unmarshal(b, &pc); err != nil || pc.Node == "" {
		t.Fatalf("%s/postgres.json: no node (%v): %s", dir, err, b)
	}
	return pc.Node
}

// pgToken is the world's API token, read from its world files in the
// database as a node reads it.
func pgToken(t testing.TB, url, schema string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tok []byte
	if err := conn.QueryRow(ctx, "SELECT data FROM "+pgx.Identifier{schema, "world_files"}.Sanitize()+" WHERE name = 'token'").Scan(&tok); err != nil {
		t.Fatalf("read the world's token from schema %s: %v", schema, err)
	}
	return strings.TrimSpace(string(tok))
}

// start runs aosd serve for the node and waits for its address.
func (n *pgNode) start(t testing.TB, extra ...string) {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--world", n.dir,
		"--lease", failoverLease.String(), "--standby-poll", failoverPoll.String()}, extra...)
	env := n.env
	if env == nil {
		env = []string{"AOS_SNAPSHOT_EVERY=300"}
	}
	cmd, addr, errb := launch(t, aosdBin, args, env)
	n.mu.Lock()
	n.cmd, n.errb, n.addr = cmd, errb, addr
	n.mu.Unlock()
}

// kill SIGKILLs the node and waits for it.
func (n *pgNode) kill(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	cmd := n.cmd
	n.addr = ""
	n.mu.Unlock()
	cmd.Process.Kill()
	cmd.Wait()
}

// stop ends the node with SIGTERM: it must exit 0.
func (n *pgNode) stop(t testing.TB) {
	t.Helper()
	n.mu.Lock()
	cmd, errb := n.cmd, n.errb
	n.addr = ""
	n.mu.Unlock()
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve %s exited with %v\n%s", n.dir, err, errb.String())
	}
}

func (n *pgNode) address() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

func (n *pgNode) logs() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.errb == nil {
		return ""
	}
	return n.errb.String()
}

// pgStatus is GET /v1/status with its cluster view.
type pgStatus struct {
	JournalHeight uint64             `json:"journal_height"`
	Inflight      int                `json:"inflight"`
	Cluster       *api.ClusterStatus `json:"cluster"`
}

// status asks the node; err when it does not answer 200.
func (w *nodeWorld) status(ctx context.Context, n *pgNode) (pgStatus, error) {
	var st pgStatus
	addr := n.address()
	if addr == "" {
		return st, fmt.Errorf("%s is down", n.dir)
	}
	code, b, err := crashHTTP(ctx, addr, w.tok, "GET", "/v1/status", nil)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("status %d: %s", code, b)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Cluster == nil {
		return st, fmt.Errorf("status without cluster (%v): %s", err, b)
	}
	return st, nil
}

// owner waits until a node says it owns the world with an epoch above
// after, and returns it with its status.
func (w *nodeWorld) owner(t testing.TB, after uint64) (*pgNode, pgStatus) {
	t.Helper()
	deadline := time.Now().Add(failoverWait)
	for time.Now().Before(deadline) {
		for _, n := range w.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := w.status(ctx, n)
			cancel()
			if err == nil && st.Cluster.Role == api.RoleOwner && st.Cluster.Epoch > after {
				return n, st
			}
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
	var logs strings.Builder
	for _, n := range w.nodes {
		fmt.Fprintf(&logs, "--- %s\n%s\n", n.dir, n.logs())
	}
	t.Fatalf("no node owns the world with an epoch above %d after %s\n%s", after, failoverWait, logs.String())
	return nil, pgStatus{}
}

// sendEvent posts one counter event through node n (any node: a standby
// forwards it). It returns the seq of an acknowledged event, or 0 when
// there was no acknowledgment (transport error, 503): the caller resends
// under the same key.
func (w *nodeWorld) sendEvent(ctx context.Context, n *pgNode, key, idem string) (uint64, error) {
	addr := n.address()
	if addr == "" {
		return 0, nil
	}
	body, _ := json.Marshal(map[string]any{"schema": "com.example/CountEvent@1", "value": map[string]any{"key": key, "by": 1}, "idempotency_key": idem})
	code, b, err := crashHTTP(ctx, addr, w.tok, "POST", "/v1/events", body)
	if err != nil || code == http.StatusServiceUnavailable || code == http.StatusBadGateway {
		return 0, nil
	}
	var ans struct {
		Seq uint64 `json:"seq"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &ans) != nil || ans.Seq == 0 {
		return 0, fmt.Errorf("event %s through %s: %d %s", idem, n.dir, code, b)
	}
	return ans.Seq, nil
}

// load is clients sending keyed events through every node in turn, each
// event resent under its key until acknowledged.
type load struct {
	w       *nodeWorld
	mu      sync.Mutex
	acked   map[string]uint64 // idempotency key -> seq of its acknowledgment
	count   map[string]int    // counter key -> acknowledged events
	n       atomic.Int64
	problem atomic.Value
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startLoad(w *nodeWorld, clients int) *load {
	l := &load{w: w, acked: map[string]uint64{}, count: map[string]int{}, stop: make(chan struct{})}
	for c := range clients {
		l.wg.Add(1)
		go l.client(c)
	}
	return l
}

// client sends its events one at a time; an event is resent (through the
// next node) until acknowledged, even after stop, so none is left
// unanswered.
func (l *load) client(c int) {
	defer l.wg.Done()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		idem := fmt.Sprintf("c%02d-%06d", c, i)
		key := fmt.Sprintf("k%d", (c+i)%8)
		for try := 0; ; try++ {
			n := l.w.nodes[(c+i+try)%len(l.w.nodes)]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			seq, err := l.w.sendEvent(ctx, n, key, idem)
			cancel()
			if err != nil {
				l.problem.CompareAndSwap(nil, err.Error())
				return
			}
			if seq != 0 {
				l.mu.Lock()
				l.acked[idem] = seq
				l.count[key]++
				l.mu.Unlock()
				l.n.Add(1)
				break
			}
			time.Sleep(20 * time.Millisecond) // back off before resending (Retry-After is whole seconds)
		}
	}
}

// waitAcks waits until n more events than now are acknowledged.
func (l *load) waitAcks(t *testing.T, n int64) {
	t.Helper()
	target := l.n.Load() + n
	deadline := time.Now().Add(failoverWait)
	for l.n.Load() < target {
		if p := l.problem.Load(); p != nil {
			t.Fatalf("client: %v", p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("clients stalled: %d acknowledgments, waiting for %d", l.n.Load(), target)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// finish stops the clients (each finishes the event it is sending).
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if p := l.problem.Load(); p != nil {
		t.Fatalf("client: %v", p)
	}
}

// verify reads the whole journal through node n and checks every
// acknowledged event is in it exactly once, at the seq it was acknowledged
// with, that no event is there that was never sent, that the seqs run
// without a gap, and that every counter equals its acknowledged events.
func (l *load) verify(t *testing.T, n *pgNode) {
	t.Helper()
	code, b, err := crashHTTP(context.Background(), n.address(), l.w.tok, "GET", "/v1/journal", nil)
	if err != nil || code != 200 {
		t.Fatalf("journal: %d %v %s", code, err, b)
	}
	seen := map[string][]uint64{}
	var last uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var r journalRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		if r.Seq != last+1 {
			t.Fatalf("journal: seq %d follows %d", r.Seq, last)
		}
		last = r.Seq
		if r.Kind == "event" {
			var ev struct {
				Key string `json:"idempotency_key"`
			}
			json.Unmarshal(r.Body, &ev)
			if ev.Key != "" {
				seen[ev.Key] = append(seen[ev.Key], r.Seq)
			}
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var lost, double int
	for k, seq := range l.acked {
		got := seen[k]
		switch {
		case len(got) == 0:
			lost++
			t.Errorf("lost: event %s acknowledged at seq %d is not in the journal", k, seq)
		case len(got) > 1:
			double++
			t.Errorf("doubled: event %s journaled at %v", k, got)
		case got[0] != seq:
			t.Errorf("event %s acknowledged at seq %d, journaled at %d", k, seq, got[0])
		}
	}
	for k := range seen {
		if _, ok := l.acked[k]; !ok {
			t.Errorf("journal holds event %s, which no client had acknowledged", k)
		}
	}
	for key, want := range l.count {
		var cell struct {
			State struct {
				Count int `json:"count"`
			} `json:"state"`
		}
		code, b, err := crashHTTP(context.Background(), n.address(), l.w.tok, "GET", "/v1/cells/com.example%2Fcounter.step@1/"+key, nil)
		if err != nil || code != 200 || json.Unmarshal(b, &cell) != nil {
			t.Fatalf("cell %s: %d %v %s", key, code, err, b)
		}
		if cell.State.Count != want {
			t.Errorf("counter %s is %d, want %d acknowledged events", key, cell.State.Count, want)
		}
	}
	t.Logf("verified: %d acknowledged events, %d journal records, lost %d, doubled %d", len(l.acked), last, lost, double)
}

// pgChecks runs aosd journal check and aosd replay --verify on the world
// (through the node serving dir).
func pgChecks(t *testing.T, dir string) {
	t.Helper()
	checkJournal(t, dir)
	r := aosd(t, dir, "replay", "--verify")
	if r.code != 0 {
		t.Fatalf("replay --verify: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("replay --verify: %s", firstLine(r.stdout))
}

func failoverKills(t *testing.T) int {
	v := os.Getenv("AOS_FAILOVER_KILLS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("AOS_FAILOVER_KILLS=%q: want a number of kills, at least 1", v)
	}
	return n
}

// TestFailoverKills: 16 clients send keyed events through both nodes while
// the owner is SIGKILLed again and again; each time the standby takes
// over, and the killed node comes back as the standby. Every acknowledged
// event is journaled exactly once, the journal has no gap, and the journal
// check and a verified replay pass. AOS_FAILOVER_KILLS sets the kills
// (default 3).
func TestFailoverKills(t *testing.T) {
	t.Parallel()
	kills := failoverKills(t)
	w := newNodeWorld(t, pgtest.Start(t), 2)
	for _, n := range w.nodes {
		n.start(t)
	}
	ok(t, w.nodes[0].dir, "apply", built.Path(t, "counter"))
	l := startLoad(w, 16)
	_, st := w.owner(t, 0)
	epoch := st.Cluster.Epoch
	for k := range kills {
		l.waitAcks(t, 40)
		owner, st := w.owner(t, epoch-1)
		t.Logf("kill %d: SIGKILL the owner %s (epoch %d) after %d acknowledgments", k+1, owner.id, st.Cluster.Epoch, l.n.Load())
		owner.kill(t)
		next, nst := w.owner(t, st.Cluster.Epoch)
		if next == owner {
			t.Fatalf("kill %d: the killed node owns the world again", k+1)
		}
		epoch = nst.Cluster.Epoch
		l.waitAcks(t, 20) // the new owner acknowledges events
		owner.start(t)    // back, as a standby
	}
	l.waitAcks(t, 20)
	l.finish(t)
	owner, _ := w.owner(t, epoch-1)
	l.verify(t, owner)
	for _, n := range w.nodes {
		if n != owner {
			l.verify(t, n) // through the standby: forwarded reads agree
		}
	}
	pgChecks(t, owner.dir)
	for _, n := range w.nodes {
		n.stop(t)
	}
}

// metric reads one sample of the node's /metrics (0 when absent).
func (w *nodeWorld) metric(t *testing.T, n *pgNode, sample string) float64 {
	t.Helper()
	code, b, err := crashHTTP(context.Background(), n.address(), w.tok, "GET", "/metrics", nil)
	if err != nil || code != 200 {
		t.Fatalf("metrics of %s: %d %v %s", n.dir, code, err, b)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", sample, line)
			}
			return f
		}
	}
	return 0
}

// journalKeys reads the journal through n: the seqs of each event's
// idempotency key, and the height.
func (w *nodeWorld) journalKeys(t *testing.T, n *pgNode) (map[string][]uint64, uint64) {
	t.Helper()
	code, b, err := crashHTTP(context.Background(), n.address(), w.tok, "GET", "/v1/journal", nil)
	if err != nil || code != 200 {
		t.Fatalf("journal: %d %v %s", code, err, b)
	}
	seen := map[string][]uint64{}
	var last uint64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		var r journalRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		last = r.Seq
		if r.Kind == "event" {
			var ev struct {
				Key string `json:"idempotency_key"`
			}
			json.Unmarshal(r.Body, &ev)
			seen[ev.Key] = append(seen[ev.Key], r.Seq)
		}
	}
	return seen, last
}

// waitStopped waits until the process is stopped (state T in
// /proc/PID/stat): a signal is delivered asynchronously, and until then the
// process still serves.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(failoverWait)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped: %s", pid, b)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

// TestFailoverZombieOwner: the owner is SIGSTOPped past its lease; the
// standby takes over and serves; an event sent to the stopped owner waits
// in its socket. Then the old owner is SIGCONTed: whatever it tries to
// journal is refused by the fence (the event it held is not acknowledged
// by it, or acknowledged only by the new owner after it stepped down and
// forwarded it), nothing of its is journaled, and it steps down to a
// standby that forwards to the new owner, without a restart.
func TestFailoverZombieOwner(t *testing.T) {
	t.Parallel()
	w := newNodeWorld(t, pgtest.Start(t), 2)
	a, b := w.nodes[0], w.nodes[1]
	a.start(t)
	first, st := w.owner(t, 0)
	if first != a {
		t.Fatalf("the first node to start is not the owner")
	}
	b.start(t)
	ok(t, a.dir, "apply", built.Path(t, "counter"))
	ctx := context.Background()
	for i := range 10 {
		if seq, err := w.sendEvent(ctx, b, "z", fmt.Sprintf("before-%d", i)); err != nil || seq == 0 {
			t.Fatalf("event through the standby before the stop: %d %v", seq, err)
		}
	}
	a.mu.Lock()
	a.cmd.Process.Signal(syscall.SIGSTOP)
	pid := a.cmd.Process.Pid
	a.mu.Unlock()
	waitStopped(t, pid)
	// An event sent to the stopped owner: it waits in the socket's backlog
	// until SIGCONT.
	type answer struct {
		seq uint64
		err error
	}
	zombie := make(chan answer, 1)
	go func() {
		seq, err := w.sendEvent(ctx, a, "z", "to-the-zombie")
		zombie <- answer{seq, err}
	}()
	next, nst := w.owner(t, st.Cluster.Epoch)
	if next != b {
		t.Fatalf("the stopped node owns the world")
	}
	for i := range 10 {
		if seq, err := w.sendEvent(ctx, b, "z", fmt.Sprintf("after-%d", i)); err != nil || seq == 0 {
			t.Fatalf("event through the new owner: %d %v", seq, err)
		}
	}
	_, height := w.journalKeys(t, b)
	a.mu.Lock()
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.mu.Unlock()
	za := <-zombie
	if za.err != nil {
		t.Fatalf("the event sent to the zombie: %v", za.err)
	}
	// The old owner steps down by itself and forwards to the new owner.
	deadline := time.Now().Add(failoverWait)
	for {
		ast, err := w.status(ctx, a)
		if err == nil && ast.Cluster.Role == api.RoleStandby && ast.Cluster.Owner == b.id && ast.Cluster.Epoch == nst.Cluster.Epoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old owner did not step down: %+v %v\n%s", ast.Cluster, err, a.logs())
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, with a deadline
	}
	if f, g := w.metric(t, a, `aos_cluster_stepdowns_total{reason="fenced"}`), w.metric(t, a, `aos_cluster_stepdowns_total{reason="failed"}`); f != 1 || g != 0 {
		t.Errorf("the old owner's step-downs: fenced %v, failed %v; want 1 fenced\n%s", f, g, a.logs())
	}
	seen, after := w.journalKeys(t, b)
	switch got := seen["to-the-zombie"]; {
	case za.seq == 0 && len(got) != 0:
		t.Fatalf("the event the zombie refused is journaled at %v", got)
	case za.seq != 0 && (len(got) != 1 || got[0] != za.seq || za.seq <= height):
		t.Fatalf("the event sent to the zombie was acknowledged at %d, journaled at %v (height before SIGCONT %d)", za.seq, got, height)
	}
	t.Logf("zombie's event: acknowledged at %d (0: refused); journal %d -> %d", za.seq, height, after)
	// Through the old owner, now a standby, events reach the new owner.
	for i := range 5 {
		if seq, err := w.sendEvent(ctx, a, "z", fmt.Sprintf("via-old-%d", i)); err != nil || seq == 0 {
			t.Fatalf("event through the stepped-down node: %d %v", seq, err)
		}
	}
	seen, _ = w.journalKeys(t, b)
	for k, seqs := range seen {
		if len(seqs) != 1 {
			t.Errorf("event %s journaled at %v", k, seqs)
		}
	}
	pgChecks(t, b.dir)
	a.stop(t)
	b.stop(t)
}

// TestFailoverPostgresRestart: the database crashes (an immediate
// shutdown, as pg_ctl restart -m immediate) and restarts while 16 clients
// send events; the owner's append whose outcome was unknown stopped its
// world, and the node opens it again by itself once the database is back.
// Nothing acknowledged is lost.
func TestFailoverPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := pgtest.Start(t)
	w := newNodeWorld(t, pg, 2)
	for _, n := range w.nodes {
		n.start(t)
	}
	ok(t, w.nodes[0].dir, "apply", built.Path(t, "counter"))
	l := startLoad(w, 16)
	for range 2 {
		l.waitAcks(t, 100)
		if err := pg.Crash(); err != nil {
			t.Fatal(err)
		}
		if err := pg.Restart(); err != nil {
			t.Fatal(err)
		}
		l.waitAcks(t, 100) // served again, without anyone restarting a node
	}
	l.finish(t)
	owner, _ := w.owner(t, 0)
	reopened := 0.0
	for _, n := range w.nodes {
		reopened += w.metric(t, n, `aos_cluster_stepdowns_total{reason="failed"}`)
	}
	if reopened < 1 {
		t.Errorf("no node's world stopped on a storage failure and was opened again (the crashes met no append?)")
	}
	t.Logf("worlds stopped by the database's crashes and opened again: %v", reopened)
	l.verify(t, owner)
	pgChecks(t, owner.dir)
	for _, n := range w.nodes {
		n.stop(t)
	}
}

// TestFailoverReceipt: an external executor claims a charge intent through
// the standby (forwarded to the owner), the owner is SIGKILLed, and the
// executor delivers the receipt to the new owner: it settles the intent
// exactly once (the same receipt again, through the restarted node now a
// standby, is 409 duplicate), the order is paid, and the intent is not
// handed out again.
func TestFailoverReceipt(t *testing.T) {
	t.Parallel()
	w := newNodeWorld(t, pgtest.Start(t), 2)
	a, b := w.nodes[0], w.nodes[1]
	a.start(t)
	_, st := w.owner(t, 0)
	b.start(t)
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "payments.pub.pem")
	if err := receipts.WritePublicKeyFile(pub, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	ok(t, a.dir, "keys", "add", "payments", pub, "--effects", chargeEffect)
	ok(t, a.dir, "apply", crashManifest(t))
	ctx := context.Background()
	body, _ := json.Marshal(map[string]any{"schema": orderCreated, "value": map[string]any{"order_id": "o-1", "amount_cents": 250, "customer": "c"}, "idempotency_key": "order-1"})
	if code, ans, err := crashHTTP(ctx, b.address(), w.tok, "POST", "/v1/events", body); err != nil || code != 200 {
		t.Fatalf("order through the standby: %d %v %s", code, err, ans)
	}
	claimBody := fmt.Sprintf(`{"executor":"payments","effects":[%q],"max":4,"lease_ms":60000,"wait_ms":30000}`, chargeEffect)
	code, cb, err := crashHTTP(ctx, b.address(), w.tok, "POST", "/v1/effects/claim", []byte(claimBody))
	var claimed struct {
		World   string
		Intents []claimedIntent
	}
	if err != nil || code != 200 || json.Unmarshal(cb, &claimed) != nil || len(claimed.Intents) != 1 {
		t.Fatalf("claim through the standby: %d %v %s", code, err, cb)
	}
	it := claimed.Intents[0]
	a.kill(t)
	next, _ := w.owner(t, st.Cluster.Epoch)
	if next != b {
		t.Fatal("the killed node owns the world")
	}
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{World: claimed.World, Intent: h, Effect: it.Effect, Executor: "payments", Status: receipts.StatusOK,
		Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_1", "status": "succeeded"}), Attempt: 1})
	rj, err := receipts.ToJSON(sr)
	if err != nil {
		t.Fatal(err)
	}
	code, rb, err := crashHTTP(ctx, b.address(), w.tok, "POST", "/v1/receipts", rj)
	if err != nil || code != 200 {
		t.Fatalf("receipt to the new owner: %d %v %s", code, err, rb)
	}
	a.start(t) // back, as a standby
	code, rb, err = crashHTTP(ctx, a.address(), w.tok, "POST", "/v1/receipts", rj)
	if err != nil || code != http.StatusConflict || !strings.Contains(string(rb), `"duplicate"`) {
		t.Fatalf("the same receipt again, through the standby: %d %v %s", code, err, rb)
	}
	code, jb, err := crashHTTP(ctx, a.address(), w.tok, "GET", "/v1/journal?kind=receipt", nil)
	if err != nil || code != 200 {
		t.Fatalf("journal: %d %v", code, err)
	}
	if n := strings.Count(string(jb), it.Hash); n != 1 {
		t.Fatalf("receipts for intent %s in the journal: %d, want 1\n%s", it.Hash, n, jb)
	}
	var cell struct {
		State struct {
			Status string `json:"status"`
		} `json:"state"`
	}
	code, ob, err := crashHTTP(ctx, a.address(), w.tok, "GET", "/v1/cells/"+url.PathEscape(orderWF)+"/o-1", nil)
	if err != nil || code != 200 || json.Unmarshal(ob, &cell) != nil || cell.State.Status != "paid" {
		t.Fatalf("order o-1: %d %v %s", code, err, ob)
	}
	code, cb, err = crashHTTP(ctx, a.address(), w.tok, "POST", "/v1/effects/claim", []byte(strings.Replace(claimBody, `"wait_ms":30000`, `"wait_ms":0`, 1)))
	if err != nil || code != 200 || json.Unmarshal(cb, &claimed) != nil || len(claimed.Intents) != 0 {
		t.Fatalf("claim after the receipt: %d %v %s", code, err, cb)
	}
	pgChecks(t, b.dir)
	a.stop(t)
	b.stop(t)
}

// TestFailoverTimer: a durable timer set before a failover fires once,
// after it, from the new owner: the reminder's timer intent is opened by
// the first owner, which is SIGKILLed long before it is due; the new
// owner's open republishes it and its built-in timer executor delivers it.
// fired_at_ns is the delivery's wall-clock time (the built-in timer's
// receipt), so a reminder fired after the kill was fired by the new owner.
func TestFailoverTimer(t *testing.T) {
	t.Parallel()
	w := newNodeWorld(t, pgtest.Start(t), 2)
	a, b := w.nodes[0], w.nodes[1]
	a.start(t)
	_, st := w.owner(t, 0)
	b.start(t)
	ok(t, a.dir, "apply", built.Path(t, "reminders"))
	ctx := context.Background()
	const reminderWF = "com.example/reminder.step@1"
	body := []byte(`{"schema":"com.example/ReminderSet@1","value":{"reminder_id":"r-1","text":"after the failover","delay_ms":10000}}`)
	if code, ans, err := crashHTTP(ctx, b.address(), w.tok, "POST", "/v1/events", body); err != nil || code != 200 {
		t.Fatalf("reminder through the standby: %d %v %s", code, err, ans)
	}
	type reminder struct {
		State struct {
			Status    string  `json:"status"`
			DueNs     uint64  `json:"due_ns"`
			FiredAtNs *uint64 `json:"fired_at_ns"`
		} `json:"state"`
	}
	read := func(n *pgNode) reminder {
		t.Helper()
		var r reminder
		code, rb, err := crashHTTP(ctx, n.address(), w.tok, "GET", "/v1/cells/"+url.PathEscape(reminderWF)+"/r-1", nil)
		if err != nil || code != 200 || json.Unmarshal(rb, &r) != nil {
			t.Fatalf("reminder r-1 through %s: %d %v %s", n.dir, code, err, rb)
		}
		return r
	}
	if r := read(a); r.State.Status != "scheduled" {
		t.Fatalf("reminder before the failover: %+v, want scheduled", r.State)
	}
	killedAt := uint64(time.Now().UnixNano())
	a.kill(t)
	if next, _ := w.owner(t, st.Cluster.Epoch); next != b {
		t.Fatal("the killed node owns the world")
	}
	deadline := time.Now().Add(failoverWait)
	r := read(b)
	for r.State.Status != "fired" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // polling a condition, with a deadline
		r = read(b)
	}
	if r.State.Status != "fired" || r.State.FiredAtNs == nil {
		t.Fatalf("reminder %s after the failover: %+v, want fired\n%s", failoverWait, r.State, b.logs())
	}
	if *r.State.FiredAtNs < killedAt || *r.State.FiredAtNs < r.State.DueNs {
		t.Fatalf("reminder fired at %d: the first owner was killed at %d and it was due at %d", *r.State.FiredAtNs, killedAt, r.State.DueNs)
	}
	code, jb, err := crashHTTP(ctx, b.address(), w.tok, "GET", "/v1/journal?kind=receipt", nil)
	if err != nil || code != 200 {
		t.Fatalf("journal: %d %v", code, err)
	}
	if n := strings.Count(strings.TrimSpace(string(jb)), "\n") + 1; n != 1 || !strings.Contains(string(jb), "sys/timer.set@1") {
		t.Fatalf("receipts in the journal: %d, want the timer's alone\n%s", n, jb)
	}
	pgChecks(t, b.dir)
	b.stop(t)
}

// TestServeLeaseFlags: a standby poll not shorter than the lease, or a
// lease or poll of 0, is a usage error naming the flags, before anything
// is opened.
func TestServeLeaseFlags(t *testing.T) {
	t.Parallel()
	w := filepath.Join(t.TempDir(), "w")
	for _, args := range [][]string{
		{"--lease", "1s", "--standby-poll", "1s"},
		{"--lease", "1s", "--standby-poll", "2s"},
		{"--lease", "0s"},
		{"--standby-poll", "0s"},
	} {
		r := aosd(t, w, append([]string{"serve"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--lease") || !strings.Contains(r.stderr, "--standby-poll") {
			t.Errorf("serve %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}
