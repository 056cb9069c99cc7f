package host_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// TestKeyringFileMigration: an executors.json written before keys had
// effects still loads. Its keys settle nothing (the refusal names the key
// and says how to fix it) until added again with effects; the built-in key
// is trusted for the built-in effects whatever the file says, and no other
// key keeps the built-in name.
func TestKeyringFileMigration(t *testing.T) {
	dir := host.Dir(filepath.Join(t.TempDir(), "world"))
	if _, err := host.Init(dir, kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	builtinPriv, err := dir.LoadExecutorKey()
	if err != nil {
		t.Fatal(err)
	}
	payments, _ := receipts.GenerateKey()
	impostor, _ := receipts.GenerateKey()
	b64 := func(k ed25519.PrivateKey) string {
		return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	old := `{
  "keys": [
    {"name": "aos/builtin", "key_id": "` + receipts.KeyID(builtinPriv.Public().(ed25519.PublicKey)) + `", "public_key": "` + b64(builtinPriv) + `"},
    {"name": "aos/builtin", "key_id": "` + receipts.KeyID(impostor.Public().(ed25519.PublicKey)) + `", "public_key": "` + b64(impostor) + `"},
    {"name": "payments", "key_id": "` + receipts.KeyID(payments.Public().(ed25519.PublicKey)) + `", "public_key": "` + b64(payments) + `"}
  ]
}
`
	if err := os.WriteFile(dir.Path(host.ExecutorsFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &api.Local{LoadKeys: dir.Keys}
	ks, err := l.Keys(context.Background())
	if err != nil {
		t.Fatalf("old executors.json: %v", err)
	}
	got := map[string]string{}
	for _, k := range ks {
		got[k.Name] = strings.Join(k.Effects, ",")
	}
	if len(ks) != 2 || got[receipts.BuiltinExecutor] != strings.Join(effects.BuiltinEffects(), ",") || got["payments"] != "" {
		t.Fatalf("keys from the old file: %+v", ks)
	}
	const charge = "com.example/payment.charge@1"
	kr, err := dir.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(payments, receipts.Receipt{Intent: schemas.HashBytes([]byte("i")), Effect: charge, Executor: "payments",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(1)})
	if _, err := kr.Verify(sr); !errors.Is(err, receipts.ErrEffectNotAllowed) || !strings.Contains(err.Error(), "add it again") {
		t.Fatalf("receipt from a key of the old file: %v", err)
	}
	imp := sr.Receipt
	imp.Executor, imp.Effect = receipts.BuiltinExecutor, "sys/timer.set@1"
	if _, err := kr.Verify(receipts.Sign(impostor, imp)); !errors.Is(err, receipts.ErrUnknownSigner) {
		t.Fatalf("another key named %s: %v", receipts.BuiltinExecutor, err)
	}
	pub, err := receipts.EncodePublicKey(payments.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := l.AddKey(context.Background(), "payments", string(pub), []string{charge})
	if err != nil || strings.Join(kv.Effects, ",") != charge {
		t.Fatalf("adding the old key again with effects: %+v %v", kv, err)
	}
	if kr, err = dir.Keyring(); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Verify(sr); err != nil {
		t.Fatalf("after adding it again: %v", err)
	}
	text, _ := os.ReadFile(dir.Path(host.ExecutorsFile))
	if bytes.Contains(text, []byte(b64(impostor))) {
		t.Fatalf("the other key named %s is still in executors.json:\n%s", receipts.BuiltinExecutor, text)
	}
}
