package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/daemon"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// checkJournal fails the test unless the world's journal keeps every rule
// of the journal check: serveWorld checks each world it serves at cleanup.
func checkJournal(t *testing.T, db *badgerdb.DB) {
	t.Helper()
	rep, err := journalcheck.Check(context.Background(), db.Journal(), journalcheck.Options{Objects: db.CAS().Get})
	if err != nil {
		t.Errorf("journal check: %v", err)
		return
	}
	for _, v := range rep.Violations {
		t.Errorf("journal check: %s", v)
	}
}

// TestJournalCheckRoute: GET /v1/journal/check answers the report of the
// served world's journal, with exactly the documented fields, and the
// Client reads it.
func TestJournalCheckRoute(t *testing.T) {
	s := serveWorld(t, true)
	if code, body := s.post(t, `{"schema":"com.example/OrderCreated@1","value":{"order_id":"o1","amount_cents":100,"customer":"c"}}`); code != 200 {
		t.Fatalf("send: %d %s", code, body)
	}
	code, body := s.do(t, "GET", "/v1/journal/check", "")
	if code != 200 {
		t.Fatalf("GET /v1/journal/check: %d %s", code, body)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"first", "from", "ok", "omitted", "records", "snapshot", "to", "violations"}; !slices.Equal(names, want) {
		t.Fatalf("fields %v, want %v", names, want)
	}
	h := s.height(t)
	cl := &daemon.Client{Base: s.url, Token: s.token}
	rep, err := cl.CheckJournal(context.Background())
	if err != nil || !rep.OK || rep.Records != h || rep.From != 1 || rep.To != h || rep.Violations == nil || len(rep.Violations) != 0 {
		t.Fatalf("client: %+v %v, want a clean check of 1..%d", rep, err, h)
	}
}

// TestCheckJournalWithoutOpening: daemon.CheckJournal on a world no daemon
// serves reads the store without opening the world, so it reports what is
// wrong with a journal the world cannot replay; a store another process
// holds is a locked error, as for Connect.
func TestCheckJournalWithoutOpening(t *testing.T) {
	ctx := context.Background()
	dir := daemon.Dir(filepath.Join(t.TempDir(), "world"))
	cfg := kernel.Config{Wasm: wasmtest.Engine(t, built.WasmCache(built.Dir(t)))}
	if _, err := daemon.Init(dir, cfg); err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir.Store())
	if err != nil {
		t.Fatal(err)
	}
	w, err := kernel.Open(kernel.Stores{CAS: db.CAS(), Journal: db.Journal()}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(built.Path(t, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Submit(ctx, kernel.Event{Schema: "com.example/CountEvent@1", JSON: []byte(`{"key":"a","by":2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// While this process holds the store: locked.
	_, err = daemon.CheckJournal(ctx, dir, daemon.ConnectOptions{})
	var de *daemon.Error
	if !errors.As(err, &de) || de.Code != daemon.CodeLocked {
		t.Fatalf("check of a held store: %v, want a locked error", err)
	}
	// A receipt for an intent never opened: replay refuses it.
	jn := db.Journal()
	forged := jn.Height() + 1
	sr := receipts.SignedReceipt{Receipt: receipts.Receipt{World: w.Identity(), Intent: schemas.HashBytes([]byte("never")), Effect: "sys/timer.set@1", Executor: "x",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{})}}
	body := records.EncodeReceipt(&records.ReceiptRec{Receipt: sr, Stamp: records.Stamp{NowNs: 1 << 62, LogicalNs: 1 << 62, Entropy: make([]byte, 32),
		Height: forged - 1, ManifestHash: m.Hash}})
	if err := jn.Append([]journal.Record{{Seq: forged, Kind: journal.KindReceipt, Body: body}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := daemon.Connect(ctx, dir, daemon.ConnectOptions{Config: cfg}); err == nil {
		c.Close()
		t.Fatal("the world opened on a journal with a receipt for an intent never opened")
	}
	rep, err := daemon.CheckJournal(ctx, dir, daemon.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Violations) != 1 || rep.Violations[0].Seq != forged || rep.Violations[0].Rule != journalcheck.RuleReceiptUnknownIntent ||
		string(rep.Violations[0].Key) != "null" || !strings.Contains(rep.Violations[0].Detail, sr.Intent.String()) {
		t.Fatalf("check: %+v, want receipt-unknown-intent at seq %d", rep, forged)
	}
	if _, err := daemon.CheckJournal(ctx, daemon.Dir(t.TempDir()), daemon.ConnectOptions{}); err == nil || !strings.Contains(err.Error(), "is not a world") {
		t.Fatalf("check of a directory that is not a world: %v", err)
	}
}
