package aos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/internal/examples"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	examples.Cleanup()
	os.Exit(code)
}

// tally is a native module: a running count per key.
var tally = sdk.NewModule("test/tally")

type tallyState struct {
	Count int64 `cbor:"count"`
}

type tallyAdd struct {
	Key string `cbor:"key"`
	By  int64  `cbor:"by"`
}

func init() {
	sdk.Workflow(tally, "step", func(c *sdk.Ctx, st *tallyState, ev tallyAdd) (*tallyState, error) {
		if st == nil {
			st = &tallyState{}
		}
		return &tallyState{Count: st.Count + ev.By}, nil
	})
}

const (
	tallyWF    = "com.t/tally.step@1"
	tallyEvent = "com.t/Add@1"
)

const tallyManifest = `[
  {"$kind": "defschema", "name": "com.t/Key@1", "schema": {"type": "string", "minLength": 1}},
  {"$kind": "defschema", "name": "com.t/Add@1", "schema": {"type": "object", "additionalProperties": false,
    "required": ["key", "by"], "properties": {"key": {"$ref": "com.t/Key@1"}, "by": {"type": "integer"}}}},
  {"$kind": "defschema", "name": "com.t/Tally@1", "schema": {"type": "object", "required": ["count"],
    "properties": {"count": {"type": "integer"}}}},
  {"$kind": "defmodule", "name": "com.t/tally@1",
   "runtime": {"kind": "builtin", "builtin": "test/tally", "identity": "test/tally@1"}},
  {"$kind": "defworkflow", "name": "com.t/tally.step@1", "state": "com.t/Tally@1", "event": "com.t/Add@1",
   "key_schema": "com.t/Key@1", "effects_emitted": [], "impl": {"module": "com.t/tally@1", "entrypoint": "step"}},
  {"$kind": "manifest", "name": "com.t/tally", "routing": {"subscriptions": [
    {"event": "com.t/Add@1", "workflow": "com.t/tally.step@1", "key_field": "key"}]}}
]`

func writeManifest(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tally.json")
	if err := os.WriteFile(p, []byte(tallyManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func call(t *testing.T, w *aos.World, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+w.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEmbed embeds a world with a native module on real Badger, applies a
// manifest, sends events over the HTTP API from many clients, and reads the
// state back over HTTP and through the Go API; after Close a reopen sees it.
func TestEmbed(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "world")
	m := writeManifest(t)
	opts := aos.Options{Modules: []modules.Builtin{tally.Builtin("test/tally@1")}, Listen: "127.0.0.1:0"}
	w, err := aos.Open(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, f := range []string{host.StoreDir, host.TokenFile, host.ExecutorKey} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("Open did not create the world as aosd init does: %v", err)
		}
	}
	info, err := host.Dir(dir).ReadDaemonInfo()
	if err != nil || info.Addr != w.Addr() || info.PID != os.Getpid() {
		t.Fatalf("daemon.json: %+v, %v; want addr %s pid %d", info, err, w.Addr(), os.Getpid())
	}
	// Created with an identity, journaled as the world's first record.
	if id := w.Identity(); !strings.HasPrefix(id, "world:") || len(id) != len("world:")+32 || id != w.Kernel().Identity() {
		t.Fatalf("identity %q", id)
	}
	var first journal.Record
	if err := w.Kernel().Journal().Read(1, func(r journal.Record) (bool, error) { first = r; return false, nil }); err != nil || first.Kind != journal.KindWorld {
		t.Fatalf("the new world's first record: %+v %v", first, err)
	}

	dry, err := w.Apply(ctx, m, true)
	if err != nil || dry.Applied || !dry.DryRun {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	res, err := w.Apply(ctx, m, false)
	if err != nil || !res.Applied || res.ManifestName != "com.t/tally" {
		t.Fatalf("apply: %+v %v", res, err)
	}
	if _, err := w.Send(ctx, tallyEvent, json.RawMessage(`{"key":"a","by":"x"}`)); err == nil || !strings.Contains(err.Error(), "/by") {
		t.Errorf("invalid event: %v", err)
	}

	const clients, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan string, clients*each)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				req, _ := http.NewRequest("POST", "http://"+w.Addr()+"/v1/events",
					strings.NewReader(fmt.Sprintf(`{"schema":%q,"value":{"key":"k%d","by":1}}`, tallyEvent, c%2)))
				req.Header.Set("Authorization", "Bearer "+w.Token())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Sprintf("%s %s", resp.Status, b)
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("POST /v1/events: %s", e)
	}
	if _, err := w.Send(ctx, tallyEvent, json.RawMessage(`{"key":"a","by":5}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Kernel().WaitQuiescent(ctx); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, w, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+"/k0", "")
	if code != 200 || !strings.Contains(body, fmt.Sprintf(`"state":{"count":%d}`, clients/2*each)) {
		t.Errorf("GET cell k0: %d %s", code, body)
	}
	cell, err := w.Cell(ctx, tallyWF, "a")
	if err != nil || string(cell.State) != `{"count":5}` || cell.Status != "completed" {
		t.Errorf("Cell a: %+v %v", cell, err)
	}
	if code, body := call(t, w, "GET", "/metrics", ""); code != 200 || !strings.Contains(body, fmt.Sprintf("aos_events_ingested_total %d", clients*each+1)) {
		t.Errorf("metrics: %d %.300s", code, body)
	}
	st, err := w.Kernel().Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, host.DaemonInfoFile)); !os.IsNotExist(err) {
		t.Errorf("daemon.json left after Close: %v", err)
	}

	// Reopened without the API: everything acknowledged is there.
	w2, err := aos.Open(ctx, dir, aos.Options{Modules: opts.Modules})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.Addr() != "" {
		t.Errorf("Addr without Listen: %q", w2.Addr())
	}
	st2, err := w2.Kernel().Status(ctx)
	if err != nil || st2.JournalHeight != st.JournalHeight {
		t.Fatalf("reopened height %+v %v; want %d", st2, err, st.JournalHeight)
	}
	if cell, err := w2.Cell(ctx, tallyWF, "k1"); err != nil || string(cell.State) != fmt.Sprintf(`{"count":%d}`, clients/2*each) {
		t.Errorf("reopened k1: %+v %v", cell, err)
	}
	if res, err := w2.Apply(ctx, m, false); err != nil || !res.Unchanged {
		t.Errorf("re-apply: %+v %v", res, err)
	}
}

// TestOpenErrors: a world held by another opener, and modules that cannot
// be registered, are refused clearly.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "world")
	w, err := aos.Open(ctx, dir, aos.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := aos.Open(ctx, dir, aos.Options{}); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("second Open of a held world: %v", err)
	}
	mod := tally.Builtin("test/tally@1")
	if _, err := aos.Open(ctx, filepath.Join(t.TempDir(), "w2"), aos.Options{Modules: []modules.Builtin{mod, mod}}); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("a module twice: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := aos.Open(cctx, filepath.Join(t.TempDir(), "w3"), aos.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a done context: %v", err)
	}
}

// TestWasmCache: a world opened by aos keeps compiled wasm code in
// <world>/wasm-cache, so a restart does not compile again.
func TestWasmCache(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "world")
	w, err := aos.Open(ctx, dir, aos.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Apply(ctx, examples.Path(t, "counter"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Send(ctx, "com.example/CountEvent@1", json.RawMessage(`{"key":"a","by":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Kernel().WaitQuiescent(ctx); err != nil {
		t.Fatal(err)
	}
	if cell, err := w.Cell(ctx, "com.example/counter.step@1", "a"); err != nil || string(cell.State) != `{"count":2}` {
		t.Fatalf("cell: %+v %v", cell, err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, host.WasmCacheDir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("wasm cache %s: %d entries, %v", filepath.Join(dir, host.WasmCacheDir), len(ents), err)
	}
}
