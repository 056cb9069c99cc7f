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
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	built.Cleanup()
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

// waiter asks for a timer far in the future, so that its instance waits.
var waiter = sdk.NewModule("test/waiter")

func init() {
	sdk.Workflow(waiter, "step", func(c *sdk.Ctx, st *tallyState, ev sdk.Variant) (*tallyState, error) {
		var start tallyAdd
		if err := ev.As(&start); ev.Tag != "Start" || err != nil {
			return st, err
		}
		c.Timer(1<<62, start.Key)
		return &tallyState{Count: start.By}, nil
	})
}

const (
	waiterWF    = "com.t/waiter.step@1"
	waiterEvent = "com.t/Start@1"
)

// waiterManifest is tallyManifest with com.t/waiter.step@1, which opens a
// timer when com.t/Start@1 starts it.
var waiterManifest = strings.NewReplacer(
	`{"$kind": "manifest", "name": "com.t/tally", "routing": {"subscriptions": [`,
	`{"$kind": "defschema", "name": "com.t/Start@1", "schema": {"$ref": "com.t/Add@1"}},
  {"$kind": "defschema", "name": "com.t/Wait@1", "variant": {"Start": "com.t/Start@1", "Receipt": "sys/EffectReceiptEnvelope@1"}},
  {"$kind": "defmodule", "name": "com.t/waiter@1",
   "runtime": {"kind": "builtin", "builtin": "test/waiter", "identity": "test/waiter@1"}},
  {"$kind": "defworkflow", "name": "com.t/waiter.step@1", "state": "com.t/Tally@1", "event": "com.t/Wait@1",
   "key_schema": "com.t/Key@1", "effects_emitted": ["sys/timer.set@1"], "impl": {"module": "com.t/waiter@1", "entrypoint": "step"}},
  {"$kind": "manifest", "name": "com.t/tally", "routing": {"subscriptions": [
    {"event": "com.t/Start@1", "workflow": "com.t/waiter.step@1", "key_field": "$value.key"},`).Replace(tallyManifest)

// TestEmbedResults: Apply and Cell answer with the root package's own
// types, converted from the API's answers field for field: the hashes of
// the manifests applied and replaced, the defs and subscriptions changed,
// the blockers of a refused apply (whose error is kernel.ErrNotQuiescent),
// and a waiting cell's state, hash and intent in flight.
func TestEmbedResults(t *testing.T) {
	ctx := context.Background()
	w, err := aos.Open(ctx, filepath.Join(t.TempDir(), "world"), aos.Options{
		Modules: []modules.Builtin{tally.Builtin("test/tally@1"), waiter.Builtin("test/waiter@1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tallyPath := writeManifest(t)
	waiterPath := filepath.Join(t.TempDir(), "waiter.json")
	if err := os.WriteFile(waiterPath, []byte(waiterManifest), 0o644); err != nil {
		t.Fatal(err)
	}

	first, err := w.Apply(ctx, tallyPath, false)
	if err != nil || !first.Applied || first.PreviousHash != "" || first.Seq == 0 || !strings.HasPrefix(first.ManifestHash, "sha256:") ||
		!slices.Contains(first.Added, tallyWF) || len(first.SubscriptionsAdded) != 1 || len(first.BlockedBy) != 0 {
		t.Fatalf("first apply: %+v %v", first, err)
	}
	second, err := w.Apply(ctx, waiterPath, false)
	if err != nil || !second.Applied || second.PreviousHash != first.ManifestHash || second.ManifestHash == first.ManifestHash ||
		!slices.Contains(second.Added, waiterWF) || len(second.Removed) != 0 ||
		len(second.SubscriptionsAdded) != 1 || second.SubscriptionsAdded[0].Workflow != waiterWF {
		t.Fatalf("second apply: %+v %v", second, err)
	}

	if _, err := w.Send(ctx, waiterEvent, json.RawMessage(`{"key":"w","by":3}`)); err != nil {
		t.Fatal(err)
	}
	cell, err := w.Cell(ctx, waiterWF, "w")
	if err != nil {
		t.Fatal(err)
	}
	stateHash := schemas.HashBytes(schemas.MustMarshal(map[string]any{"count": 3})).String()
	if cell.Workflow != waiterWF || string(cell.Key) != `"w"` || cell.Status != "waiting" || string(cell.State) != `{"count":3}` ||
		cell.StateHash != stateHash || cell.Size == 0 || len(cell.Inflight) != 1 || cell.Parked != 0 || cell.AsideModule != "" {
		t.Fatalf("waiting cell: %+v", cell)
	}
	if _, err := w.Cell(ctx, waiterWF, "nobody"); !errors.Is(err, kernel.ErrNoCell) {
		t.Fatalf("no such cell: %v", err)
	}

	refused, err := w.Apply(ctx, tallyPath, false)
	if !errors.Is(err, kernel.ErrNotQuiescent) || refused == nil || refused.Applied || refused.ManifestHash != first.ManifestHash ||
		refused.PreviousHash != second.ManifestHash || !slices.Contains(refused.Removed, waiterWF) || refused.Seq != 0 {
		t.Fatalf("apply while waiting: %+v %v", refused, err)
	}
	var instance, intent bool
	for _, b := range refused.BlockedBy {
		instance = instance || b.Kind == "instance" && b.Workflow == waiterWF && string(b.Key) == `"w"` && b.Status == "waiting"
		intent = intent || b.Kind == "intent" && b.Intent == cell.Inflight[0] && b.Effect == "sys/timer.set@1"
	}
	if !instance || !intent {
		t.Fatalf("blocked by %+v; want the waiting instance and its intent", refused.BlockedBy)
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
	if _, err := w.Apply(ctx, built.Path(t, "counter"), false); err != nil {
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
