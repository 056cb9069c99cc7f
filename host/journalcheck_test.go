package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journalcheck"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestCheckJournalWithoutOpening: host.CheckJournal on a world no daemon
// serves reads the store without opening the world, so it reports what is
// wrong with a journal the world cannot replay; a store another process
// holds is a locked error, as for Connect.
func TestCheckJournalWithoutOpening(t *testing.T) {
	ctx := context.Background()
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	cfg := kernel.Config{Wasm: wasmtest.Engine(t, built.WasmCache(t))}
	if _, err := host.Init(dir, cfg); err != nil {
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
	_, err = host.CheckJournal(ctx, dir, host.ConnectOptions{})
	var de *api.Error
	if !errors.As(err, &de) || de.Code != api.CodeLocked {
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
	if c, err := host.Connect(ctx, dir, host.ConnectOptions{Config: cfg}); err == nil {
		c.Close()
		t.Fatal("the world opened on a journal with a receipt for an intent never opened")
	}
	rep, err := host.CheckJournal(ctx, dir, host.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Violations) != 1 || rep.Violations[0].Seq != forged || rep.Violations[0].Rule != journalcheck.RuleReceiptUnknownIntent ||
		string(rep.Violations[0].Key) != "null" || !strings.Contains(rep.Violations[0].Detail, sr.Intent.String()) {
		t.Fatalf("check: %+v, want receipt-unknown-intent at seq %d", rep, forged)
	}
	if _, err := host.CheckJournal(ctx, host.Dir(t.TempDir()), host.ConnectOptions{}); err == nil || !strings.Contains(err.Error(), "is not a world") {
		t.Fatalf("check of a directory that is not a world: %v", err)
	}
}
