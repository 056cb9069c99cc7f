package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// forgedEvent is an ingress event no kernel journals: there is no manifest.
func forgedEvent(seq uint64) journal.Record {
	return journal.Record{Seq: seq, Kind: journal.KindEvent, Body: records.EncodeEvent(&records.EventRec{
		Schema: "com.example/E@1", Value: schemas.MustMarshal(1),
		Stamp: records.Stamp{NowNs: 1, LogicalNs: 1, Entropy: make([]byte, 32), Height: seq - 1}})}
}

// runCheck runs `aosd journal check` in process and returns its exit code
// and output.
func runCheck(t *testing.T, world string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"journal", "check", "--world", world}, args...), nil, &out, &errb)
	return code, out.String(), errb.String()
}

// TestJournalCheckExitCodes: `aosd journal check` exits 1 and lists the
// violation when a rule is broken, on the store directly and through a
// daemon, and 0 on a clean journal.
func TestJournalCheckExitCodes(t *testing.T) {
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	// A new world's journal holds its world record.
	if code, out, errs := runCheck(t, string(dir)); code != exitOK || out != "checked records 1..1 (1) from genesis: ok\n" {
		t.Fatalf("new world: exit %d\n%s%s", code, out, errs)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	err = db.Journal().Append([]journal.Record{forgedEvent(2)})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCheck(t, string(dir))
	if code != exitError || !strings.Contains(out, "manifest-first") || !strings.Contains(errs, "breaks 1 rule") {
		t.Fatalf("direct: exit %d\n%s%s", code, out, errs)
	}

	// Through a daemon: this test's own server over a world whose journal
	// gets the same record behind its back.
	served := host.Dir(filepath.Join(t.TempDir(), "served"))
	if _, err := host.Init(served, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	log := journal.NewMemory()
	w, err := kernel.Open(kernel.Stores{CAS: cas.NewMemory(), Journal: log}, kernel.Config{SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tok, err := served.Token()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: tok}).Handler())
	defer hs.Close()
	if err := served.WriteDaemonInfo(host.DaemonInfo{Addr: strings.TrimPrefix(hs.URL, "http://"), PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	if err := log.Append([]journal.Record{forgedEvent(2)}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCheck(t, string(served), "--json")
	var rep views.JournalCheck
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitError || rep.OK || len(rep.Violations) != 1 ||
		rep.Violations[0].Rule != "manifest-first" || rep.Violations[0].Seq != 2 {
		t.Fatalf("through the daemon: exit %d %v\n%s%s", code, err, out, errs)
	}
}
