package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
)

// BenchmarkEventsRoute is the cost of one POST /v1/events in the daemon:
// the real handler (Server.Handler, no network: an httptest recorder)
// over a real kernel running the builtin keyed tally (the counter's shape:
// one event, one step, one cell) on in-memory stores, so ns/op and
// allocs/op are the daemon's CPU and garbage per event, not a disk's
// fsync. Keys cycle over 1,000 cells.
//
//	go test -run '^$' -bench BenchmarkEventsRoute -benchmem ./api
func BenchmarkEventsRoute(b *testing.B) {
	bi := modules.NewBuiltins()
	bi.MustRegister("t/tally", "t/tally@1", "step", tallyStep(false))
	dir := host.Dir(filepath.Join(b.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		b.Fatal(err)
	}
	w, err := kernel.Open(kernel.Stores{CAS: cas.NewMemory(), Journal: journal.NewMemory()},
		kernel.Config{Builtins: bi, SnapshotEvery: -1, SnapshotInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	p := filepath.Join(b.TempDir(), "manifest.json")
	if err := os.WriteFile(p, []byte(fmt.Sprintf(tallyManifest, "t/tally", "t/tally@1")), 0o600); err != nil {
		b.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), m, false); err != nil {
		b.Fatal(err)
	}
	tok, err := dir.Token()
	if err != nil {
		b.Fatal(err)
	}
	h := (&api.Server{Backend: api.NewLocal(w, nil), Token: tok}).Handler()
	bodies := make([]string, 1000)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"schema":"t/Add@1","value":{"key":"k%d","by":1}}`, i)
	}
	auth := http.Header{"Authorization": {"Bearer " + tok}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// http.NewRequest, not httptest's: its 4 KB bufio.Reader per
		// request would be most of what the benchmark counts.
		req, err := http.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(bodies[i%len(bodies)]))
		if err != nil {
			b.Fatal(err)
		}
		req.Header = auth
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("answered %d: %s", rec.Code, rec.Body)
		}
		i++
	}
}
