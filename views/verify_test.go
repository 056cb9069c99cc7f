package views_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

const chargeEffect = "com.example/payment.charge@1"

// paidWorld is a world opened as `aosd serve` opens it (host.Open: real
// Badger, the built-in executors) whose journal holds every kind a live
// world writes in the course of business: two orders of the orders example,
// each opening a charge and an expiry timer (15 minutes: it does not fire
// during the test), whose charges an external executor, trusted with a
// real ed25519 key, reports on with two signed frames and settles with
// receipts; a limits change, and a snapshot. It returns the world, its
// trusted keys (as GET /v1/keys lists them) and the journal's export lines
// (as GET /v1/journal writes them).
func paidWorld(t *testing.T) (*kernel.World, *receipts.Keyring, []string) {
	t.Helper()
	ctx := context.Background()
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	h, err := host.Open(ctx, string(dir), host.Options{Create: true, Store: host.StoreOptions{WasmCacheDir: built.WasmCache(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	w := h.Kernel()
	m, err := manifest.Load(built.Path(t, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(ctx, m, false); err != nil {
		t.Fatal(err)
	}
	payments, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := receipts.EncodePublicKey(payments.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Local().AddKey(ctx, "payments", string(pub), []string{chargeEffect}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"o1", "o2"} {
		if _, err := w.Submit(ctx, kernel.Event{Schema: "com.example/OrderCreated@1",
			JSON: json.RawMessage(`{"order_id":"` + o + `","amount_cents":100,"customer":"<c&o>"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var charges []schemas.Hash
	if err := w.Journal().Read(1, func(r journal.Record) (bool, error) {
		if rec, err := records.Decode(r); err == nil {
			if in, ok := rec.(*records.IntentRec); ok && in.Effect == chargeEffect {
				charges = append(charges, in.Hash)
			}
		}
		return true, nil
	}); err != nil || len(charges) != 2 {
		t.Fatalf("charges %v: %v", charges, err)
	}
	for i, ch := range charges {
		if i == 0 {
			for seq := uint64(1); seq <= 2; seq++ {
				p := map[string]any{"pct": seq * 40}
				if seq == 2 {
					p["raw"] = []byte{1, 2} // no exact JSON form: exported with payload_cbor
				}
				if _, err := w.SubmitFrame(ctx, receipts.SignFrame(payments, receipts.Frame{World: w.Identity(), Intent: ch, Effect: chargeEffect,
					Seq: seq, Executor: "payments", Payload: schemas.MustMarshal(p)})); err != nil {
					t.Fatalf("frame: %v", err)
				}
			}
		}
		hex := ch.String()[7:]
		if _, err := w.SubmitReceipt(ctx, receipts.Sign(payments, receipts.Receipt{World: w.Identity(), Intent: ch, Effect: chargeEffect,
			Executor: "payments", Status: receipts.StatusOK, Attempt: uint64(i + 1), IssuerRef: "ref-" + hex[:8],
			Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_" + hex[:4], "status": "succeeded"})})); err != nil {
			t.Fatalf("receipt: %v", err)
		}
	}
	if _, err := w.SetLimits(ctx, kernel.Limits{MaxEffects: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	kr, err := dir.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	if err := h.Local().Journal(ctx, api.JournalQuery{}, func(line json.RawMessage) error {
		lines = append(lines, string(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return w, kr, lines
}

// TestExportOfRealJournal: every line of a real world's export reads back
// (ParseRecord) as the journaled record, byte for byte, and the journal
// holds every kind a world in business writes.
func TestExportOfRealJournal(t *testing.T) {
	w, _, lines := paidWorld(t)
	var raw []journal.Record
	if err := w.Journal().Read(1, func(r journal.Record) (bool, error) {
		raw = append(raw, journal.Record{Seq: r.Seq, Kind: r.Kind, Body: bytes.Clone(r.Body)})
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(raw) {
		t.Fatalf("%d export lines for %d records", len(lines), len(raw))
	}
	for _, want := range []string{`"payload_cbor":"`, `"entropy":"`, `"signature":"`, `"idempotency_key":null`, `"source":"`} {
		if !strings.Contains(strings.Join(lines, "\n"), want) {
			t.Errorf("the export has no %s", want)
		}
	}
	checkAgainstOpenAPI(t, lines)
	kinds := map[journal.Kind]bool{}
	for i, line := range lines {
		back, err := views.ParseRecord([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		if back.Seq != raw[i].Seq || back.Kind != raw[i].Kind || !bytes.Equal(back.Body, raw[i].Body) {
			t.Fatalf("line %d is not the record it exports:\n%s\njournal %x\nexport  %x", i+1, line, raw[i].Body, back.Body)
		}
		kinds[back.Kind] = true
	}
	for _, k := range []journal.Kind{journal.KindWorld, journal.KindManifest, journal.KindEvent, journal.KindStep, journal.KindIntent, journal.KindFrame,
		journal.KindReceipt, journal.KindConfig, journal.KindCheckpoint, journal.KindSnapshot} {
		if !kinds[k] {
			t.Errorf("the world's journal has no %s record", k)
		}
	}
}

// verifyLines runs a verifier over export lines.
func verifyLines(t *testing.T, kr *receipts.Keyring, lines []string) *views.JournalVerify {
	t.Helper()
	v := views.NewJournalVerifier(kr, "test")
	for i, l := range lines {
		v.Line(uint64(i+1), []byte(l))
	}
	return v.Report()
}

// TestJournalVerify: a clean world's export verifies (every receipt, signed
// frame and intent hash checked and passed); one forged signature, a
// receipt presented under another trusted key's id, a receipt, frame or
// intent field changed in the export, or a signer the keys do not trust
// each fail, naming the seq, the kind, the intent and the key.
func TestJournalVerify(t *testing.T) {
	_, kr, lines := paidWorld(t)
	rep := verifyLines(t, kr, lines)
	if !rep.OK || rep.Receipts != 2 || rep.Frames != 2 || rep.Intents != 4 || rep.Verified != 8 || rep.UnsignedFrames != 0 ||
		rep.Records != uint64(len(lines)) || len(rep.Keys) != 2 || len(rep.Failures) != 0 {
		t.Fatalf("clean world: %+v", rep)
	}
	var builtinID string
	for _, k := range kr.List() {
		if k.Name == receipts.BuiltinExecutor {
			builtinID = k.ID
		}
	}

	// find is the first line of kind, its index and seq.
	find := func(kind string) (int, uint64) {
		for i, l := range lines {
			var e struct {
				Seq  uint64
				Kind string
			}
			if json.Unmarshal([]byte(l), &e) == nil && e.Kind == kind {
				return i, e.Seq
			}
		}
		t.Fatalf("no %s line", kind)
		return 0, 0
	}
	field := func(line, name string) string {
		i := strings.Index(line, `"`+name+`":"`)
		if i < 0 {
			t.Fatalf("no %s in %s", name, line)
		}
		rest := line[i+len(name)+4:]
		return rest[:strings.IndexByte(rest, '"')]
	}
	for _, c := range []struct {
		name, kind string
		tamper     func(line string) string
		want       string
	}{
		{"forged receipt signature", "receipt", func(l string) string {
			sig := field(l, "signature")
			forged := []byte(sig)
			// Another base64 letter (flipping a bit could make '+' or '/'
			// into a non-letter, about one run in 32): another signature.
			if forged[10] == 'A' {
				forged[10] = 'B'
			} else {
				forged[10] = 'A'
			}
			return strings.Replace(l, sig, string(forged), 1)
		}, "signature does not verify"},
		{"receipt under another key's id", "receipt", func(l string) string {
			return strings.Replace(l, field(l, "key_id"), builtinID, 1)
		}, "signature does not verify under key " + builtinID},
		{"receipt status changed", "receipt", func(l string) string {
			return strings.Replace(l, `"status":"ok"`, `"status":"error"`, 1)
		}, "bad signature"},
		{"receipt payload changed", "receipt", func(l string) string {
			return strings.Replace(l, `"status":"succeeded"`, `"status":"refunded"`, 1)
		}, "bad signature"},
		{"receipt issuer_ref dropped", "receipt", func(l string) string {
			return strings.Replace(l, `"issuer_ref":"`+field(l, "issuer_ref")+`",`, ``, 1)
		}, "bad signature"},
		{"receipt for another world", "receipt", func(l string) string {
			return strings.Replace(l, field(l, "world"), "world:00112233445566778899aabbccddeeff", 1)
		}, "bad signature"},
		{"receipt's world dropped (read as the first layout)", "receipt", func(l string) string {
			return strings.Replace(l, `,"world":"`+field(l, "world")+`"`, ``, 1)
		}, "bad signature"},
		{"frame for another world", "frame", func(l string) string {
			return strings.Replace(l, field(l, "world"), "world:00112233445566778899aabbccddeeff", 1)
		}, "signature does not verify"},
		{"intent's world changed", "intent", func(l string) string {
			return strings.Replace(l, field(l, "world"), "world:00112233445566778899aabbccddeeff", 1)
		}, "is not the hash of the intent's fields"},
		{"frame payload changed", "frame", func(l string) string {
			return strings.Replace(l, `"pct":40`, `"pct":100`, 1)
		}, "frame for intent"},
		{"frame seq changed", "frame", func(l string) string {
			return strings.Replace(l, `"seq":1,`, `"seq":3,`, 1)
		}, "signature does not verify"},
		{"intent params changed", "intent", func(l string) string {
			return strings.Replace(l, `"amount_cents":100`, `"amount_cents":1`, 1)
		}, "is not the hash of the intent's fields"},
		{"intent origin key changed", "intent", func(l string) string {
			return strings.Replace(l, `"origin_key":"o`, `"origin_key":"x`, 1)
		}, "is not the hash of the intent's fields"},
	} {
		t.Run(c.name, func(t *testing.T) {
			i, seq := find(c.kind)
			bad := append([]string(nil), lines...)
			bad[i] = c.tamper(lines[i])
			if bad[i] == lines[i] {
				t.Fatalf("the tamper changed nothing in %s", lines[i])
			}
			rep := verifyLines(t, kr, bad)
			if rep.OK || len(rep.Failures) != 1 {
				t.Fatalf("want one failure, got %+v", rep)
			}
			f := rep.Failures[0]
			if f.Seq != seq || f.Line != uint64(i+1) || f.Kind != c.kind || f.Intent == nil || !strings.Contains(f.Reason, c.want) {
				t.Fatalf("failure %+v; want seq %d line %d kind %s reason containing %q", f, seq, i+1, c.kind, c.want)
			}
			if c.kind != "intent" && (f.KeyID == "" || !strings.Contains(bad[i], f.KeyID)) {
				t.Fatalf("failure names key %q, not the record's", f.KeyID)
			}
			if rep.Verified != 7 {
				t.Fatalf("verified %d of 8, want the other 7", rep.Verified)
			}
		})
	}

	t.Run("untrusted signer", func(t *testing.T) {
		only := receipts.NewKeyring()
		for _, k := range kr.List() {
			if k.Name == receipts.BuiltinExecutor {
				if err := only.Add(k.Name, k.Public, k.Effects); err != nil {
					t.Fatal(err)
				}
			}
		}
		rep := verifyLines(t, only, lines)
		if rep.OK || len(rep.Failures) != 4 || rep.Verified != 4 {
			t.Fatalf("want the 2 receipts and 2 frames failing (and the 4 intents passing), got %+v", rep)
		}
		for _, f := range rep.Failures {
			if f.Seq == 0 || !strings.Contains(f.Reason, "is not trusted") || f.KeyID == builtinID {
				t.Fatalf("failure %+v", f)
			}
		}
	})

	t.Run("key not allowed the effect", func(t *testing.T) {
		narrow := receipts.NewKeyring()
		for _, k := range kr.List() {
			effs := k.Effects
			if k.Name == "payments" {
				effs = []string{"com.example/other@1"}
			}
			if err := narrow.Add(k.Name, k.Public, effs); err != nil {
				t.Fatal(err)
			}
		}
		rep := verifyLines(t, narrow, lines)
		if rep.OK || len(rep.Failures) != 4 || !strings.Contains(rep.Failures[0].Reason, "may not settle effect "+chargeEffect) {
			t.Fatalf("want every payments record refused for its effect, got %+v", rep)
		}
	})

	t.Run("unreadable line", func(t *testing.T) {
		i, seq := find("receipt")
		bad := append([]string(nil), lines...)
		bad[i] = strings.Replace(lines[i], `"stamp"`, `"stamp_":1,"stamp"`, 1)
		rep := verifyLines(t, kr, bad)
		if rep.OK || len(rep.Failures) != 1 || rep.Unreadable != 1 || rep.Failures[0].Seq != seq || rep.Failures[0].Kind != "receipt" ||
			!strings.Contains(rep.Failures[0].Reason, `unknown field "stamp_"`) {
			t.Fatalf("want the line refused naming seq %d, got %+v", seq, rep)
		}
	})
}

// TestJournalVerifyCrafted: the records a clean business day does not
// write: a drop (a validly signed receipt fenced off) is verified like a
// receipt, and a forged one fails; a receipt in the first layout (no world,
// as journals written before worlds had identities hold) verifies under
// its own label; a frame journaled before frames were signed is counted
// unsigned, not failed; a frame with part of a signature fails as
// malformed.
func TestJournalVerifyCrafted(t *testing.T) {
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kr := receipts.NewKeyring()
	if err := kr.Add("payments", priv.Public().(ed25519.PublicKey), []string{chargeEffect}); err != nil {
		t.Fatal(err)
	}
	h := schemas.HashBytes([]byte("intent"))
	sr := receipts.Sign(priv, receipts.Receipt{World: "world:0123456789abcdef0123456789abcdef", Intent: h, Effect: chargeEffect,
		Executor: "payments", Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"late": true})})
	forged := sr
	forged.Attempt = 9
	v1 := receipts.Sign(priv, receipts.Receipt{Intent: h, Effect: chargeEffect, Executor: "payments", Status: receipts.StatusOK,
		Payload: schemas.MustMarshal(map[string]any{"late": true})})
	line := func(seq uint64, kind journal.Kind, rec any) string {
		return string(exportLine(t, journal.Record{Seq: seq, Kind: kind, Body: schemas.MustMarshal(rec)}))
	}
	lines := []string{
		line(3, journal.KindDrop, &records.DropRec{Receipt: sr, Reason: "instance failed"}),
		line(4, journal.KindDrop, &records.DropRec{Receipt: forged, Reason: "instance failed"}),
		line(5, journal.KindFrame, &records.FrameRec{Intent: h, Seq: 1, Executor: "payments", Payload: schemas.MustMarshal(1)}),
		line(6, journal.KindFrame, &records.FrameRec{Intent: h, Seq: 2, Executor: "payments", Payload: schemas.MustMarshal(2),
			Signature: make([]byte, 64)}),
		line(7, journal.KindDrop, &records.DropRec{Receipt: v1, Reason: "instance failed"}),
	}
	rep := verifyLines(t, kr, lines)
	if rep.Drops != 3 || rep.UnsignedFrames != 1 || rep.Frames != 1 || rep.Verified != 2 || len(rep.Failures) != 2 || rep.OK {
		t.Fatalf("report %+v", rep)
	}
	if f := rep.Failures[0]; f.Seq != 4 || f.Kind != "drop" || *f.Intent != h || f.KeyID != sr.KeyID || !strings.Contains(f.Reason, "bad signature") {
		t.Fatalf("forged drop: %+v", f)
	}
	if f := rep.Failures[1]; f.Seq != 6 || f.Kind != "frame" || !strings.Contains(f.Reason, "malformed") {
		t.Fatalf("half-signed frame: %+v", f)
	}
}

// TestJournalVerifyListsAtMost: failures beyond MaxVerifyFailures are
// counted, not listed, and the report is not ok.
func TestJournalVerifyListsAtMost(t *testing.T) {
	kr := receipts.NewKeyring()
	lines := make([]string, views.MaxVerifyFailures+2)
	for i := range lines {
		lines[i] = "not a line"
	}
	rep := verifyLines(t, kr, lines)
	if rep.OK || len(rep.Failures) != views.MaxVerifyFailures || rep.Omitted != 2 || rep.Unreadable != uint64(len(lines)) {
		t.Fatalf("failures %d, omitted %d, unreadable %d, ok %v", len(rep.Failures), rep.Omitted, rep.Unreadable, rep.OK)
	}
}
