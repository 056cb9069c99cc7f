package receipts_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func testKey(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

func pub(priv ed25519.PrivateKey) ed25519.PublicKey { return priv.Public().(ed25519.PublicKey) }

// testWorld is the world sampleReceipt and sampleFrame name.
const testWorld = "world:0123456789abcdef0123456789abcdef"

func sampleReceipt() receipts.Receipt {
	return receipts.Receipt{
		World:     testWorld,
		Intent:    schemas.HashBytes([]byte("intent-1")),
		Effect:    "com.test/timer.set@1",
		Executor:  "timer",
		Status:    receipts.StatusOK,
		Payload:   schemas.MustMarshal(map[string]any{"delivered_at_ns": uint64(42), "key": "k"}),
		Attempt:   1,
		IssuerRef: "ref-7",
	}
}

// testEffects is what ring's keys may settle: sampleReceipt's effect and
// every other com.test/ effect.
var testEffects = []string{"com.test/*"}

func ring(t testing.TB, entries ...any) *receipts.Keyring {
	t.Helper()
	k := receipts.NewKeyring()
	for i := 0; i < len(entries); i += 2 {
		if err := k.Add(entries[i].(string), pub(entries[i+1].(ed25519.PrivateKey)), testEffects); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func TestSignVerifyRoundTrip(t *testing.T) {
	a := testKey("a")
	k := ring(t, "timer", a)
	sr := receipts.Sign(a, sampleReceipt())
	if sr.KeyID != receipts.KeyID(pub(a)) || !strings.HasPrefix(sr.KeyID, "ed25519:") || len(sr.KeyID) != 8+32 {
		t.Fatalf("key id %q", sr.KeyID)
	}
	name, err := k.Verify(sr)
	if err != nil || name != "timer" {
		t.Fatalf("verify: %q %v", name, err)
	}
	// The message is the domain label followed by the canonical body.
	r := sampleReceipt()
	msg := receipts.SigningMessage(&r)
	if !bytes.HasPrefix(msg, []byte("aos/receipt/v2\x00")) || !bytes.Equal(msg[len(receipts.Domain):], schemas.MustMarshal(&r)) {
		t.Fatal("signing message layout")
	}
	if !ed25519.Verify(pub(a), msg, sr.Signature) {
		t.Fatal("signature is not over the domain-separated body")
	}
	// A signature over the bare body (no domain) must not verify.
	bare := sr
	bare.Signature = ed25519.Sign(a, schemas.MustMarshal(&r))
	if _, err := k.Verify(bare); !errors.Is(err, receipts.ErrBadSignature) {
		t.Fatalf("undomained signature: %v", err)
	}
	// CBOR round trip for the journal.
	got, err := receipts.Unmarshal(sr.Marshal())
	if err != nil || !bytes.Equal(got.Marshal(), sr.Marshal()) {
		t.Fatalf("cbor round trip: %v", err)
	}
	if _, err := k.Verify(got); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRefusesForgeries(t *testing.T) {
	a, b := testKey("a"), testKey("b")
	k := ring(t, "timer", a, "http", b)
	good := receipts.Sign(a, sampleReceipt())
	clone := func() receipts.SignedReceipt {
		c := good
		c.Payload = bytes.Clone(good.Payload)
		c.Signature = bytes.Clone(good.Signature)
		return c
	}
	cases := []struct {
		name string
		mut  func(*receipts.SignedReceipt)
		want error
	}{
		{"signature bit", func(s *receipts.SignedReceipt) { s.Signature[10] ^= 1 }, receipts.ErrBadSignature},
		{"signature last bit", func(s *receipts.SignedReceipt) { s.Signature[63] ^= 0x80 }, receipts.ErrBadSignature},
		{"payload", func(s *receipts.SignedReceipt) {
			s.Payload = schemas.MustMarshal(map[string]any{"delivered_at_ns": uint64(43), "key": "k"})
		}, receipts.ErrBadSignature},
		{"intent bit", func(s *receipts.SignedReceipt) { s.Intent[0] ^= 1 }, receipts.ErrBadSignature},
		{"status", func(s *receipts.SignedReceipt) { s.Status = receipts.StatusError }, receipts.ErrBadSignature},
		{"effect", func(s *receipts.SignedReceipt) { s.Effect = "com.test/http.request@1" }, receipts.ErrBadSignature},
		{"attempt", func(s *receipts.SignedReceipt) { s.Attempt = 2 }, receipts.ErrBadSignature},
		{"issuer_ref", func(s *receipts.SignedReceipt) { s.IssuerRef = "" }, receipts.ErrBadSignature},
		{"executor", func(s *receipts.SignedReceipt) { s.Executor = "http" }, receipts.ErrBadSignature},
		{"world", func(s *receipts.SignedReceipt) { s.World = "world:ffffffffffffffffffffffffffffffff" }, receipts.ErrBadSignature},
		{"world removed (read as v1)", func(s *receipts.SignedReceipt) { s.World = "" }, receipts.ErrBadSignature},
		{"signed by A under B's id", func(s *receipts.SignedReceipt) { s.KeyID = receipts.KeyID(pub(b)) }, receipts.ErrBadSignature},
		{"unknown signer", func(s *receipts.SignedReceipt) { *s = receipts.Sign(testKey("c"), s.Receipt) }, receipts.ErrUnknownSigner},
		{"executor not bound to key", func(s *receipts.SignedReceipt) {
			r := s.Receipt
			r.Executor = "http"
			*s = receipts.Sign(a, r)
		}, receipts.ErrExecutorMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := clone()
			c.mut(&s)
			name, err := k.Verify(s)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %q, %v; want %v", name, err, c.want)
			}
			if !strings.Contains(err.Error(), s.Intent.String()) {
				t.Errorf("error does not name the intent: %v", err)
			}
		})
	}
	if _, err := k.Verify(good); err != nil {
		t.Fatalf("original no longer verifies: %v", err)
	}
}

func TestVerifyRefusesMalformed(t *testing.T) {
	a := testKey("a")
	k := ring(t, "timer", a)
	sign := func(mut func(*receipts.Receipt)) receipts.SignedReceipt {
		r := sampleReceipt()
		mut(&r)
		return receipts.Sign(a, r) // validly signed, still malformed
	}
	cases := map[string]receipts.SignedReceipt{
		"bad status":        sign(func(r *receipts.Receipt) { r.Status = "done" }),
		"empty status":      sign(func(r *receipts.Receipt) { r.Status = "" }),
		"zero intent":       sign(func(r *receipts.Receipt) { r.Intent = schemas.Hash{} }),
		"empty effect":      sign(func(r *receipts.Receipt) { r.Effect = "" }),
		"empty executor":    sign(func(r *receipts.Receipt) { r.Executor = "" }),
		"control in ref":    sign(func(r *receipts.Receipt) { r.IssuerRef = "a\nb" }),
		"space in world":    sign(func(r *receipts.Receipt) { r.World = "world: x" }),
		"empty payload":     sign(func(r *receipts.Receipt) { r.Payload = nil }),
		"non-canonical int": sign(func(r *receipts.Receipt) { r.Payload = []byte{0x18, 0x01} }),
		"trailing bytes":    sign(func(r *receipts.Receipt) { r.Payload = []byte{0x01, 0x02} }),
		"indefinite array":  sign(func(r *receipts.Receipt) { r.Payload = []byte{0x9f, 0x01, 0xff} }),
		"unsorted map":      sign(func(r *receipts.Receipt) { r.Payload = []byte{0xa2, 0x61, 'b', 0x01, 0x61, 'a', 0x02} }),
		"short signature": func() receipts.SignedReceipt {
			s := sign(func(*receipts.Receipt) {})
			s.Signature = s.Signature[:63]
			return s
		}(),
		"key id not hex": func() receipts.SignedReceipt { s := sign(func(*receipts.Receipt) {}); s.KeyID = "ed25519:zz"; return s }(),
		"key id upper case": func() receipts.SignedReceipt {
			s := sign(func(*receipts.Receipt) {})
			s.KeyID = strings.ToUpper(s.KeyID)
			return s
		}(),
	}
	for name, sr := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := k.Verify(sr); !errors.Is(err, receipts.ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

// A receipt that names a world is signed under the v2 label with the world
// in its body; one that names none (the layout journals written before
// worlds had identities hold) under the v1 label, so such receipts still
// verify. Neither signature passes for the other layout.
func TestReceiptLayouts(t *testing.T) {
	a := testKey("a")
	k := ring(t, "timer", a)
	v2 := sampleReceipt()
	v1 := sampleReceipt()
	v1.World = ""
	for _, c := range []struct {
		name   string
		r      receipts.Receipt
		domain string
		world  bool
	}{{"v2", v2, "aos/receipt/v2\x00", true}, {"v1", v1, "aos/receipt/v1\x00", false}} {
		msg := receipts.SigningMessage(&c.r)
		if !bytes.HasPrefix(msg, []byte(c.domain)) {
			t.Errorf("%s: signing message starts %q, want %q", c.name, msg[:15], c.domain)
		}
		if got := bytes.Contains(c.r.Body(), []byte("\x65world")); got != c.world {
			t.Errorf("%s: body holds a world key: %v, want %v", c.name, got, c.world)
		}
		sr := receipts.Sign(a, c.r)
		if _, err := k.Verify(sr); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		got, err := receipts.Unmarshal(sr.Marshal())
		if err != nil || got.World != c.r.World {
			t.Errorf("%s: cbor round trip: %q %v", c.name, got.World, err)
		}
	}
	if receipts.Domain == receipts.DomainV1 || len(receipts.Domain) != len(receipts.DomainV1) {
		t.Fatalf("domains %q %q", receipts.Domain, receipts.DomainV1)
	}
	// The v2 body signed under the v1 label (an executor that added the
	// world but kept the old label) does not verify.
	wrongLabel := receipts.Sign(a, v2)
	wrongLabel.Signature = ed25519.Sign(a, append([]byte(receipts.DomainV1), v2.Body()...))
	if _, err := k.Verify(wrongLabel); !errors.Is(err, receipts.ErrBadSignature) {
		t.Fatalf("v2 body under the v1 label: %v", err)
	}
}

func TestKeyring(t *testing.T) {
	a, b, c := testKey("a"), testKey("b"), testKey("c")
	k := ring(t, "timer", a, "http", b, "http", c) // two keys for http: rotation
	if err := k.Add("other", pub(a), testEffects); !errors.Is(err, receipts.ErrDuplicateKey) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := k.Add("", pub(a), testEffects); !errors.Is(err, receipts.ErrBadKeyring) {
		t.Fatalf("empty name: %v", err)
	}
	if err := k.Add("x", pub(a)[:31], testEffects); !errors.Is(err, receipts.ErrBadKeyring) {
		t.Fatalf("short key: %v", err)
	}
	l := k.List()
	if len(l) != 3 || l[0].Name != "http" || l[1].Name != "http" || l[2].Name != "timer" || l[0].ID > l[1].ID {
		t.Fatalf("list not sorted: %+v", l)
	}

	cb, err := k.MarshalCBOR()
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.CheckCanonical(cb); err != nil {
		t.Fatal(err)
	}
	k2 := receipts.NewKeyring()
	if err := k2.UnmarshalCBOR(cb); err != nil {
		t.Fatal(err)
	}
	cb2, _ := k2.MarshalCBOR()
	if !bytes.Equal(cb, cb2) {
		t.Fatal("cbor round trip differs")
	}
	js, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	k3 := receipts.NewKeyring()
	if err := k3.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	if cb3, _ := k3.MarshalCBOR(); !bytes.Equal(cb, cb3) {
		t.Fatal("json round trip differs")
	}
	// CBOR: unsorted entries are not canonical.
	var doc struct {
		V    uint64 `cbor:"v"`
		Keys []struct {
			Name   string `cbor:"name"`
			Public []byte `cbor:"public"`
		} `cbor:"keys"`
	}
	_ = schemas.Unmarshal(cb, &doc)
	doc.Keys[0], doc.Keys[2] = doc.Keys[2], doc.Keys[0]
	if err := k2.UnmarshalCBOR(schemas.MustMarshal(&doc)); !errors.Is(err, receipts.ErrBadKeyring) {
		t.Fatalf("unsorted cbor: %v", err)
	}
	if k2.Len() != 3 {
		t.Fatal("failed unmarshal changed the keyring")
	}
	// JSON refusals.
	for name, in := range map[string]string{
		"unknown field": `{"keys":[],"x":1}`,
		"duplicate key": `{"keys":[],"keys":[]}`,
		"bad base64":    `{"keys":[{"name":"a","public_key":"!!"}]}`,
		"id mismatch":   `{"keys":[{"name":"a","key_id":"` + receipts.KeyID(pub(b)) + `","public_key":"` + b64(pub(a)) + `"}]}`,
		"dup entries":   `{"keys":[{"name":"a","public_key":"` + b64(pub(a)) + `"},{"name":"b","public_key":"` + b64(pub(a)) + `"}]}`,
	} {
		if err := k3.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// Removing a key makes its receipts unknown.
	sr := receipts.Sign(a, sampleReceipt())
	if err := k.Remove(receipts.KeyID(pub(a))); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(sr); !errors.Is(err, receipts.ErrUnknownSigner) {
		t.Fatalf("removed key: %v", err)
	}
	if err := k.Remove(receipts.KeyID(pub(a))); !errors.Is(err, receipts.ErrKeyNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

func b64(b []byte) string {
	js, _ := json.Marshal(b)
	return strings.Trim(string(js), `"`)
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(dir, "exec.key")
	if err := receipts.WritePrivateKeyFile(pp, priv); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(pp); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	if err := receipts.WritePrivateKeyFile(pp, priv); err == nil {
		t.Fatal("overwrote an existing key")
	}
	got, err := receipts.ReadPrivateKeyFile(pp)
	if err != nil || !got.Equal(priv) {
		t.Fatalf("read private: %v", err)
	}
	if err := os.Chmod(pp, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := receipts.ReadPrivateKeyFile(pp); !errors.Is(err, receipts.ErrBadKey) {
		t.Fatalf("world-readable key accepted: %v", err)
	}
	pu := filepath.Join(dir, "exec.pub")
	if err := receipts.WritePublicKeyFile(pu, pub(priv)); err != nil {
		t.Fatal(err)
	}
	gp, err := receipts.ReadPublicKeyFile(pu)
	if err != nil || !gp.Equal(pub(priv)) {
		t.Fatalf("read public: %v", err)
	}
	text, _ := receipts.EncodePublicKey(pub(priv))
	if _, err := receipts.DecodePrivateKey(text); !errors.Is(err, receipts.ErrBadKey) {
		t.Fatalf("public key decoded as private: %v", err)
	}
	if _, err := receipts.DecodePublicKey(append(text, "junk"...)); !errors.Is(err, receipts.ErrBadKey) {
		t.Fatalf("trailing data: %v", err)
	}

	kp := filepath.Join(dir, "keyring.json")
	k := ring(t, "timer", priv)
	if err := receipts.WriteKeyringFile(kp, k); err != nil {
		t.Fatal(err)
	}
	if err := receipts.WriteKeyringFile(kp, k); err != nil { // replaces atomically
		t.Fatal(err)
	}
	if fi, _ := os.Stat(kp); fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring mode %v", fi.Mode().Perm())
	}
	k2, err := receipts.ReadKeyringFile(kp)
	if err != nil || k2.Len() != 1 {
		t.Fatalf("read keyring: %v", err)
	}
	if name, err := k2.Verify(receipts.Sign(priv, sampleReceipt())); err != nil || name != "timer" {
		t.Fatalf("verify with loaded keyring: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Fatalf("temp files left behind: %v", ents)
	}
}
