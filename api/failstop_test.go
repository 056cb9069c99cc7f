package api_test

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/storefault"
)

// lockedBuffer is a log both the kernel and the server write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStoppedWorldLogsTheCauseOnce: once a storage failure stopped the
// world, every request is answered 503 naming the cause, and the log
// (the kernel's and the server's, one stream as under `aosd serve`)
// names the cause on one line: the kernel's, as it stopped the world. A
// disk that fills under load must not turn each refused request into a
// line repeating it.
func TestStoppedWorldLogsTheCauseOnce(t *testing.T) {
	b := modules.NewBuiltins()
	b.MustRegister("t/tally", "t/tally@1", "step", tallyStep(false))
	b.MustRegister("t/job", "t/job@1", "step", jobStep)
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	faults := &storefault.Injector{}
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: &storefault.Journal{Log: db.Journal(), Faults: faults}},
		kernel.Config{Builtins: b, Logger: logger, SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tok, err := dir.Token()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer((&api.Server{Backend: api.NewLocal(w, nil), Token: tok, Logger: logger}).Handler())
	defer hs.Close()
	aw := &answersWorld{url: hs.URL, token: tok}
	if a := aw.call(t, "", "POST", "/v1/apply", `{"files":[{"name":"manifest.json","content":`+answersManifest+`}]}`, nil); a.status != 200 {
		t.Fatalf("apply: %d %s", a.status, a.body)
	}

	faults.Arm(storefault.Ops(storefault.JournalAppend), 1)
	for i := range 6 {
		path, body := "/v1/events", `{"schema":"t/Add@1","value":{"key":"a","by":1}}`
		if i%2 == 1 {
			path, body = "/v1/status", ""
		}
		method := "POST"
		if body == "" {
			method = "GET"
		}
		a := aw.call(t, "", method, path, body, nil)
		if a.status != 503 || !strings.Contains(a.body, `"unavailable"`) || !strings.Contains(a.body, "injected failure") {
			t.Fatalf("%s %s on the stopped world: %d %s, want 503 unavailable naming the cause", method, path, a.status, a.body)
		}
	}
	if n := strings.Count(logs.String(), "injected failure"); n != 1 {
		t.Fatalf("the log names the storage failure on %d lines, want 1:\n%s", n, logs.String())
	}
}
