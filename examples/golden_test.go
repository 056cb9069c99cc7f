package examples_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The golden journals were written by the kernel of commit dcf8b69, before
// issue 12 moved storage, records and CBOR; the refactor had to keep every
// byte. The workflows' wasm is an input, not the kernel's output: the sdk
// changed in that refactor, which changed the artifacts' pinned hashes and so
// the manifest hash in every stamp, so the *.journal files were written by the
// old kernel with the new artifacts (the *.cells files, which do not hold the
// manifest hash, did not change). testdata/oldworld.tar.gz was written wholly by the
// old code, old artifacts included. Issue 14 changed what the notes, orders
// and reminders workflows do (to match EXAMPLES.md): their goldens, cells
// included, and oldworld-scenario.journal were rewritten then; counter and
// choreography held dcf8b69's bytes until issue 26 gave worlds an identity.
// Issue 29's sdk.Migration changed the sdk's sources, so every example's
// wasm build (its build ID hashes them) and with it every manifest hash:
// only the manifest, event and receipt records (which carry it) changed;
// every step, intent and cell kept its bytes.
// Every golden journal was rewritten then, and compared record by record with
// the one before (docs/DECISIONS.md, "World identity"): each now starts with
// the world record (seq 1), so every seq, and every field that holds one
// (stamp heights, step inputs and emitted lists, origins, emitted_at), is one
// higher; intents bind the world, so their hashes change, and with them the
// steps that list them and the receipts that name them (hash, world and
// signature); an emitted event's entropy is derived from its seq, and the
// test executor's charge id from the intent's emitted_at, which changes the
// orders cells' states. Nothing else changed. Issue 27 gave the sys/ shapes
// one home (modules/sys), which the sdk's types are now defined on: that
// rebuilt the artifacts, and the journals were rewritten and compared record
// by record with the ones before (each record equal once the artifact, module
// and manifest hashes are substituted; cells unchanged). Issue 29 (item 5)
// added sys/EffectCancelled@1's shape to modules/sys and the sdk: a guest
// is built -buildmode=c-shared, which keeps every exported type of the
// packages it links, so every example's artifact changed, and the
// reminders workflow takes the cancellation now. The journals were
// rewritten and compared with the ones before record by record (same seqs
// and kinds): only the manifest records and the records stamped with the
// manifest hash (events, receipts, the recover) changed; every step,
// intent, fault, config and world record, and every cell, kept its bytes.
var (
	writeGolden   = flag.Bool("write-golden", false, "rewrite testdata/golden")
	writeOldWorld = flag.Bool("write-oldworld", false, "rewrite testdata/oldworld.tar.gz and its golden journal")
)

// journalDigest renders a journal as one line per record: seq, kind and the
// SHA-256 of its canonical body, so a golden file pins every byte.
func journalDigest(recs []journal.Record) string {
	var sb strings.Builder
	for _, r := range recs {
		sum := sha256.Sum256(r.Body)
		fmt.Fprintf(&sb, "%d %s %s\n", r.Seq, r.Kind, hex.EncodeToString(sum[:]))
	}
	return sb.String()
}

func cellsDigest(cells map[string]string) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(cells)) {
		fmt.Fprintf(&sb, "%q %q\n", k, cells[k])
	}
	return sb.String()
}

// readGolden reads testdata/golden/name. oldworld.journal is what
// testdata/oldworld.tar.gz held when it was written; only -write-oldworld rewrites
// the two, and -write-golden leaves them.
func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *writeGolden || *writeOldWorld {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s differs from the golden file (journal or cell bytes changed):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestJournalsByteIdenticalToGolden plays every example scenario natively
// and holds its journal and cells, byte for byte, to what the code of
// commit dcf8b69 wrote.
func TestJournalsByteIdenticalToGolden(t *testing.T) {
	for _, name := range slices.Sorted(maps.Keys(scenarios)) {
		t.Run(name, func(t *testing.T) {
			dir := built.Path(t, name)
			m, err := manifest.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			r := runWorld(t, dir, m, scenarios[name], true)
			checkGolden(t, name+".journal", journalDigest(r.records))
			checkGolden(t, name+".cells", cellsDigest(r.cells))
		})
	}
}

// buildOldWorld writes a world at dir: the orders world with signed
// receipts, an idempotent resend, two limits changes, a budget fault and its
// recovery, so the record kinds the kernel writes are all in it.
func buildOldWorld(t *testing.T, dir string) {
	ctx := context.Background()
	m, err := manifest.Load(built.Path(t, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := badgerdb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, pub, _ := openWorld(t, db, m, true)
	defer w.Close()
	if _, err := w.Apply(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	oldWorldScenario(t, w, pub)
}

func oldWorldScenario(t *testing.T, w *kernel.World, pub *capture) {
	ctx := context.Background()
	send := func(js, idem string) {
		if _, err := w.Ingest(ctx, kernel.Event{Schema: "com.example/OrderCreated@1", JSON: json.RawMessage(js), IdempotencyKey: idem}); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"order_id":"o1","amount_cents":100,"customer":"ada"}`, "k1")
	send(`{"order_id":"o1","amount_cents":100,"customer":"ada"}`, "k1") // duplicate: not journaled
	play(t, w, pub, []step{settle})
	if _, err := w.SetLimits(ctx, kernel.Limits{MaxRecordsPerInput: 1}); err != nil {
		t.Fatal(err)
	}
	send(`{"order_id":"o2","amount_cents":250,"customer":"bob"}`, "")
	if _, err := w.SetLimits(ctx, kernel.Limits{MaxRecordsPerInput: 50_000}); err != nil {
		t.Fatal(err)
	}
	failed, _, err := w.Failed(ctx, "", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].Class != "budget" {
		t.Fatalf("want one budget fault, got %+v", failed)
	}
	for _, f := range failed {
		if _, err := w.Recover(ctx, f.Workflow, f.Key, "retry", f.FaultSeq); err != nil {
			t.Fatal(err)
		}
	}
	play(t, w, pub, []step{settle, ev("com.example/OrderCancel@1", `{"order_id":"o2"}`)})
}

func readAll(t *testing.T, w *kernel.World) []journal.Record {
	t.Helper()
	var recs []journal.Record
	if err := w.Journal().Read(1, func(r journal.Record) (bool, error) {
		recs = append(recs, r)
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// oldWorldArchive is the old world's Badger directory, gzipped: most of it is
// the orders wasm artifact the CAS holds, which compresses 4 MiB to 1.2 MiB.
var oldWorldArchive = filepath.Join("testdata", "oldworld.tar.gz")

// packOldWorld writes the Badger directory src as oldWorldArchive.
func packOldWorld(t *testing.T, src string) {
	t.Helper()
	f, err := os.Create(oldWorldArchive)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	if err := errors.Join(tw.AddFS(os.DirFS(src)), tw.Close(), zw.Close(), f.Close()); err != nil {
		t.Fatalf("write %s: %v", oldWorldArchive, err)
	}
}

// unpackOldWorld extracts oldWorldArchive into dir, which Badger may then
// open and write: the archive itself never changes.
func unpackOldWorld(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(oldWorldArchive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("read %s: %v", oldWorldArchive, err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) || filepath.Dir(h.Name) != "." {
			t.Fatalf("%s: unexpected entry %q", oldWorldArchive, h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, h.Name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOldWorldOpens opens testdata/oldworld.tar.gz, a Badger directory written by
// the code of commit dcf8b69, with the code under test: its journal reads
// byte for byte as it was written, replay agrees with it (its intents keep
// the hashes they were opened with, before worlds had identities), the
// first open journals the world's identity after it and the second none,
// and the world takes new work, whose intents bind the identity. It also
// plays the same scenario into a new directory and checks the new code
// writes the same journal.
func TestOldWorldOpens(t *testing.T) {
	if *writeOldWorld {
		// The archive is a world from before identities; this code gives
		// every world one at creation, so it cannot write another like it.
		t.Fatal("-write-oldworld: testdata/oldworld.tar.gz must stay as code from before world identities wrote it; this code would write a world that has one")
	}
	ctx := context.Background()
	m, err := manifest.Load(built.Path(t, "orders"))
	if err != nil {
		t.Fatal(err)
	}

	fresh := t.TempDir()
	buildOldWorld(t, fresh)
	db, err := badgerdb.Open(fresh)
	if err != nil {
		t.Fatal(err)
	}
	w, _, _ := openWorld(t, db, m, true)
	checkGolden(t, "oldworld-scenario.journal", journalDigest(readAll(t, w)))
	checkJournal(t, db)
	w.Close()
	db.Close()

	dir := t.TempDir()
	unpackOldWorld(t, dir)
	db, err = badgerdb.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, pub, _ := openWorld(t, db, m, true)
	recs := readAll(t, w)
	// The old journal reads byte for byte as it was written, then holds two
	// records more, which this code journals at its first open of a world
	// the old code wrote: the world's identity (the old code knew none),
	// and the limits in force (the old limits predate parking, so it
	// replays as written, skipping events for failed instances; from the
	// new config record on, parking is on).
	old := strings.Count(readGolden(t, "oldworld.journal"), "\n")
	if *writeOldWorld {
		old = len(recs) - 2
		checkGolden(t, "oldworld.journal", journalDigest(recs[:old]))
	}
	if len(recs) != old+2 {
		t.Fatalf("the reopened old world holds %d records, want its %d and two more (world, config)", len(recs), old)
	}
	if got, want := journalDigest(recs[:old]), readGolden(t, "oldworld.journal"); got != want {
		t.Fatalf("testdata/oldworld.tar.gz reads differently from when it was written:\n got:\n%s\nwant:\n%s", got, want)
	}
	var wr records.WorldRec
	var cr records.ConfigRec
	for _, r := range recs[old:] {
		switch r.Kind {
		case journal.KindWorld:
			if err := schemas.UnmarshalTrusted(r.Body, &wr); err != nil || wr.ID != w.Identity() || records.CheckWorldID(wr.ID) != nil {
				t.Fatalf("world record %+v (%v); the world says it is %q", wr, err, w.Identity())
			}
		case journal.KindConfig:
			if err := schemas.UnmarshalTrusted(r.Body, &cr); err != nil || cr.Limits.MaxParkedPerInstance != kernel.DefaultLimits().MaxParkedPerInstance {
				t.Fatalf("opening the old world journaled config %x (%v), want the limits with parking on", r.Body, err)
			}
		default:
			t.Fatalf("opening the old world journaled a %s record at seq %d", r.Kind, r.Seq)
		}
	}
	if wr.ID == "" || cr.Limits.MaxParkedPerInstance == 0 {
		t.Fatalf("opening the old world journaled %s and %s, want a world and a config record", recs[old].Kind, recs[old+1].Kind)
	}
	// The old journal, written by older code, keeps every rule.
	checkJournal(t, db)
	kinds := map[journal.Kind]bool{}
	for _, r := range recs[:old] {
		kinds[r.Kind] = true
	}
	for _, k := range []journal.Kind{journal.KindManifest, journal.KindEvent, journal.KindStep, journal.KindIntent,
		journal.KindReceipt, journal.KindFault, journal.KindConfig, journal.KindRecover} {
		if !kinds[k] {
			t.Errorf("the old world has no %s record", k)
		}
	}
	// Its intents were opened before it had an identity: they bind none,
	// and opening replayed each (replay-or-die compares every record byte
	// for byte), so their hashes are the ones the old code journaled.
	oldIntents := 0
	for _, r := range recs[:old] {
		if r.Kind != journal.KindIntent {
			continue
		}
		var it records.IntentRec
		if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
			t.Fatal(err)
		}
		if it.World != "" || schemas.HashBytes(records.EncodeIntentID(nil, &it.IntentID)) != it.Hash {
			t.Fatalf("old intent at seq %d: world %q, hash %s", r.Seq, it.World, it.Hash)
		}
		oldIntents++
	}
	if oldIntents == 0 {
		t.Fatal("the old world has no intent record")
	}
	// Opening it again replays the whole journal, the world record
	// included, and journals nothing: the identity is made once.
	w.Close()
	w, pub, _ = openWorld(t, db, m, true)
	defer w.Close()
	again := readAll(t, w)
	if len(again) != len(recs) || w.Identity() != wr.ID {
		t.Fatalf("the second open: %d records (was %d), identity %q (was %q)", len(again), len(recs), w.Identity(), wr.ID)
	}
	recs = again
	before := len(recs)
	play(t, w, pub, []step{ev("com.example/OrderCreated@1", `{"order_id":"o9","amount_cents":5,"customer":"new"}`), settle})
	after := readAll(t, w)
	if len(after) <= before {
		t.Fatalf("the reopened old world journaled nothing new: %d records before, %d after", before, len(after))
	}
	// The intents opened since bind the world's identity.
	newIntents := 0
	for _, r := range after[before:] {
		if r.Kind != journal.KindIntent {
			continue
		}
		var it records.IntentRec
		if err := schemas.UnmarshalTrusted(r.Body, &it); err != nil {
			t.Fatal(err)
		}
		if it.World != wr.ID {
			t.Fatalf("intent at seq %d opened after the world record binds world %q, want %s", r.Seq, it.World, wr.ID)
		}
		newIntents++
	}
	if newIntents == 0 {
		t.Fatal("the new order opened no intent")
	}
	v, err := w.Cell(ctx, "com.example/order.step@1", []byte("\x62o9"))
	if err != nil {
		t.Fatal(err)
	}
	if v.State == nil {
		t.Fatal("the new order has no state")
	}
	checkJournal(t, db)
}
