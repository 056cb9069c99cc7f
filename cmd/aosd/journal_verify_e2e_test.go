package main_test

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

type verifyReport struct {
	Source                             string
	Keys                               []string
	Records, Receipts, Frames, Intents uint64
	Verified                           uint64
	OK                                 bool
	Failures                           []struct {
		Seq, Line    uint64
		Kind, Reason string
		Intent       *string
		KeyID        string `json:"key_id"`
	}
}

// TestJournalVerifyE2E: a world whose external executor (a real ed25519
// key trusted with `aosd keys add`) posted a signed frame and a receipt
// verifies with `aosd journal verify`, through the daemon and directly;
// its export (`aosd journal --json`) and its keys (`aosd keys ls --json`)
// verify with no world at all; a forged signature, a receipt presented
// under another trusted key's id, and a changed receipt field in the
// export each exit 1 naming the seq.
func TestJournalVerifyE2E(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, world, "keys", "add", "payments", pubFile, "--effects", "com.example/payment.charge@1")
	d := startDaemon(t, world)
	ok(t, world, "apply", built.Path(t, "orders"))
	ok(t, world, "send", "com.example/OrderCreated@1", `{"order_id":"o-1","amount_cents":1250,"customer":"ada"}`)
	tok := token(t, world)
	code, body := post(t, d, tok, "/v1/effects/claim", []byte(`{"executor":"payments","effects":["com.example/payment.charge@1"],"wait_ms":10000}`))
	var claim struct {
		World   string
		Intents []struct{ Hash, Effect string }
	}
	if code != 200 || json.Unmarshal(body, &claim) != nil || len(claim.Intents) != 1 {
		t.Fatalf("claim: %d %s", code, body)
	}
	h, err := schemas.ParseHash(claim.Intents[0].Hash)
	if err != nil {
		t.Fatal(err)
	}
	fj, _ := receipts.FrameToJSON(receipts.SignFrame(priv, receipts.Frame{World: claim.World, Intent: h, Effect: claim.Intents[0].Effect, Seq: 1,
		Executor: "payments", Payload: schemas.MustMarshal(map[string]any{"pct": 50})}))
	if code, body := post(t, d, tok, "/v1/frames", fj); code != 200 {
		t.Fatalf("frame: %d %s", code, body)
	}
	rj, _ := receipts.ToJSON(receipts.Sign(priv, receipts.Receipt{World: claim.World, Intent: h, Effect: claim.Intents[0].Effect, Executor: "payments",
		Status: receipts.StatusOK, Attempt: 1, IssuerRef: "psp-77",
		Payload: schemas.MustMarshal(map[string]any{"charge_id": "ch_1", "status": "succeeded"})}))
	if code, body := post(t, d, tok, "/v1/receipts", rj); code != 200 {
		t.Fatalf("receipt: %d %s", code, body)
	}

	// Through the daemon.
	out := ok(t, world, "journal", "verify")
	if !strings.Contains(out, "verified 4 of 4 (1 receipts, 0 drops, 1 signed frames, 2 intent hashes)") || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("journal verify:\n%s", out)
	}
	if table := ok(t, world, "journal", "--kind", "receipt,frame"); !strings.Contains(table, "com.example/payment.charge@1 ok from payments (key "+receipts.KeyID(priv.Public().(ed25519.PublicKey))+")") ||
		!strings.Contains(table, "frame 1 from payments for "+h.String()) {
		t.Fatalf("journal table:\n%s", table)
	}
	dir := t.TempDir()
	export := filepath.Join(dir, "export.ndjson")
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(export, []byte(ok(t, world, "journal", "--json")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keys, []byte(ok(t, world, "keys", "ls", "--json")), 0o600); err != nil {
		t.Fatal(err)
	}
	d.stop(t, world)

	// Directly, and offline: a world that does not exist is never opened.
	var rep verifyReport
	jsonOut(t, world, &rep, "journal", "verify")
	if !rep.OK || rep.Source != "journal" || rep.Receipts != 1 || rep.Frames != 1 || rep.Intents != 2 || rep.Verified != 4 || len(rep.Keys) != 2 {
		t.Fatalf("journal verify --json (direct): %+v", rep)
	}
	nowhere := filepath.Join(t.TempDir(), "no-world")
	jsonOut(t, nowhere, &rep, "journal", "verify", "--file", export, "--keys", keys)
	if !rep.OK || rep.Source != export || rep.Verified != 4 {
		t.Fatalf("journal verify --file --keys: %+v", rep)
	}
	if _, err := os.Stat(nowhere); !os.IsNotExist(err) {
		t.Fatalf("offline verify touched the world directory: %v", err)
	}
	stdin := exec.Command(aosdBin, "journal", "verify", "--file", "-", "--keys", keys, "--world", nowhere)
	stdin.Stdin, _ = os.Open(export)
	if r := runCmd(t, stdin); r.code != 0 || !strings.Contains(r.stdout, ": ok") {
		t.Fatalf("verify from stdin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Tampered exports.
	text, _ := os.ReadFile(export)
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	var receiptLine int
	var receiptSeq uint64
	for i, l := range lines {
		var e struct {
			Seq  uint64
			Kind string
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Kind == "receipt" {
			receiptLine, receiptSeq = i, e.Seq
		}
	}
	builtinKey := ""
	var views []struct{ Name, ID string }
	if err := json.Unmarshal([]byte(ok(t, world, "keys", "ls", "--json")), &views); err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == "aos/builtin" {
			builtinKey = v.ID
		}
	}
	orig := lines[receiptLine]
	sigAt := strings.Index(orig, `"signature":"`) + len(`"signature":"`)
	forged := []byte(orig)
	forged[sigAt+3] = "AB"[boolInt(forged[sigAt+3] == 'A')] // another base64 letter: another signature
	paymentsKey := receipts.KeyID(priv.Public().(ed25519.PublicKey))
	for _, c := range []struct{ name, line, want string }{
		{"forged signature", string(forged), "signature does not verify under key " + paymentsKey},
		{"another key's id", strings.Replace(orig, paymentsKey, builtinKey, 1), "signature does not verify under key " + builtinKey},
		{"changed status", strings.Replace(orig, `"status":"ok"`, `"status":"timeout"`, 1), "bad signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.line == orig {
				t.Fatal("the tamper changed nothing")
			}
			bad := append([]string(nil), lines...)
			bad[receiptLine] = c.line
			file := filepath.Join(t.TempDir(), "tampered.ndjson")
			if err := os.WriteFile(file, []byte(strings.Join(bad, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := aosd(t, nowhere, "journal", "verify", "--file", file, "--keys", keys)
			if r.code != 1 || !strings.Contains(r.stderr, "1 record(s) failed verification") ||
				!strings.Contains(r.stdout, ": 1 failed") || !strings.Contains(r.stdout, c.want) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			r = aosd(t, nowhere, "journal", "verify", "--file", file, "--keys", keys, "--json")
			var rep verifyReport
			if r.code != 1 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.OK || len(rep.Failures) != 1 {
				t.Fatalf("--json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if f := rep.Failures[0]; f.Seq != receiptSeq || f.Line != uint64(receiptLine+1) || f.Kind != "receipt" ||
				f.Intent == nil || *f.Intent != h.String() || !strings.Contains(f.Reason, c.want) {
				t.Fatalf("failure %+v, want seq %d line %d", f, receiptSeq, receiptLine+1)
			}
		})
	}

	// Usage: flags of one mode are refused in the other; a missing file is
	// an error naming it.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"journal", "--file", export}, 2, "listing the journal does not take --file"},
		{[]string{"journal", "--keys", keys, "--limit", "2"}, 2, "listing the journal does not take --keys"},
		{[]string{"journal", "verify", "--limit", "2"}, 2, "journal verify does not take --limit"},
		{[]string{"journal", "verify", "extra"}, 2, "no arguments after verify"},
		{[]string{"journal", "bogus"}, 2, "or a subcommand: check, verify"},
		{[]string{"journal", "verify", "--file", filepath.Join(dir, "missing"), "--keys", keys}, 1, "read export"},
		{[]string{"journal", "verify", "--file", export, "--keys", export}, 1, "keys"},
	} {
		if r := aosd(t, nowhere, c.args...); r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("aosd %v: exit %d, want %d with %q\n%s", c.args, r.code, c.code, c.want, r.stderr)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
