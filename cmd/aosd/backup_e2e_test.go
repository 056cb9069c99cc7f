package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// loadSender sends counter events over HTTP from several goroutines and
// records every acknowledged seq with the moment (a sequence number of its
// own) it was acknowledged.
type loadSender struct {
	addr, tok string
	next      atomic.Int64 // event ids
	clock     atomic.Int64 // acknowledgement order
	mu        sync.Mutex
	acked     map[uint64]int64 // seq -> ack order
	err       error
}

func (l *loadSender) send(id int64) error {
	body := fmt.Sprintf(`{"schema":%q,"value":{"key":"k%d","by":1}}`, countEv, id%8)
	req, _ := http.NewRequest("POST", "http://"+l.addr+"/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct{ Seq uint64 }
	if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || out.Seq == 0 {
		return fmt.Errorf("event %d: %d %s", id, resp.StatusCode, b)
	}
	at := l.clock.Add(1)
	l.mu.Lock()
	l.acked[out.Seq] = at
	l.mu.Unlock()
	return nil
}

// run sends until stop is closed.
func (l *loadSender) run(workers int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.send(l.next.Add(1)); err != nil {
					l.mu.Lock()
					l.err = err
					l.mu.Unlock()
					return
				}
			}
		}()
	}
	return &wg
}

// journalSeqs lists the seqs of a world's event records.
func journalSeqs(t *testing.T, w, kind string) map[uint64]bool {
	t.Helper()
	seqs := map[uint64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", kind)), "\n") {
		var r struct{ Seq uint64 }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("journal line %q: %v", line, err)
		}
		seqs[r.Seq] = true
	}
	return seqs
}

type backupOut struct {
	File          string   `json:"file"`
	World         string   `json:"world"`
	Bytes         int64    `json:"bytes"`
	StoreKeys     uint64   `json:"store_keys"`
	JournalFirst  uint64   `json:"journal_first"`
	JournalHeight uint64   `json:"journal_height"`
	Files         []string `json:"files"`
	Daemon        bool     `json:"daemon"`
}

// TestBackupUnderLoad: `aosd backup` through a daemon that four clients
// keep busy; the backup holds every event acknowledged before it began;
// `aosd restore` makes a world that opens, replays from genesis and from
// its snapshot to the state it holds (`replay --verify`), keeps every
// journal rule, and takes new events on a daemon of its own.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	d := startDaemon(t, w)
	l := &loadSender{addr: d.addr, tok: token(t, w), acked: map[uint64]int64{}}
	stop := make(chan struct{})
	wg := l.run(4, stop)
	// Some load before: wait until 200 events were acknowledged.
	waitFor(t, "200 acknowledged events", func() bool { return l.clock.Load() >= 200 })
	ok(t, w, "snapshot")
	waitFor(t, "50 more", func() bool { return l.clock.Load() >= 250 })

	file := filepath.Join(t.TempDir(), "w.aosbackup")
	before := l.clock.Load() // everything acknowledged up to here precedes the backup
	var bk backupOut
	jsonOut(t, w, &bk, "backup", file)
	after := l.clock.Load()
	waitFor(t, "load after the backup", func() bool { return l.clock.Load() >= after+50 })
	close(stop)
	wg.Wait()
	if l.err != nil {
		t.Fatal(l.err)
	}
	if !bk.Daemon || bk.File != file || bk.JournalFirst != 1 || bk.StoreKeys == 0 {
		t.Fatalf("backup: %+v", bk)
	}
	for _, f := range []string{"executor.key", "token"} {
		if !strings.Contains(strings.Join(bk.Files, " "), f) {
			t.Errorf("backup files %v lack %s", bk.Files, f)
		}
	}
	if after == before {
		t.Fatalf("no event was acknowledged while the backup ran: the backup did not race the load")
	}

	w2 := filepath.Join(t.TempDir(), "restored")
	var rs backupOut
	jsonOut(t, w2, &rs, "restore", file, w2)
	checkJournalAtEnd(t, w2)
	if rs.World != w2 || rs.JournalHeight != bk.JournalHeight || rs.StoreKeys != bk.StoreKeys {
		t.Fatalf("restore %+v of backup %+v", rs, bk)
	}
	got := journalSeqs(t, w2, "event")
	missing, beyond := 0, 0
	for seq, at := range l.acked {
		switch {
		case at <= before && !got[seq]:
			missing++
		case got[seq] && seq > bk.JournalHeight:
			beyond++
		}
	}
	if missing > 0 || beyond > 0 {
		t.Fatalf("the restored world lacks %d events acknowledged before the backup began (and holds %d past its height %d)", missing, beyond, bk.JournalHeight)
	}
	if len(got) == 0 || len(got) == len(l.acked) {
		t.Fatalf("restored %d events of %d sent: want a prefix taken mid-load", len(got), len(l.acked))
	}
	verifyRestored(t, w2)
	// The restored world is the same world: run only one of them.
	d.stop(t, w)
	d2 := startDaemon(t, w2)
	if tok := token(t, w2); tok != l.tok {
		t.Errorf("the restored token differs from the original's")
	}
	ok(t, w2, "send", countEv, `{"key":"after","by":3}`)
	var cell struct{ State map[string]int }
	jsonOut(t, w2, &cell, "cells", "show", counterWF, "after")
	if cell.State["count"] != 3 {
		t.Fatalf("the restored world's new cell: %+v", cell)
	}
	d2.stop(t, w2)
}

// verifyRestored: replay from genesis and from the latest snapshot reach
// the state the world opened to.
func verifyRestored(t *testing.T, w string) {
	t.Helper()
	var rep struct {
		OK   bool `json:"ok"`
		Runs []struct {
			From string `json:"from"`
			OK   bool   `json:"ok"`
		} `json:"runs"`
	}
	jsonOut(t, w, &rep, "replay", "--verify")
	if !rep.OK || len(rep.Runs) != 2 || rep.Runs[1].From != "snapshot" {
		t.Fatalf("replay --verify of the restored world: %+v", rep)
	}
}

// TestBackupWithoutDaemon: a world no daemon serves is backed up from its
// store; a backup never overwrites a file; restore refuses a non-empty
// directory and a damaged file, exit 1, leaving nothing behind.
func TestBackupWithoutDaemon(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	ok(t, w, "send", countEv, `{"key":"a","by":2}`)
	dir := t.TempDir()
	file := filepath.Join(dir, "w.aosbackup")
	var bk backupOut
	jsonOut(t, w, &bk, "backup", file)
	if bk.Daemon || bk.JournalHeight != 4 { // the world record, the manifest, the event and its step
		t.Fatalf("backup: %+v", bk)
	}
	if r := aosd(t, w, "backup", file); r.code != 1 || !strings.Contains(r.stderr, "exists: a backup never overwrites a file") {
		t.Fatalf("backup over an existing file: exit %d %s", r.code, r.stderr)
	}

	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o700)
	os.WriteFile(filepath.Join(full, "mine"), []byte("x"), 0o600)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(dir, "damaged.aosbackup")
	os.WriteFile(damaged, b[:len(b)*2/3], 0o600)
	for _, c := range []struct {
		name, file, dir, want string
	}{
		{"non-empty directory", file, full, "is not empty"},
		{"cut short", damaged, filepath.Join(dir, "new"), "not a valid store backup"},
		{"not a backup", filepath.Join(full, "mine"), filepath.Join(dir, "new"), "not gzip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := aosd(t, c.dir, "restore", c.file)
			if r.code != 1 || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("restore: exit %d, stderr %q, want exit 1 and %q", r.code, r.stderr, c.want)
			}
		})
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "damaged.aosbackup full w.aosbackup" {
		t.Fatalf("a refused restore left %v in %s", names, dir)
	}
	if b2, _ := os.ReadFile(file); !bytes.Equal(b, b2) {
		t.Fatal("the backup file changed")
	}
	w2 := filepath.Join(dir, "copy")
	ok(t, w2, "restore", file, w2)
	checkJournalAtEnd(t, w2)
	var cell struct{ State map[string]int }
	jsonOut(t, w2, &cell, "cells", "show", counterWF, "a")
	if cell.State["count"] != 2 {
		t.Fatalf("restored cell: %+v", cell)
	}
	verifyRestoredGenesis(t, w2)
}

// verifyRestoredGenesis is verifyRestored for a world with no snapshot.
func verifyRestoredGenesis(t *testing.T, w string) {
	t.Helper()
	var rep struct {
		OK bool `json:"ok"`
	}
	jsonOut(t, w, &rep, "replay", "--verify")
	if !rep.OK {
		t.Fatalf("replay --verify of the restored world: %+v", rep)
	}
}
