package main_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/receipts"
)

// TestKeysEffects: `aosd keys` binds keys to effects. An executors.json
// written before keys had effects loads, `ls` shows its key allowed
// nothing, and `add` of the same key with --effects gives it effects;
// --effects is required with add, refused elsewhere, and no key may have
// every effect or the built-in name.
func TestKeysEffects(t *testing.T) {
	t.Parallel()
	world := newWorld(t)
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	pubFile := filepath.Join(t.TempDir(), "legacy.pub.pem")
	if err := receipts.WritePublicKeyFile(pubFile, pub); err != nil {
		t.Fatal(err)
	}
	old := `{"keys": [{"name": "legacy", "key_id": "` + receipts.KeyID(pub) + `", "public_key": "` + base64.StdEncoding.EncodeToString(pub) + `"}]}`
	if err := os.WriteFile(filepath.Join(world, "executors.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	ls := ok(t, world, "keys", "ls")
	if !strings.Contains(ls, "EFFECTS") || !strings.Contains(ls, "(none: add it again with --effects)") ||
		!strings.Contains(ls, "sys/blob.get@1,sys/blob.put@1,sys/http.request@1,sys/http.request@2,sys/timer.set@1") {
		t.Fatalf("keys ls over an old executors.json:\n%s", ls)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"keys", "add", "legacy", pubFile, "--effects", "*"}, 1, "every effect"},
		{[]string{"keys", "add", "aos/builtin", pubFile, "--effects", "sys/timer.set@1"}, 1, "built-in executors' name"},
		{[]string{"keys", "add", "legacy", pubFile, "--effects", " , "}, 2, "--effects is required"},
		{[]string{"keys", "ls", "--effects", "a/b@1"}, 2, "--effects goes with add"},
	} {
		if r := aosd(t, world, c.args...); r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("aosd %v: exit %d, stderr %s; want exit %d containing %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	out := ok(t, world, "keys", "add", "legacy", pubFile, "--effects", "com.example/b@1, com.example/a/*")
	if !strings.Contains(out, "com.example/a/*, com.example/b@1") {
		t.Fatalf("keys add: %s", out)
	}
	var keys []struct {
		Name    string
		Effects []string
	}
	jsonOut(t, world, &keys, "keys", "ls")
	for _, k := range keys {
		if k.Name == "legacy" && strings.Join(k.Effects, ",") != "com.example/a/*,com.example/b@1" {
			t.Fatalf("legacy key after add: %+v", k)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("keys %+v, want legacy and aos/builtin", keys)
	}
}
