package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/internal/pgtest"
)

// pgWorld inits a world on PostgreSQL in a new directory: schema in the
// cluster at url.
func pgWorld(t *testing.T, url, schema string) string {
	t.Helper()
	w := filepath.Join(t.TempDir(), "world")
	ok(t, w, "init", "--postgres", url, "--schema", schema)
	return w
}

// answers runs the same commands on world w (through daemon d when not
// nil) and keeps what they answer that does not depend on the store: the
// world's identity, hashes that bind it and times differ from world to
// world, and are left out. A reviewer compares the two worlds' maps.
func answers(t *testing.T, w string, d *daemon) map[string]any {
	t.Helper()
	out := map[string]any{}
	var ap struct {
		Applied bool `json:"applied"`
	}
	jsonOut(t, w, &ap, "apply", built.Path(t, "counter"))
	out["apply"] = ap.Applied
	ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	ok(t, w, "send", countEv, `{"key":"a","by":2}`)
	ok(t, w, "send", countEv, `{"key":"b","by":10}`)

	s := getStatus(t, w)
	out["status"] = fmt.Sprintf("height %d quiescent %v instances %v", s.JournalHeight, s.Quiescent, s.Instances)
	var cells struct {
		Cells []struct {
			Key    json.RawMessage `json:"key"`
			Status string          `json:"status"`
		} `json:"cells"`
	}
	jsonOut(t, w, &cells, "cells", "ls", counterWF)
	var keys []string
	for _, c := range cells.Cells {
		keys = append(keys, string(c.Key)+" "+c.Status)
	}
	out["cells ls"] = keys
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, w, &show, "cells", "show", counterWF, "a")
	out["cells show a"] = show.State
	var trace []struct {
		Seq  uint64 `json:"seq"`
		Kind string `json:"kind"`
	}
	jsonOut(t, w, &trace, "trace", counterWF, "a")
	var kinds []string
	for _, e := range trace {
		kinds = append(kinds, fmt.Sprintf("%d %s", e.Seq, e.Kind))
	}
	out["trace a"] = kinds
	out["journal --kind event"] = len(strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "event")), "\n"))

	var snap struct {
		Seq   uint64 `json:"seq"`
		Cells uint64 `json:"cells"`
	}
	jsonOut(t, w, &snap, "snapshot")
	out["snapshot"] = fmt.Sprintf("seq %d cells %d", snap.Seq, snap.Cells)
	var gc struct {
		SnapshotsKept []uint64 `json:"snapshots_kept"`
	}
	jsonOut(t, w, &gc, "gc")
	out["gc"] = gc.SnapshotsKept
	var jc journalCheck
	jsonOut(t, w, &jc, "journal", "check")
	out["journal check"] = fmt.Sprintf("ok %v records %d violations %d", jc.OK, jc.Records, len(jc.Violations))
	var rep struct {
		Height uint64 `json:"height"`
		OK     bool   `json:"ok"`
		Runs   []any  `json:"runs"`
	}
	jsonOut(t, w, &rep, "replay", "--verify")
	out["replay --verify"] = fmt.Sprintf("ok %v height %d runs %d", rep.OK, rep.Height, len(rep.Runs))

	_, pub := newExecutorKey(t)
	ok(t, w, "keys", "add", "payments", pub, "--effects", "com.acme/*")
	var ks []struct {
		Name    string   `json:"name"`
		Effects []string `json:"effects"`
	}
	jsonOut(t, w, &ks, "keys", "ls")
	var names []string
	for _, k := range ks {
		names = append(names, k.Name+" "+strings.Join(k.Effects, ","))
	}
	out["keys ls"] = names
	var rot struct {
		Daemon bool `json:"daemon"`
	}
	jsonOut(t, w, &rot, "token", "rotate")
	out["token rotate"] = rot.Daemon
	// The token rotated is the one the next command uses.
	out["status after rotate"] = getStatus(t, w).JournalHeight
	return out
}

// TestPostgresWorldAnswersAsBadger: every command a user runs answers the
// same on a world on PostgreSQL as on a Badger world, opened directly by
// each command and through a running daemon; a kill -9 of the daemon
// loses nothing it acknowledged; backup and restore refuse the Postgres
// world, pointing at pg_dump.
func TestPostgresWorldAnswersAsBadger(t *testing.T) {
	t.Parallel()
	cl := pgtest.Start(t)
	url := cl.URL("")
	for i, mode := range []string{"direct", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			bw := newWorld(t)
			pw := pgWorld(t, url, fmt.Sprintf("e2e_%d", i))
			var bd, pd *daemon
			if mode == "daemon" {
				bd, pd = startDaemon(t, bw), startDaemon(t, pw)
			}
			ba, pa := answers(t, bw, bd), answers(t, pw, pd)
			t.Logf("answers on Postgres: %v", pa)
			for k, v := range ba {
				if !reflect.DeepEqual(v, pa[k]) {
					t.Errorf("%s: Badger answers %v, Postgres %v", k, v, pa[k])
				}
			}
			if len(ba) != len(pa) {
				t.Errorf("%d answers on Badger, %d on Postgres", len(ba), len(pa))
			}
			if mode == "daemon" && !strings.Contains(ok(t, pw, "status"), "daemon at http://"+pd.addr) {
				t.Errorf("status on the Postgres world did not go through its daemon")
			}
			r := aosd(t, pw, "backup", filepath.Join(t.TempDir(), "b.aosbackup"))
			if r.code == 0 || !strings.Contains(r.stderr, "pg_dump") {
				t.Errorf("backup of a Postgres world: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if mode != "daemon" {
				return
			}
			// kill -9 and reopen: every acknowledged event is there.
			before := getStatus(t, pw)
			for i := range 20 {
				ok(t, pw, "send", countEv, fmt.Sprintf(`{"key":"k","by":%d}`, i+1))
			}
			pd.cmd.Process.Signal(syscall.SIGKILL)
			pd.cmd.Wait()
			// Read without a daemon: a reader, no lease.
			var show struct {
				State map[string]int `json:"state"`
			}
			jsonOut(t, pw, &show, "cells", "show", counterWF, "k")
			if show.State["count"] != 210 {
				t.Fatalf("after kill -9: count %d, want 210 (1+...+20)", show.State["count"])
			}
			pd2 := startDaemon(t, pw)
			after := getStatus(t, pw)
			if after.JournalHeight < before.JournalHeight+40 {
				t.Fatalf("after kill -9 and reopen: height %d, want at least %d", after.JournalHeight, before.JournalHeight+40)
			}
			ok(t, pw, "send", countEv, `{"key":"k","by":1000}`)
			jsonOut(t, pw, &show, "cells", "show", counterWF, "k")
			if show.State["count"] != 1210 {
				t.Fatalf("after reopen: count %d, want 1210", show.State["count"])
			}
			pd2.stop(t, pw)
			var jc journalCheck
			jsonOut(t, pw, &jc, "journal", "check")
			if !jc.OK {
				t.Fatalf("journal check after kill -9: %+v", jc)
			}
			var rep struct {
				OK bool `json:"ok"`
			}
			jsonOut(t, pw, &rep, "replay", "--verify")
			if !rep.OK {
				t.Fatal("replay --verify after kill -9 failed")
			}
		})
	}
}

// TestPostgresInitPassword: a password in init's URL is used to connect
// and not written (stdout says so); restore refuses a directory that names
// a Postgres world, pointing at pg_dump.
func TestPostgresInitPassword(t *testing.T) {
	t.Parallel()
	cl := pgtest.Start(t)
	w := filepath.Join(t.TempDir(), "world")
	url := strings.Replace(cl.URL(""), "postgres@", "postgres:hunter2@", 1)
	out := ok(t, w, "init", "--postgres", url)
	if !strings.Contains(out, "NOT written") || strings.Contains(out, "hunter2") {
		t.Fatalf("init output:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(w, "postgres.json"))
	if err != nil || strings.Contains(string(b), "hunter2") {
		t.Fatalf("postgres.json: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(w, "token")); !os.IsNotExist(err) {
		t.Fatalf("a token file in a Postgres world's directory: %v", err)
	}
	r := aosd(t, w, "init", "--postgres", url)
	if r.code == 0 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("init again: exit %d\n%s", r.code, r.stderr)
	}
	r = aosd(t, w, "restore", filepath.Join(t.TempDir(), "none.aosbackup"))
	if r.code == 0 || !strings.Contains(r.stderr, "pg_dump") {
		t.Fatalf("restore into a Postgres world: exit %d\n%s", r.code, r.stderr)
	}
	r = aosd(t, w, "backup", filepath.Join(t.TempDir(), "b.aosbackup"))
	if r.code == 0 || !strings.Contains(r.stderr, "pg_dump") || !strings.Contains(r.stderr, "point-in-time") {
		t.Fatalf("backup of a Postgres world: exit %d\n%s", r.code, r.stderr)
	}
	r = aosd(t, filepath.Join(t.TempDir(), "w2"), "init", "--postgres", "host=127.0.0.1 user=postgres")
	if r.code == 0 || !strings.Contains(r.stderr, "want a URL") {
		t.Fatalf("init with a keyword string: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPostgresSecondServe: a second aosd serve on the same world (another
// directory, the same database) does not take a lease that is held: it
// serves as a standby, saying so and naming the owner and its address,
// and the owner goes on serving; the second directory's commands go
// through the standby to the owner.
func TestPostgresSecondServe(t *testing.T) {
	t.Parallel()
	cl := pgtest.Start(t)
	a := pgWorld(t, cl.URL(""), "aos")
	b := filepath.Join(t.TempDir(), "b")
	if out := ok(t, b, "init", "--postgres", cl.URL("")); !strings.Contains(out, "joined world") {
		t.Fatalf("init of a second node:\n%s", out)
	}
	da := startDaemon(t, a)
	ok(t, a, "apply", built.Path(t, "counter"))
	db := startDaemon(t, b)
	ok(t, b, "send", countEv, `{"key":"a","by":5}`)
	var st struct {
		Cluster struct {
			Role         string `json:"role"`
			OwnerAddress string `json:"owner_address"`
		} `json:"cluster"`
	}
	jsonOut(t, b, &st, "status")
	if st.Cluster.Role != "standby" || st.Cluster.OwnerAddress != da.addr {
		t.Fatalf("status through the second node (%s): %+v, want a standby naming the owner at %s", db.addr, st.Cluster, da.addr)
	}
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, a, &show, "cells", "show", counterWF, "a")
	if show.State["count"] != 5 {
		t.Fatalf("count %d on the owner, want 5", show.State["count"])
	}
}

// TestPostgresBench: aosd bench --start --postgres runs the load against a
// fresh world on PostgreSQL and verifies it (every event counted once).
func TestPostgresBench(t *testing.T) {
	t.Parallel()
	cl := pgtest.Start(t)
	dir := filepath.Join(t.TempDir(), "bench")
	cmd := exec.Command(aosdBin, "bench", "--start", dir, "--manifest", built.Path(t, "counter"), "--postgres", cl.URL(""), "--schema", "bench",
		"--events", "300", "--warmup", "20", "--concurrency", "8", "--keys", "10", "--json")
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("bench on Postgres: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Events int `json:"events"`
		Verify struct {
			OK   bool `json:"ok"`
			Seqs int  `json:"seqs"`
		} `json:"verify"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if rep.Events != 300 || !rep.Verify.OK || rep.Verify.Seqs != 320 {
		t.Fatalf("bench report: %+v\n%s", rep, r.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "world", "postgres.json")); err != nil {
		t.Fatalf("the bench world is not on PostgreSQL: %v", err)
	}
}

// TestServeInitPostgres: aosd serve --init --postgres makes a directory
// that holds no world a node of the world in PostgreSQL (creating the world
// when the schema holds none, joining it otherwise), serves a directory made
// so as it is on the next start, and refuses, before anything is written, a
// URL with a password, --postgres without --init, and a directory that
// holds another world.
func TestServeInitPostgres(t *testing.T) {
	t.Parallel()
	cl := pgtest.Start(t)
	url := cl.URL("")
	init := []string{"--init", "--postgres", url, "--schema", "si"}
	a := filepath.Join(t.TempDir(), "a")
	da := startDaemonEnv(t, a, nil, init...)
	if !strings.Contains(da.errb.String(), "created world") {
		t.Fatalf("first node's serve --init:\n%s", da.errb.String())
	}
	if _, err := os.Stat(filepath.Join(a, "postgres.json")); err != nil {
		t.Fatalf("serve --init --postgres wrote no postgres.json: %v", err)
	}
	ok(t, a, "apply", built.Path(t, "counter"))
	ok(t, a, "send", countEv, `{"key":"a","by":3}`)

	b := filepath.Join(t.TempDir(), "b")
	db := startDaemonEnv(t, b, nil, init...)
	if !strings.Contains(db.errb.String(), "joined world") {
		t.Fatalf("second node's serve --init:\n%s", db.errb.String())
	}
	var st struct {
		Cluster struct {
			Role string `json:"role"`
		} `json:"cluster"`
	}
	jsonOut(t, b, &st, "status")
	if st.Cluster.Role != "standby" {
		t.Fatalf("second node: role %q, want standby", st.Cluster.Role)
	}
	// The text names the node that answered beside the owner's lease.
	if out, want := ok(t, b, "status"), "a standby forwarding to the owner "+pgNodeID(t, a)+" at "+da.addr; !strings.Contains(out, want) {
		t.Fatalf("status through the standby does not say %q:\n%s", want, out)
	}
	if out, want := ok(t, a, "status"), "node "+pgNodeID(t, a)+", the owner (epoch"; !strings.Contains(out, want) {
		t.Fatalf("status through the owner does not say %q:\n%s", want, out)
	}
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, b, &show, "cells", "show", counterWF, "a")
	if show.State["count"] != 3 {
		t.Fatalf("count %d through the joined node, want 3", show.State["count"])
	}
	db.stop(t, b)
	// The next start of a node made so opens it as it is.
	db = startDaemonEnv(t, b, nil, init...)
	if s := db.errb.String(); strings.Contains(s, "created world") || strings.Contains(s, "joined world") {
		t.Fatalf("a node's second serve --init made it again:\n%s", s)
	}
	db.stop(t, b)

	refused := []struct {
		name  string
		world string
		args  []string
		want  string
	}{
		{"password", filepath.Join(t.TempDir(), "p"),
			[]string{"--init", "--postgres", strings.Replace(url, "postgres@", "postgres:hunter2@", 1)}, "PGPASSWORD"},
		{"without --init", filepath.Join(t.TempDir(), "n"), []string{"--postgres", url}, "only with --init"},
		{"another schema", b, []string{"--init", "--postgres", url, "--schema", "other"}, "node of the world in schema si"},
		{"a Badger world", pgBadgerWorld(t), []string{"--init", "--postgres", url}, "on Badger"},
	}
	for _, c := range refused {
		// A serve that does not refuse would run until stopped: the bound
		// ends it, and the assertion below then fails on its output.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		r := runCmd(t, exec.CommandContext(ctx, aosdBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--world", c.world}, c.args...)...))
		cancel()
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "hunter2") {
			t.Errorf("%s: exit %d, stderr %q, want an error saying %q", c.name, r.code, r.stderr, c.want)
		}
		if c.name == "password" || c.name == "without --init" {
			if _, err := os.Stat(c.world); !os.IsNotExist(err) {
				t.Errorf("%s: refused serve made %s (%v)", c.name, c.world, err)
			}
		}
	}
}

// pgBadgerWorld is a new world on Badger.
func pgBadgerWorld(t *testing.T) string {
	w := filepath.Join(t.TempDir(), "badger")
	ok(t, w, "init")
	return w
}
