package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	daemonpkg "github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

type snapshotOut struct {
	Checkpoint uint64   `json:"checkpoint"`
	Seq        uint64   `json:"seq"`
	Object     string   `json:"object"`
	Bytes      int      `json:"bytes"`
	Dirty      *int     `json:"dirty"`
	Cells      uint64   `json:"cells"`
	PauseMs    *float64 `json:"pause_ms"`
	DurationMs *float64 `json:"duration_ms"`
}

type snapshotStatus struct {
	JournalHeight uint64 `json:"journal_height"`
	LastSnapshot  *struct {
		Seq        uint64 `json:"seq"`
		Checkpoint uint64 `json:"checkpoint"`
		Object     string `json:"object"`
	} `json:"last_snapshot"`
	RecordsSinceSnapshot *uint64 `json:"records_since_snapshot"`
}

type replayOut struct {
	Height    uint64 `json:"height"`
	LiveState string `json:"live_state"`
	OK        bool   `json:"ok"`
	Runs      []struct {
		From     string `json:"from"`
		Snapshot *struct {
			Seq        uint64 `json:"seq"`
			Checkpoint uint64 `json:"checkpoint"`
		} `json:"snapshot"`
		Replayed uint64   `json:"replayed"`
		Skipped  []string `json:"skipped"`
		Verified int      `json:"verified"`
		State    *string  `json:"state"`
		OK       bool     `json:"ok"`
		Diff     string   `json:"diff"`
		Error    string   `json:"error"`
	} `json:"runs"`
}

// TestSnapshotAndReplay: `aosd snapshot` takes snapshots that status and
// the journal show; `aosd replay` (from the latest snapshot) and `aosd
// replay --verify` (also from genesis, recomputing both snapshots) reach
// the live state, directly and through a daemon.
func TestSnapshotAndReplay(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		var st snapshotStatus
		jsonOut(t, w, &st, "status")
		if st.LastSnapshot != nil || st.RecordsSinceSnapshot == nil || *st.RecordsSinceSnapshot != st.JournalHeight {
			t.Fatalf("status before any snapshot: %+v", st)
		}
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		var s1 snapshotOut
		jsonOut(t, w, &s1, "snapshot")
		if s1.Seq != s1.Checkpoint+1 || !strings.HasPrefix(s1.Object, "sha256:") || s1.Bytes == 0 || s1.Cells != 1 ||
			s1.Dirty == nil || s1.PauseMs == nil || s1.DurationMs == nil {
			t.Fatalf("snapshot --json: %+v", s1)
		}
		ok(t, w, "send", countEv, `{"key":"b","by":2}`)
		if out := ok(t, w, "snapshot"); !strings.Contains(out, "the state after checkpoint") || !strings.Contains(out, "2 (") {
			t.Fatalf("snapshot table:\n%s", out)
		}
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)

		jsonOut(t, w, &st, "status")
		ls := st.LastSnapshot
		if ls == nil || ls.Seq <= s1.Seq || ls.Checkpoint != ls.Seq-1 || *st.RecordsSinceSnapshot != st.JournalHeight-ls.Checkpoint {
			t.Fatalf("status after two snapshots: %+v (%+v)", st, ls)
		}
		lines := strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "checkpoint,snapshot")), "\n")
		if len(lines) != 4 {
			t.Fatalf("journal --kind checkpoint,snapshot: %d lines\n%s", len(lines), lines)
		}
		var snapRec struct {
			Seq  uint64 `json:"seq"`
			Kind string `json:"kind"`
			Body struct {
				Reason     string `json:"reason"`
				Checkpoint uint64 `json:"checkpoint"`
				Object     string `json:"object"`
			} `json:"body"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &snapRec); err != nil || snapRec.Kind != "checkpoint" || snapRec.Body.Reason != "operator" || snapRec.Seq != s1.Checkpoint {
			t.Fatalf("first checkpoint line %s: %v", lines[0], err)
		}
		if err := json.Unmarshal([]byte(lines[3]), &snapRec); err != nil || snapRec.Kind != "snapshot" || snapRec.Seq != ls.Seq ||
			snapRec.Body.Checkpoint != ls.Checkpoint || snapRec.Body.Object != ls.Object {
			t.Fatalf("last snapshot line %s: %v", lines[3], err)
		}
		// Tables are drawn from the same JSON either way: once is enough.
		if d == nil {
			table := ok(t, w, "journal", "--kind", "checkpoint,snapshot")
			if !strings.Contains(table, "snapshot point (asked by an operator)") || !strings.Contains(table, fmt.Sprintf("of the state after checkpoint %d: %s", ls.Checkpoint, ls.Object)) {
				t.Fatalf("journal table:\n%s", table)
			}
		}

		var rep replayOut
		jsonOut(t, w, &rep, "replay")
		if !rep.OK || rep.Height != st.JournalHeight || len(rep.Runs) != 1 {
			t.Fatalf("replay: %+v", rep)
		}
		if r := rep.Runs[0]; r.From != "snapshot" || r.Snapshot == nil || r.Snapshot.Seq != ls.Seq || r.Replayed != st.JournalHeight-ls.Checkpoint ||
			r.State == nil || *r.State != rep.LiveState || !r.OK || r.Skipped == nil {
			t.Fatalf("replay run: %+v", r)
		}
		jsonOut(t, w, &rep, "replay", "--verify")
		if !rep.OK || len(rep.Runs) != 2 {
			t.Fatalf("replay --verify: %+v", rep)
		}
		if g := rep.Runs[0]; g.From != "genesis" || g.Snapshot != nil || g.Verified != 2 || g.Replayed != st.JournalHeight || g.State == nil || *g.State != rep.LiveState {
			t.Fatalf("genesis run: %+v", g)
		}
		if d == nil {
			if out := ok(t, w, "replay", "--verify"); !strings.Contains(out, "from genesis") || !strings.Contains(out, "2 snapshot(s)") ||
				!strings.Contains(out, fmt.Sprintf("snapshot %d (checkpoint %d)", ls.Seq, ls.Checkpoint)) {
				t.Fatalf("replay --verify table:\n%s", out)
			}
		}
		// Replays write nothing to the world.
		var after snapshotStatus
		jsonOut(t, w, &after, "status")
		if after.JournalHeight != st.JournalHeight {
			t.Fatalf("replays moved the height: %d -> %d", st.JournalHeight, after.JournalHeight)
		}
	})
}

// forgeSnapshot journals a checkpoint and a snapshot record naming a
// snapshot object that is valid but is not what the journal computes: the
// latest snapshot's state with the counter's cells as the snapshot before
// it had them. It stands for a snapshot written wrong (a kernel bug, or a
// store that lost the snapshot's writes): a world opened from it loads it
// without complaint. It returns the forged snapshot record's seq.
func forgeSnapshot(t *testing.T, w string) uint64 {
	t.Helper()
	c, err := daemonpkg.Connect(context.Background(), daemonpkg.Dir(w),
		daemonpkg.ConnectOptions{Direct: true, Store: daemonpkg.StoreOptions{WasmCacheDir: os.Getenv("AOS_WASM_CACHE")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	log, store := c.World().Journal(), c.World().CAS()
	var seqs []uint64
	if err := log.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
		seqs = append(seqs, seq)
		return len(seqs) < 2, nil
	}); err != nil || len(seqs) != 2 {
		t.Fatalf("the two latest snapshots: %v %v", seqs, err)
	}
	read := func(seq uint64) *snapshot.State {
		var s *snapshot.State
		err := log.Read(seq, func(r journal.Record) (bool, error) {
			rec, err := records.Decode(r)
			if err != nil {
				return false, err
			}
			b, err := store.Get(rec.(*records.SnapshotRec).Object)
			if err != nil {
				return false, err
			}
			s, err = snapshot.Decode(b)
			return false, err
		})
		if err != nil {
			t.Fatalf("snapshot record %d: %v", seq, err)
		}
		return s
	}
	newest, older := read(seqs[0]), read(seqs[1])
	h := log.Height()
	if h != seqs[0] {
		t.Fatalf("the latest snapshot record %d is not the last record %d", seqs[0], h)
	}
	forged := *newest
	forged.Height = h + 1
	forged.Workflows = append([]snapshot.Workflow(nil), newest.Workflows...)
	for i, wf := range forged.Workflows {
		if wf.Name == counterWF {
			for _, o := range older.Workflows {
				if o.Name == counterWF {
					forged.Workflows[i] = o
				}
			}
		}
	}
	data, err := snapshot.Encode(&forged)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.Put(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Append([]journal.Record{
		{Seq: h + 1, Kind: journal.KindCheckpoint, Body: schemas.MustMarshal(&records.CheckpointRec{Reason: records.CheckpointOperator})},
		{Seq: h + 2, Kind: journal.KindSnapshot, Body: schemas.MustMarshal(&records.SnapshotRec{Checkpoint: h + 1, Object: obj, Bytes: uint64(len(data))})},
	}); err != nil {
		t.Fatal(err)
	}
	return h + 2
}

// TestReplayVerifyNamesForgedSnapshot: a snapshot that is not what its
// journal computes is trusted by a plain replay (it starts there, as
// opening does) and caught by replay --verify, whose genesis run names the
// snapshot record and the first differing part, exit 1, directly and
// through a daemon.
func TestReplayVerifyNamesForgedSnapshot(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	ok(t, w, "snapshot")
	ok(t, w, "send", countEv, `{"key":"a","by":2}`)
	ok(t, w, "send", countEv, `{"key":"b","by":5}`)
	ok(t, w, "snapshot")
	forged := forgeSnapshot(t, w)

	var rep replayOut
	jsonOut(t, w, &rep, "replay")
	if !rep.OK || rep.Runs[0].Snapshot == nil || rep.Runs[0].Snapshot.Seq != forged {
		t.Fatalf("replay from the forged snapshot: %+v", rep)
	}
	want := []string{fmt.Sprintf("kernel: replay diverged at seq %d (snapshot)", forged),
		"first difference (journal vs replay): workflow " + counterWF}
	r := aosd(t, w, "replay", "--verify")
	if r.code != 1 || !strings.Contains(r.stderr, "the replay from genesis did not reach the live state") {
		t.Fatalf("replay --verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range []string{"from genesis: " + want[0], want[1]} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("replay --verify does not say %q:\n%s", s, r.stdout)
		}
	}

	startDaemon(t, w)
	r = aosd(t, w, "replay", "--verify", "--json")
	if r.code != 1 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.OK || len(rep.Runs) != 2 {
		t.Fatalf("replay --verify through the daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if g, s := rep.Runs[0], rep.Runs[1]; g.OK || g.State != nil || !strings.Contains(g.Error, want[0]) || !strings.Contains(g.Error, want[1]) || !s.OK {
		t.Fatalf("runs through the daemon: %+v", rep.Runs)
	}
}

// TestSnapshotPolicyFromEnv: AOS_SNAPSHOT_EVERY reaches the daemon's
// kernel, which takes a snapshot by itself once that many records were
// journaled; bad values of either variable are usage errors naming it.
func TestSnapshotPolicyFromEnv(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startDaemonEnv(t, w, []string{"AOS_SNAPSHOT_EVERY=4"})
	ok(t, w, "apply", built.Path(t, "counter"))
	ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	ok(t, w, "send", countEv, `{"key":"a","by":2}`)
	// The snapshot record is journaled after the send that crossed the
	// count returned: wait for it on the journal's stream.
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/v1/journal?follow=true&kind=snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+token(t, w))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	var rec struct {
		Seq  uint64 `json:"seq"`
		Body struct {
			Checkpoint uint64 `json:"checkpoint"`
		} `json:"body"`
	}
	if err != nil || json.Unmarshal([]byte(line), &rec) != nil {
		t.Fatalf("snapshot record: %q %v", line, err)
	}
	var st snapshotStatus
	jsonOut(t, w, &st, "status")
	if st.LastSnapshot == nil || st.LastSnapshot.Seq < rec.Seq {
		t.Fatalf("status after the automatic snapshot: %+v", st)
	}
	cp := strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "checkpoint", "--limit", "1"))
	if !strings.Contains(cp, `"reason":"records"`) || !strings.Contains(cp, fmt.Sprintf(`"seq":%d`, rec.Body.Checkpoint)) {
		t.Fatalf("the automatic checkpoint: %s", cp)
	}
	for _, env := range []string{"AOS_SNAPSHOT_EVERY=lots", "AOS_SNAPSHOT_INTERVAL=5"} {
		name, _, _ := strings.Cut(env, "=")
		if r := aosdEnv(t, w, []string{env}, "status"); r.code != 2 || !strings.Contains(r.stderr, name) {
			t.Errorf("%s: exit %d, want 2 naming %s\n%s", env, r.code, name, r.stderr)
		}
	}
}
