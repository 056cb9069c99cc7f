package main_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// The compatibility worlds (testdata/compat, README.md there): whole world
// directories written by an earlier version's aosd, which every later
// version must open, replay and extend. -write-compat NAME writes one more
// with the code under test, beside those already there; it refuses to
// replace a committed world unless -compat-overwrite says so.
var (
	writeCompat     = flag.String("write-compat", "", "write a new compatibility world testdata/compat/worlds/NAME with the code under test, then check every world")
	overwriteCompat = flag.Bool("compat-overwrite", false, "let -write-compat replace a world already under testdata/compat/worlds")
)

var (
	compatDir      = filepath.Join("testdata", "compat")
	compatWorlds   = filepath.Join(compatDir, "worlds")
	compatManifest = filepath.Join(compatDir, "manifest")
)

const (
	compatArchive  = "world.tar.gz"   // the world directory, store and files
	compatExpected = "expect.json"    // what the writing version read back
	compatDigest   = "journal.digest" // seq, kind and SHA-256 of every record's body
	compatPayKey   = "payments.key"   // the external executor's private key (a test key)
	compatPayments = "payments"       // its executor name
	noteWF         = "com.example/note.step@1"
	reminderWF     = "com.example/reminder.step@1"
	choreoOrdersWF = "com.example/choreo.orders.step@1"
	choreoShipWF   = "com.example/choreo.shipping.step@1"
	choreoAuditWF  = "com.example/choreo.audit.step@1"
)

// compatCell is one cell as `aosd cells show --json` shows it.
type compatCell struct {
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason,omitempty"`
	State     json.RawMessage `json:"state"`
	StateHash string          `json:"state_hash"`
	Inflight  []string        `json:"inflight"`
}

// compatExpect is expect.json: what the writing version's aosd answered
// about its world once it was written. A later version must answer the same.
type compatExpect struct {
	ManifestHash  string         `json:"manifest_hash"`
	JournalHeight uint64         `json:"journal_height"`
	SnapshotSeq   uint64         `json:"snapshot_seq"`
	Inflight      int            `json:"inflight"`
	Instances     map[string]int `json:"instances"`
	Cells         []compatCell   `json:"cells"`
	Failed        []failedRow    `json:"failed"`
	// PendingCharge is the charge intent of order o3, left open for a later
	// version to settle.
	PendingCharge string `json:"pending_charge"`
}

// compatKeys are the cells the scenario leaves, each read back into
// expect.json: (workflow, KEY argument; "" for the unkeyed audit).
var compatKeys = [][2]string{
	{counterWF, "a"}, {counterWF, "b"},
	{noteWF, "n1"}, {noteWF, "n2"},
	{orderWF, "o1"}, {orderWF, "o2"}, {orderWF, "o3"}, {orderWF, "o4"}, {orderWF, "o5"},
	{orderWF, "o-fail"}, {orderWF, "o-retry"},
	{reminderWF, "r1"},
	{choreoOrdersWF, "c1"}, {choreoOrdersWF, "c2"}, {choreoShipWF, "c1"}, {choreoShipWF, "c2"},
	{choreoAuditWF, ""},
}

func showCell(t *testing.T, w, wf, key string) compatCell {
	t.Helper()
	args := []string{"cells", "show", wf}
	if key != "" {
		args = append(args, key)
	}
	var c compatCell
	jsonOut(t, w, &c, args...)
	return c
}

// stateOf decodes a cell's state JSON.
func stateOf(t *testing.T, c compatCell) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.State, &m); err != nil {
		t.Fatalf("cell %s %s: state %s: %v", c.Workflow, c.Key, c.State, err)
	}
	return m
}

// TestCompatWorlds opens every world under testdata/compat/worlds with the
// code under test: its journal reads back byte for byte as it was written,
// keeps every rule (`aosd journal check`), replays from genesis and from
// its snapshot to the state it holds (`aosd replay --verify`), its signed
// records verify, its cells read as the writing version read them, and a
// daemon on it takes new events and settles with new receipts an intent the
// old version opened and a new one. With -write-compat NAME it first writes
// a new world there with the code under test.
//
// Under -race it runs only with AOS_LONG=1: it took 213 s of CI's race
// step (its daemons, replays and checks are ten times slower there, and
// what it checks is formats, not concurrency: the daemon's concurrent paths
// run under -race in every other end-to-end test), against 20 s without.
// .ci/run's long step runs it without -race, so CI still opens every
// world; plain `go test ./...` runs it too.
func TestCompatWorlds(t *testing.T) {
	t.Parallel()
	if raceEnabled && os.Getenv("AOS_LONG") == "" && *writeCompat == "" {
		t.Skip("20 s without -race, minutes with it: .ci/run's long step runs it without -race (AOS_LONG=1)")
	}
	if *writeCompat != "" {
		writeCompatWorld(t, *writeCompat)
	}
	ents, err := os.ReadDir(compatWorlds)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) { checkCompatWorld(t, filepath.Join(compatWorlds, e.Name())) })
	}
	if n == 0 {
		t.Fatalf("no compatibility world under %s", compatWorlds)
	}
}

// writeCompatWorld plays the compatibility scenario into a new world with
// the aosd under test and commits it to testdata/compat/worlds/name.
func writeCompatWorld(t *testing.T, name string) {
	if !filepath.IsLocal(name) || strings.ContainsAny(name, `/\`) {
		t.Fatalf("-write-compat %q: want a plain directory name", name)
	}
	out := filepath.Join(compatWorlds, name)
	if _, err := os.Stat(out); err == nil && !*overwriteCompat {
		t.Fatalf("%s exists: a committed compatibility world is never rewritten; choose another name (or pass -compat-overwrite)", out)
	}
	w := filepath.Join(t.TempDir(), "world")
	ok(t, w, "init")
	manifest := filepath.Join(t.TempDir(), "manifest")
	if err := build.Copy(compatManifest, manifest); err != nil {
		t.Fatal(err)
	}
	ok(t, w, "build", manifest, "--sources-from", compatManifest)

	priv, pubFile := newExecutorKey(t)
	ok(t, w, "keys", "add", compatPayments, pubFile, "--effects", chargeEffect)
	ok(t, w, "apply", manifest)
	// Only the snapshot the scenario takes: none by count or time.
	d := startDaemonEnv(t, w, []string{"AOS_SNAPSHOT_EVERY=0", "AOS_SNAPSHOT_INTERVAL=0"})
	tok := token(t, w)
	send := func(schema, value string, extra ...string) {
		t.Helper()
		ok(t, w, append([]string{"send", schema, value}, extra...)...)
	}

	// A reminder whose timer the built-in executor fires (signed with the
	// world's executor.key): waited for while nothing else is open.
	send("com.example/ReminderSet@1", `{"reminder_id":"r1","text":"stand up","delay_ms":0}`, "--wait", "60s")
	send(countEv, `{"key":"a","by":2}`)
	send(countEv, `{"key":"b","by":5}`)
	send(countEv, `{"key":"a","by":3}`, "--idempotency-key", "count-a-3")
	send(countEv, `{"key":"a","by":3}`, "--idempotency-key", "count-a-3") // a duplicate: not journaled
	send("com.example/NoteEvent@1", `{"$tag":"Created","$value":{"note_id":"n1","title":"groceries"}}`)
	send("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"milk"}}`)
	send("com.example/NoteEvent@1", `{"$tag":"Created","$value":{"note_id":"n2","title":"old"}}`)
	send("com.example/NoteEvent@1", `{"$tag":"Archived","$value":{"note_id":"n2"}}`)
	// The choreography: orders -> OrderPaid -> shipping and the unkeyed audit.
	send("com.example/OrderPlaced@1", `{"order_id":"c1","amount_cents":250}`)

	// Orders: each opens a charge (for the external executor) and a
	// 15-minute timer (built in), which stays open in the world.
	order := func(id string, cents int) {
		t.Helper()
		send("com.example/OrderCreated@1", fmt.Sprintf(`{"order_id":%q,"amount_cents":%d,"customer":"ada"}`, id, cents))
	}
	order("o1", 1250)
	order("o2", 200000)
	order("o3", 700)
	order("o4", 300)
	send("com.example/OrderCancel@1", `{"order_id":"o4"}`)
	charges := claimCharges(t, d, tok, "o1", "o2", "o3", "o4")
	settleCharge(t, d, tok, priv, charges["o1"], "succeeded")
	settleCharge(t, d, tok, priv, charges["o2"], "declined")
	settleCharge(t, d, tok, priv, charges["o4"], "succeeded") // cancelled keeps the late charge's id
	postFrame(t, d, tok, priv, charges["o3"], 1)              // progress on the charge left open

	// Limits: a step may open one effect, so the next order faults (a
	// business fault, journaled); one is retried once the limit is back.
	ok(t, w, "limits", "set", "max_effects=1")
	order("o-fail", 100)
	order("o-retry", 100)
	ok(t, w, "limits", "set", "max_effects=16", "max_steps_per_input=20000")
	ok(t, w, "failed", "retry", orderWF, "o-retry")

	ok(t, w, "snapshot")
	// Records after the snapshot: opening replays them.
	send(countEv, `{"key":"a","by":1}`)
	send("com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"milk, eggs"}}`)
	send("com.example/OrderPlaced@1", `{"order_id":"c2","amount_cents":100}`)
	order("o5", 900)
	late := claimCharges(t, d, tok, "o5", "o-retry")
	settleCharge(t, d, tok, priv, late["o5"], "succeeded")
	settleCharge(t, d, tok, priv, late["o-retry"], "succeeded")
	d.stop(t, w)

	// What the scenario must have left, checked before anything is kept.
	exp := readCompatExpect(t, w)
	exp.PendingCharge = charges["o3"].Hash
	want := map[[2]string]string{
		{counterWF, "a"}: `{"count":6}`, {counterWF, "b"}: `{"count":5}`,
		{choreoAuditWF, ""}: `{"paid":2,"paid_cents":350,"shipped":2}`,
	}
	for _, c := range exp.Cells {
		key := strings.Trim(string(c.Key), `"`)
		if string(c.Key) == "null" {
			key = ""
		}
		if s, ok := want[[2]string{c.Workflow, key}]; ok && !jsonEqual(c.State, []byte(s)) {
			t.Fatalf("the scenario left %s %s = %s, want %s", c.Workflow, c.Key, c.State, s)
		}
	}
	orders := map[string]string{"o1": "paid", "o2": "payment_failed", "o3": "awaiting_payment", "o4": "cancelled", "o5": "paid", "o-retry": "paid"}
	for _, c := range exp.Cells {
		if c.Workflow == orderWF {
			if st, ok := orders[strings.Trim(string(c.Key), `"`)]; ok && stateOf(t, c)["status"] != st {
				t.Fatalf("order %s: %s, want status %s", c.Key, c.State, st)
			}
		}
		if c.Workflow == reminderWF && stateOf(t, c)["status"] != "fired" {
			t.Fatalf("reminder: %s", c.State)
		}
	}
	if len(exp.Failed) != 1 || string(exp.Failed[0].Key) != `"o-fail"` || exp.Failed[0].Class != "business" {
		t.Fatalf("want the one business fault of o-fail, got %+v", exp.Failed)
	}
	if exp.SnapshotSeq == 0 || exp.SnapshotSeq >= exp.JournalHeight {
		t.Fatalf("want a snapshot with records after it: snapshot %d, height %d", exp.SnapshotSeq, exp.JournalHeight)
	}
	digest := journalDigestOf(t, w)
	for _, k := range []string{"event", "step", "intent", "receipt", "frame", "manifest", "checkpoint", "snapshot", "fault", "config", "recover"} {
		if !strings.Contains(digest, " "+k+" ") {
			t.Fatalf("the scenario journaled no %s record", k)
		}
	}
	verifyCompatJournal(t, w)

	if *overwriteCompat {
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	packWorld(t, w, filepath.Join(out, compatArchive))
	writeJSONFile(t, filepath.Join(out, compatExpected), exp)
	if err := os.WriteFile(filepath.Join(out, compatDigest), []byte(digest), 0o644); err != nil {
		t.Fatal(err)
	}
	pem, err := receipts.EncodePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, compatPayKey), pem, 0o644); err != nil {
		t.Fatal(err)
	}
	writeCompatReadme(t, out, name, exp)
}

// readCompatExpect reads what a world's aosd answers about it (no daemon).
func readCompatExpect(t *testing.T, w string) compatExpect {
	t.Helper()
	var st struct {
		ManifestHash  string         `json:"manifest_hash"`
		JournalHeight uint64         `json:"journal_height"`
		Inflight      int            `json:"inflight"`
		Instances     map[string]int `json:"instances"`
		LastSnapshot  *struct {
			Seq uint64 `json:"seq"`
		} `json:"last_snapshot"`
	}
	jsonOut(t, w, &st, "status")
	exp := compatExpect{ManifestHash: st.ManifestHash, JournalHeight: st.JournalHeight, Inflight: st.Inflight, Instances: st.Instances}
	if st.LastSnapshot != nil {
		exp.SnapshotSeq = st.LastSnapshot.Seq
	}
	for _, k := range compatKeys {
		exp.Cells = append(exp.Cells, showCell(t, w, k[0], k[1]))
	}
	var failed failedList
	jsonOut(t, w, &failed, "failed", "ls", "--all")
	exp.Failed = failed.Failed
	return exp
}

// verifyCompatJournal runs the three whole-journal checks on a world no
// daemon serves: the journal's rules, replay from genesis and from the
// latest snapshot, and every signature against the world's keys.
func verifyCompatJournal(t *testing.T, w string) {
	t.Helper()
	var jc journalCheck
	jsonOut(t, w, &jc, "journal", "check")
	if !jc.OK || jc.From != 1 {
		t.Fatalf("journal check: %+v", jc)
	}
	var rep struct {
		OK   bool `json:"ok"`
		Runs []struct {
			From     string `json:"from"`
			Snapshot *struct {
				Seq uint64 `json:"seq"`
			} `json:"snapshot"`
			Verified int    `json:"verified"`
			OK       bool   `json:"ok"`
			Error    string `json:"error"`
		} `json:"runs"`
	}
	jsonOut(t, w, &rep, "replay", "--verify")
	if !rep.OK || len(rep.Runs) != 2 || rep.Runs[0].From != "genesis" || rep.Runs[0].Verified == 0 ||
		rep.Runs[1].From != "snapshot" || rep.Runs[1].Snapshot == nil {
		t.Fatalf("replay --verify: %+v", rep)
	}
	var ver struct {
		OK       bool `json:"ok"`
		Receipts int  `json:"receipts"`
		Frames   int  `json:"frames"`
		Failures []any
	}
	jsonOut(t, w, &ver, "journal", "verify")
	if !ver.OK || ver.Receipts == 0 || ver.Frames == 0 {
		t.Fatalf("journal verify: %+v", ver)
	}
}

// checkCompatWorld is TestCompatWorlds on one world.
func checkCompatWorld(t *testing.T, dir string) {
	var exp compatExpect
	readJSONFile(t, filepath.Join(dir, compatExpected), &exp)
	wantDigest, err := os.ReadFile(filepath.Join(dir, compatDigest))
	if err != nil {
		t.Fatal(err)
	}
	// Read, not ReadPrivateKeyFile: git keeps no 0600 mode for a test key.
	pemKey, err := os.ReadFile(filepath.Join(dir, compatPayKey))
	if err != nil {
		t.Fatal(err)
	}
	priv, err := receipts.DecodePrivateKey(pemKey)
	if err != nil {
		t.Fatalf("%s: %v", compatPayKey, err)
	}
	w := filepath.Join(t.TempDir(), "world")
	unpackWorld(t, filepath.Join(dir, compatArchive), w)
	checkJournalAtEnd(t, w)

	// The journal reads back, byte for byte, what the old version wrote.
	if got := journalDigestOf(t, w); got != string(wantDigest) {
		t.Fatalf("the journal of %s reads differently from when it was written:\n%s", dir, firstDiff(got, string(wantDigest)))
	}
	verifyCompatJournal(t, w)

	// It opens to the state the old version left, and answers as it did.
	got := readCompatExpect(t, w)
	got.PendingCharge = exp.PendingCharge
	// Opening it may journal what this version keeps of every world and
	// the old one did not (docs/operations.md, "Upgrading aos"): after the
	// old records, and only records of those kinds.
	after := journalDigestOf(t, w)
	if !strings.HasPrefix(after, string(wantDigest)) {
		t.Fatalf("opening %s changed its old records:\n%s", dir, firstDiff(after, string(wantDigest)))
	}
	for _, line := range strings.Fields(strings.ReplaceAll(strings.TrimPrefix(after, string(wantDigest)), " ", "/")) {
		if kind := strings.Split(line, "/")[1]; !slices.Contains(upgradeKinds, kind) {
			t.Fatalf("opening %s journaled %s: only %v may follow the old records", dir, line, upgradeKinds)
		}
	}
	exp.JournalHeight += uint64(strings.Count(after, "\n") - strings.Count(string(wantDigest), "\n"))
	if got.ManifestHash != exp.ManifestHash || got.JournalHeight != exp.JournalHeight || got.SnapshotSeq != exp.SnapshotSeq ||
		got.Inflight != exp.Inflight || !sameCounts(got.Instances, exp.Instances) {
		t.Fatalf("status differs from the old version's:\n got %+v\nwant %+v", got, exp)
	}
	for i, c := range exp.Cells {
		g := got.Cells[i]
		if g.Workflow != c.Workflow || string(g.Key) != string(c.Key) || g.Status != c.Status || g.StateHash != c.StateHash ||
			!jsonEqual(g.State, c.State) || !slices.Equal(g.Inflight, c.Inflight) {
			t.Errorf("cell %s %s differs from the old version's:\n got %+v\nwant %+v", c.Workflow, c.Key, g, c)
		}
	}
	if !reflect.DeepEqual(got.Failed, exp.Failed) {
		t.Errorf("failed instances differ:\n got %+v\nwant %+v", got.Failed, exp.Failed)
	}
	if t.Failed() {
		return
	}

	// New work on the old world, through a daemon of the new version.
	d := startDaemon(t, w)
	tok := token(t, w)
	old := func(wf, key string) map[string]any {
		for _, c := range exp.Cells {
			if c.Workflow == wf && string(c.Key) == fmt.Sprintf("%q", key) {
				return stateOf(t, c)
			}
		}
		t.Fatalf("expect.json has no cell %s %s", wf, key)
		return nil
	}
	ok(t, w, "send", countEv, `{"key":"a","by":10}`)
	if c := stateOf(t, showCell(t, w, counterWF, "a")); c["count"] != old(counterWF, "a")["count"].(float64)+10 {
		t.Errorf("counter a after +10: %v, old %v", c, old(counterWF, "a"))
	}
	ok(t, w, "send", "com.example/NoteEvent@1", `{"$tag":"Edited","$value":{"note_id":"n1","body":"new"}}`)
	if c := stateOf(t, showCell(t, w, noteWF, "n1")); c["body"] != "new" || c["edits"] != old(noteWF, "n1")["edits"].(float64)+1 {
		t.Errorf("note n1 after an edit: %v", c)
	}
	ok(t, w, "send", "com.example/OrderCreated@1", `{"order_id":"o-new","amount_cents":400,"customer":"new"}`)
	// The old charge of o3 is open (offered again: its lease died with the
	// old daemon) beside the new order's.
	charges := claimCharges(t, d, tok, "o3", "o-new")
	if charges["o3"].Hash != exp.PendingCharge {
		t.Fatalf("o3's charge claimed as %s, want the intent the old version opened, %s", charges["o3"].Hash, exp.PendingCharge)
	}
	settleCharge(t, d, tok, priv, charges["o-new"], "succeeded")
	settleCharge(t, d, tok, priv, charges["o3"], "succeeded")
	if c := stateOf(t, showCell(t, w, orderWF, "o-new")); c["status"] != "paid" || c["charge_id"] != chargeID(charges["o-new"].Hash) {
		t.Errorf("the new order after its receipt: %v", c)
	}
	// o3's 15-minute timer, opened by the old version, may have fired by
	// now (the daemon fires timers due in the past at once): the order is
	// paid if the charge came first, expired with the charge's id if not.
	want := "paid"
	if timerSettledBefore(t, w, "o3", charges["o3"].Hash) {
		want = "expired"
	}
	if c := stateOf(t, showCell(t, w, orderWF, "o3")); c["status"] != want || c["charge_id"] != chargeID(exp.PendingCharge) {
		t.Errorf("o3 after the old charge settled: %v, want status %s", c, want)
	}
	// A reminder fires through the built-in timer executor, signed with the
	// old world's executor.key.
	ok(t, w, "send", "com.example/ReminderSet@1", `{"reminder_id":"r-new","text":"later","delay_ms":0}`)
	waitFor(t, "reminder r-new to fire", func() bool { return stateOf(t, showCell(t, w, reminderWF, "r-new"))["status"] == "fired" })
	ok(t, w, "snapshot")
	d.stop(t, w)
	verifyCompatJournal(t, w)
}

// claimCharge is one claimed charge intent.
type claimedCharge struct {
	Hash   string
	Effect string
	Params map[string]any
	World  string // the world the claim answered for, which a receipt must name
}

// claimCharges claims charge intents as the payments executor, for an
// hour, until it holds those of the orders named, and returns them by order
// id (with any other charge it was handed on the way).
func claimCharges(t *testing.T, d *daemon, tok string, orders ...string) map[string]claimedCharge {
	t.Helper()
	out := map[string]claimedCharge{}
	missing := func() []string {
		var m []string
		for _, o := range orders {
			if _, ok := out[o]; !ok {
				m = append(m, o)
			}
		}
		return m
	}
	for tries := 0; len(missing()) > 0 && tries < 20; tries++ {
		req := fmt.Sprintf(`{"executor":%q,"effects":[%q],"max":100,"lease_ms":3600000,"wait_ms":5000}`, compatPayments, chargeEffect)
		code, body := post(t, d, tok, "/v1/effects/claim", []byte(req))
		var claim struct {
			Intents []claimedCharge
			World   string
		}
		if code != 200 || json.Unmarshal(body, &claim) != nil {
			t.Fatalf("claim: %d %s", code, body)
		}
		for _, it := range claim.Intents {
			it.World = claim.World
			out[it.Params["order_id"].(string)] = it
		}
	}
	if m := missing(); len(m) > 0 {
		t.Fatalf("no charge intent offered for orders %v (got %v)", m, out)
	}
	return out
}

// sameCounts says whether a newer version's counts by status are the old
// version's: the same count for every status the old one had, and zero
// for a status it did not have (parked, say).
func sameCounts(got, old map[string]int) bool {
	for k, n := range got {
		if n != old[k] {
			return false
		}
	}
	for k, n := range old {
		if got[k] != n {
			return false
		}
	}
	return true
}

// upgradeKinds are the records a version may journal when it first opens
// a world an older one wrote: the world's identity (a world made before
// identities) and the limits in force (a limit the old version did not
// have).
var upgradeKinds = []string{"world", "config"}

// chargeID is the charge id settleCharge reports for an intent.
func chargeID(intent string) string { return "ch_" + strings.TrimPrefix(intent, "sha256:")[:12] }

// settleCharge posts the payments executor's signed receipt for a charge.
func settleCharge(t *testing.T, d *daemon, tok string, priv ed25519.PrivateKey, it claimedCharge, status string) {
	t.Helper()
	if code, body := post(t, d, tok, "/v1/receipts", chargeReceipt(t, priv, it, status)); code != 200 {
		t.Fatalf("receipt for %s: %d %s", it.Params["order_id"], code, body)
	}
}

// chargeReceipt is the payments executor's signed receipt for a charge, as
// JSON: status "succeeded" or "declined".
func chargeReceipt(t *testing.T, priv ed25519.PrivateKey, it claimedCharge, status string) []byte {
	t.Helper()
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		t.Fatalf("charge intent %q: %v", it.Hash, err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{World: it.World, Intent: h, Effect: chargeEffect, Executor: compatPayments, Status: receipts.StatusOK,
		Payload: schemas.MustMarshal(map[string]any{"charge_id": chargeID(it.Hash), "status": status}), Attempt: 1})
	rj, err := receipts.ToJSON(sr)
	if err != nil {
		t.Fatal(err)
	}
	return rj
}

// postFrame posts a signed progress frame for a charge.
func postFrame(t *testing.T, d *daemon, tok string, priv ed25519.PrivateKey, it claimedCharge, seq uint64) {
	t.Helper()
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	fj, err := receipts.FrameToJSON(receipts.SignFrame(priv, receipts.Frame{World: it.World, Intent: h, Effect: chargeEffect, Seq: seq, Executor: compatPayments,
		Payload: schemas.MustMarshal(map[string]any{"step": "authorizing"})}))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, d, tok, "/v1/frames", fj); code != 200 {
		t.Fatalf("frame for %s: %d %s", it.Params["order_id"], code, body)
	}
}

// timerSettledBefore says whether the order's timer receipt was journaled
// before the receipt of its charge intent.
func timerSettledBefore(t *testing.T, w, order, charge string) bool {
	t.Helper()
	var tr []struct {
		Kind   string `json:"kind"`
		Effect string `json:"effect"`
		Seq    uint64 `json:"seq"`
	}
	jsonOut(t, w, &tr, "trace", orderWF, order)
	for _, e := range tr {
		if e.Kind == "receipt" {
			return e.Effect == "sys/timer.set@1"
		}
	}
	t.Fatalf("trace of %s shows no receipt", order)
	return false
}

// waitFor polls cond until it holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journalDigestOf reads a world's journal straight from its store (no
// daemon may hold it): one line per record, its seq, kind and the SHA-256
// of its body, so the digest pins every journaled byte.
func journalDigestOf(t *testing.T, w string) string {
	t.Helper()
	db, err := badgerdb.Open(filepath.Join(w, "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sb strings.Builder
	err = db.Journal().Read(1, func(r journal.Record) (bool, error) {
		sum := sha256.Sum256(r.Body)
		fmt.Fprintf(&sb, "%d %s %s\n", r.Seq, r.Kind, hex.EncodeToString(sum[:]))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n got %q\nwant %q", i+1, a, b)
		}
	}
	return "no difference"
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// compatKept says whether a world directory's entry goes into the archive:
// the store and the world's own files; not daemon.json (no daemon runs on
// an archive) nor the wasm cache (compiled code, rebuilt on open).
func compatKept(rel string) bool {
	top := strings.Split(filepath.ToSlash(rel), "/")[0]
	return top != "daemon.json" && top != "wasm-cache"
}

// packWorld writes the world directory w as a gzipped tar at path.
func packWorld(t *testing.T, w, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(w, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == w {
			return err
		}
		rel, _ := filepath.Rel(w, p)
		if !compatKept(rel) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime, h.Uname, h.Gname, h.Uid, h.Gid = filepath.ToSlash(rel), time.Unix(0, 0), "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err := errors.Join(err, tw.Close(), zw.Close(), f.Close()); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// unpackWorld extracts a packed world into dir (created), refusing any
// entry that is not a plain file or directory inside it.
func unpackWorld(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		if !filepath.IsLocal(h.Name) {
			t.Fatalf("%s: entry %q is not inside the world", path, h.Name)
		}
		to := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(to, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(to, b, 0o600)
			}
		default:
			t.Fatalf("%s: entry %q is not a file or directory", path, h.Name)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// writeCompatReadme says which code wrote the world and how.
func writeCompatReadme(t *testing.T, out, name string, exp compatExpect) {
	t.Helper()
	rev, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", "../..").Output()
	state := "a clean tree"
	if len(strings.TrimSpace(string(dirty))) > 0 {
		state = "a tree with uncommitted changes to tracked files"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Compatibility world %s\n\n", name)
	fmt.Fprintf(&sb, "Written by `go test ./cmd/aosd -run TestCompatWorlds -args -write-compat %s`\n", name)
	fmt.Fprintf(&sb, "at commit %s (%s), %s, %s/%s, on %s.\n\n",
		strings.TrimSpace(string(rev)), state, runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&sb, "Manifest %s, journal height %d, snapshot record at seq %d.\n\n", exp.ManifestHash, exp.JournalHeight, exp.SnapshotSeq)
	sb.WriteString("| file | what |\n|---|---|\n")
	sb.WriteString("| `world.tar.gz` | the world directory as aosd left it after a clean stop: `store/` (Badger: journal and CAS, the compat module's wasm inside the CAS), `token`, `executor.key`, `executors.json`; not `wasm-cache/` |\n")
	sb.WriteString("| `expect.json` | what that version's aosd answered about the world: status, every cell (`cells show`), the failed instances, and the charge intent left open |\n")
	sb.WriteString("| `journal.digest` | seq, kind and SHA-256 of every journaled record's body |\n")
	sb.WriteString("| `payments.key` | the private key of the external executor `payments` the world trusts for `com.example/payment.charge@1` (a test key: it guards nothing) |\n\n")
	sb.WriteString("Never rewrite these files: a later version that cannot open this world must\n" +
		"document a migration step in docs/operations.md (\"Upgrading aos\") and test it\n" +
		"here, not replace the world. ../../README.md says what the scenario holds.\n")
	if err := os.WriteFile(filepath.Join(out, "README.md"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
