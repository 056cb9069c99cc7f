package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// TestJournalVerifyOffline runs `aosd journal verify --file --keys` in
// process (no world: both inputs are files) on an export holding a
// receipt signed with a real ed25519 key: exit 0 and ok when it verifies,
// exit 1 with the report when its signature is forged, and usage errors
// (exit 2) for flags of the other mode.
func TestJournalVerifyOffline(t *testing.T) {
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pem, err := receipts.EncodePublicKey(priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	kj, _ := json.Marshal([]api.KeyView{{Name: "payments", PublicKey: string(pem), Effects: []string{"com.example/charge@1"}}})
	if err := os.WriteFile(keys, kj, 0o600); err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{Intent: schemas.HashBytes([]byte("i")), Effect: "com.example/charge@1",
		Executor: "payments", Status: receipts.StatusOK, Payload: schemas.MustMarshal("paid")})
	export := func(name string, sr receipts.SignedReceipt) string {
		d, err := views.Describe(journal.Record{Seq: 12, Kind: journal.KindReceipt, Body: records.EncodeReceipt(&records.ReceiptRec{Receipt: sr})})
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(d)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, append(line, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := export("good.ndjson", sr)
	forged := sr
	forged.Signature = bytes.Clone(sr.Signature)
	forged.Signature[0] ^= 1
	bad := export("bad.ndjson", forged)
	world := filepath.Join(dir, "no-world")
	aosd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--world", world), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := aosd("journal", "verify", "--file", good, "--keys", keys); code != exitOK || !strings.HasSuffix(out, ": ok\n") {
		t.Fatalf("good export: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := aosd("journal", "verify", "--file", bad, "--keys", keys); code != exitError ||
		!strings.Contains(out, "12 (line 1)") || !strings.Contains(out, "signature does not verify") ||
		!strings.Contains(errs, "1 record(s) failed verification") {
		t.Fatalf("forged export: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"journal", "--file", good}, "listing the journal does not take --file"},
		{[]string{"journal", "verify", "--file", good, "--keys", keys, "--from", "3"}, "journal verify does not take --from"},
		{[]string{"journal", "verify", "now"}, "no arguments after verify"},
	} {
		if code, _, errs := aosd(c.args...); code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("aosd %v: exit %d, want %d with %q\n%s", c.args, code, exitUsage, c.want, errs)
		}
	}
	if _, err := os.Stat(world); !os.IsNotExist(err) {
		t.Fatalf("offline verify touched the world directory: %v", err)
	}
}
