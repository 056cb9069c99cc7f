package receipts_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/internal/canon"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// A key is trusted for the effects it was added for: exact names and
// "ns/*" namespaces. Adding one for no effect, for every effect, or (unless
// it is the built-in key) for a sys/ effect is refused.
func TestKeyEffects(t *testing.T) {
	a, b := testKey("a"), testKey("b")
	k := receipts.NewKeyring()
	for name, effs := range map[string][]string{
		"no effects":          nil,
		"empty list":          {},
		"everything":          {"*"},
		"star inside":         {"com.acme/ch*"},
		"star not last":       {"com.acme/*/x@1"},
		"bare namespace star": {"/*"},
		"empty name":          {""},
		"space":               {"com.acme/a b@1"},
		"sys effect":          {"sys/timer.set@1"},
		"sys namespace":       {"sys/*"},
		"sys among others":    {"com.acme/charge@1", "sys/blob.get@1"},
	} {
		err := k.Add("payments", pub(a), effs)
		if !errors.Is(err, receipts.ErrBadKeyring) {
			t.Errorf("%s: Add gave %v, want ErrBadKeyring", name, err)
		}
	}
	if k.Len() != 0 {
		t.Fatalf("refused adds left %d keys", k.Len())
	}
	err := k.Add("payments", pub(a), []string{"sys/timer.set@1"})
	if err == nil || !strings.Contains(err.Error(), "only the built-in executors' key") {
		t.Fatalf("sys effect for an external key: %v", err)
	}
	if err := k.Add("payments", pub(a), []string{"*"}); err == nil || !strings.Contains(err.Error(), "would allow every effect") {
		t.Fatalf("every effect: %v", err)
	}
	if err := k.Add(receipts.BuiltinExecutor, pub(b), []string{"sys/timer.set@1", "sys/blob.get@1"}); err != nil {
		t.Fatalf("built-in key for sys effects: %v", err)
	}
	if err := k.Add("payments", pub(a), []string{"com.acme/refunds/*", "com.acme/charge@1", "com.acme/charge@1"}); err != nil {
		t.Fatal(err)
	}
	var got receipts.Key
	for _, key := range k.List() {
		if key.Name == "payments" {
			got = key
		}
	}
	if strings.Join(got.Effects, ",") != "com.acme/charge@1,com.acme/refunds/*" {
		t.Fatalf("effects %v, want sorted without repeats", got.Effects)
	}
	for effect, want := range map[string]bool{
		"com.acme/charge@1":           true,
		"com.acme/charge@2":           false,
		"com.acme/refunds/full@1":     true,
		"com.acme/refunds/a/b@1":      true,
		"com.acme/refunds@1":          false,
		"com.acme/refundsx/y@1":       false,
		"com.acme/refunds/":           true,
		"sys/timer.set@1":             false,
		"org.other/com.acme/charge@1": false,
	} {
		if got.Allows(effect) != want {
			t.Errorf("Allows(%s) = %v, want %v", effect, !want, want)
		}
	}

	// Verify: the signer must be allowed the receipt's effect.
	r := sampleReceipt()
	r.Executor, r.Effect = "payments", "com.acme/refunds/full@1"
	if name, err := k.Verify(receipts.Sign(a, r)); err != nil || name != "payments" {
		t.Fatalf("allowed effect: %q %v", name, err)
	}
	r.Effect = "com.acme/payout@1"
	_, err = k.Verify(receipts.Sign(a, r))
	if !errors.Is(err, receipts.ErrEffectNotAllowed) {
		t.Fatalf("effect the key is not allowed: %v", err)
	}
	for _, want := range []string{receipts.KeyID(pub(a)), "executor payments", "com.acme/payout@1", r.Intent.String()} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal %q does not name %q", err, want)
		}
	}
	// The built-in key settles its sys effects, and nothing else.
	bi := sampleReceipt()
	bi.Executor, bi.Effect = receipts.BuiltinExecutor, "sys/timer.set@1"
	if _, err := k.Verify(receipts.Sign(b, bi)); err != nil {
		t.Fatalf("built-in receipt: %v", err)
	}
	bi.Effect = "com.acme/charge@1"
	if _, err := k.Verify(receipts.Sign(b, bi)); !errors.Is(err, receipts.ErrEffectNotAllowed) {
		t.Fatalf("built-in key settling an external effect: %v", err)
	}
}

// A keyring file carries each key's effects; a file written before keys
// were bound to effects still loads, its keys allowed nothing until added
// again with their effects.
func TestKeyringFileEffects(t *testing.T) {
	a, b := testKey("a"), testKey("b")
	dir := t.TempDir()
	k := receipts.NewKeyring()
	if err := k.Add("payments", pub(a), []string{"com.acme/charge@1", "com.acme/refunds/*"}); err != nil {
		t.Fatal(err)
	}
	if err := k.Add(receipts.BuiltinExecutor, pub(b), []string{"sys/timer.set@1"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "executors.json")
	if err := receipts.WriteKeyringFile(path, k); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(path)
	if !bytes.Contains(text, []byte(`"com.acme/refunds/*"`)) {
		t.Fatalf("file lacks the effects:\n%s", text)
	}
	k2, err := receipts.ReadKeyringFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := k.MarshalCBOR()
	if cb2, _ := k2.MarshalCBOR(); !bytes.Equal(cb, cb2) {
		t.Fatal("file round trip lost or changed effects")
	}
	k3 := receipts.NewKeyring()
	if err := k3.UnmarshalCBOR(cb); err != nil {
		t.Fatal(err)
	}
	if cb3, _ := k3.MarshalCBOR(); !bytes.Equal(cb, cb3) {
		t.Fatal("cbor round trip lost or changed effects")
	}
	for name, c := range map[string]struct{ in, want string }{
		"empty effects": {`{"keys":[{"name":"p","public_key":"` + b64(pub(a)) + `","effects":[]}]}`, "/keys/0/effects: empty"},
		"sys effect":    {`{"keys":[{"name":"p","public_key":"` + b64(pub(a)) + `","effects":["sys/timer.set@1"]}]}`, "/keys/0"},
		"everything":    {`{"keys":[{"name":"p","public_key":"` + b64(pub(a)) + `","effects":["*"]}]}`, "every effect"},
	} {
		if err := k3.UnmarshalJSON([]byte(c.in)); !errors.Is(err, receipts.ErrBadKeyring) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadKeyring naming %q", name, err, c.want)
		}
	}

	// The format before effects: no "effects" field.
	old := `{
  "keys": [
    {"name": "payments", "key_id": "` + receipts.KeyID(pub(a)) + `", "public_key": "` + b64(pub(a)) + `"}
  ]
}
`
	oldPath := filepath.Join(dir, "old.json")
	if err := os.WriteFile(oldPath, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	legacy, err := receipts.ReadKeyringFile(oldPath)
	if err != nil {
		t.Fatalf("old keyring file: %v", err)
	}
	if l := legacy.List(); len(l) != 1 || len(l[0].Effects) != 0 {
		t.Fatalf("old keyring loaded as %+v", l)
	}
	r := sampleReceipt()
	r.Executor, r.Effect = "payments", "com.acme/charge@1"
	_, err = legacy.Verify(receipts.Sign(a, r))
	if !errors.Is(err, receipts.ErrEffectNotAllowed) || !strings.Contains(err.Error(), "add it again") || !strings.Contains(err.Error(), receipts.KeyID(pub(a))) {
		t.Fatalf("receipt from a key of an old keyring: %v", err)
	}
	oldCBOR, _ := legacy.MarshalCBOR()
	if bytes.Contains(oldCBOR, []byte("effects")) {
		t.Fatal("a key allowed nothing is written with an effects field")
	}
	if err := receipts.NewKeyring().UnmarshalCBOR(oldCBOR); err != nil {
		t.Fatalf("old keyring cbor: %v", err)
	}
	// Added again under its name with effects, it gains them; under another
	// name, or once it has effects, it is a duplicate.
	if err := legacy.Add("other", pub(a), []string{"com.acme/charge@1"}); !errors.Is(err, receipts.ErrDuplicateKey) {
		t.Fatalf("old key re-added under another name: %v", err)
	}
	if err := legacy.Add("payments", pub(a), []string{"com.acme/charge@1"}); err != nil {
		t.Fatalf("old key re-added with effects: %v", err)
	}
	if _, err := legacy.Verify(receipts.Sign(a, r)); err != nil {
		t.Fatalf("after re-adding: %v", err)
	}
	if err := legacy.Add("payments", pub(a), []string{"com.acme/other@1"}); !errors.Is(err, receipts.ErrDuplicateKey) {
		t.Fatalf("key with effects re-added: %v", err)
	}
	// A file naming the same key twice is refused even if one entry has no effects.
	dup := `{"keys":[{"name":"p","public_key":"` + b64(pub(a)) + `"},{"name":"p","public_key":"` + b64(pub(a)) + `","effects":["x/y@1"]}]}`
	if err := receipts.NewKeyring().UnmarshalJSON([]byte(dup)); !errors.Is(err, receipts.ErrDuplicateKey) {
		t.Fatalf("repeated entry: %v", err)
	}
}

func sampleFrame() receipts.Frame {
	return receipts.Frame{
		World:    testWorld,
		Intent:   schemas.HashBytes([]byte("intent-1")),
		Effect:   "com.test/timer.set@1",
		Seq:      3,
		Executor: "timer",
		Payload:  schemas.MustMarshal(map[string]any{"attempt": uint64(2)}),
	}
}

// The frame body is the documented canonical map, so executors in other
// languages can build it.
func TestFrameBody(t *testing.T) {
	f := sampleFrame()
	var want []byte
	want = canon.AppendMap(want, 6)
	want = canon.AppendText(want, "seq")
	want = canon.AppendUint(want, 3)
	want = canon.AppendText(canon.AppendText(want, "world"), f.World)
	want = canon.AppendText(canon.AppendText(want, "effect"), f.Effect)
	want = canon.AppendBytesOrNull(canon.AppendText(want, "payload"), f.Payload)
	want = canon.AppendText(canon.AppendText(want, "executor"), f.Executor)
	want = canon.AppendBytesOrNull(canon.AppendText(want, "intent_hash"), f.Intent[:])
	if got := f.Body(); !bytes.Equal(got, want) {
		t.Fatalf("frame body\n got %x\nwant %x", got, want)
	}
	msg := receipts.FrameSigningMessage(&f)
	if !bytes.HasPrefix(msg, []byte("aos/frame/v2\x00")) || receipts.FrameDomain == receipts.Domain {
		t.Fatalf("frame signing message starts %q", msg[:16])
	}
	// A frame that names no world is the v1 layout: no world key, the v1 label.
	f.World = ""
	if msg := receipts.FrameSigningMessage(&f); !bytes.HasPrefix(msg, []byte("aos/frame/v1\x00")) || bytes.Contains(msg, []byte("world")) {
		t.Fatalf("v1 frame signing message %q", msg)
	}
}

func TestFrameVerify(t *testing.T) {
	a, b, stranger := testKey("a"), testKey("b"), testKey("stranger")
	k := ring(t, "timer", a, "http", b)
	sf := receipts.SignFrame(a, sampleFrame())
	if name, err := k.VerifyFrame(sf); err != nil || name != "timer" {
		t.Fatalf("verify: %q %v", name, err)
	}
	// A receipt's signature over the same fields does not pass as a frame's.
	r := sampleReceipt()
	r.World, r.Intent, r.Effect, r.Executor, r.Payload = sf.World, sf.Intent, sf.Effect, sf.Executor, sf.Payload
	cross := sf
	cross.Signature = receipts.Sign(a, r).Signature
	notAllowed := sampleFrame()
	notAllowed.Effect = "org.other/x@1"
	wrongName := sampleFrame()
	wrongName.Executor = "http"
	cases := []struct {
		name string
		sf   receipts.SignedFrame
		want error
	}{
		{"tampered seq", edit(sf, func(f *receipts.SignedFrame) { f.Seq++ }), receipts.ErrBadSignature},
		{"tampered effect", edit(sf, func(f *receipts.SignedFrame) { f.Effect = "com.test/http.request@1" }), receipts.ErrBadSignature},
		{"tampered payload", edit(sf, func(f *receipts.SignedFrame) { f.Payload = schemas.MustMarshal(uint64(1)) }), receipts.ErrBadSignature},
		{"tampered intent", edit(sf, func(f *receipts.SignedFrame) { f.Intent = schemas.HashBytes([]byte("x")) }), receipts.ErrBadSignature},
		{"tampered world", edit(sf, func(f *receipts.SignedFrame) { f.World = "world:other" }), receipts.ErrBadSignature},
		{"world removed (read as v1)", edit(sf, func(f *receipts.SignedFrame) { f.World = "" }), receipts.ErrBadSignature},
		{"forged", edit(sf, func(f *receipts.SignedFrame) { f.Signature[0] ^= 1 }), receipts.ErrBadSignature},
		{"another key's id", edit(sf, func(f *receipts.SignedFrame) { f.KeyID = receipts.KeyID(pub(b)) }), receipts.ErrBadSignature},
		{"receipt signature", cross, receipts.ErrBadSignature},
		{"unknown signer", receipts.SignFrame(stranger, sampleFrame()), receipts.ErrUnknownSigner},
		{"executor of another key", receipts.SignFrame(a, wrongName), receipts.ErrExecutorMismatch},
		{"effect not allowed", receipts.SignFrame(a, notAllowed), receipts.ErrEffectNotAllowed},
		{"unsigned", edit(sf, func(f *receipts.SignedFrame) { f.Signature, f.KeyID = nil, "" }), receipts.ErrMalformed},
		{"seq 0", receipts.SignFrame(a, func() receipts.Frame { f := sampleFrame(); f.Seq = 0; return f }()), receipts.ErrMalformed},
		{"bad payload", receipts.SignFrame(a, func() receipts.Frame { f := sampleFrame(); f.Payload = []byte{0x18, 1}; return f }()), receipts.ErrMalformed},
	}
	for _, c := range cases {
		if _, err := k.VerifyFrame(c.sf); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func edit(sf receipts.SignedFrame, fn func(*receipts.SignedFrame)) receipts.SignedFrame {
	sf.Signature = bytes.Clone(sf.Signature)
	fn(&sf)
	return sf
}

func TestFrameJSON(t *testing.T) {
	a := testKey("a")
	withBytes := sampleFrame()
	withBytes.Payload = schemas.MustMarshal([]any{[]byte{1, 2}})
	for name, f := range map[string]receipts.Frame{"json payload": sampleFrame(), "bytes payload": withBytes} {
		sf := receipts.SignFrame(a, f)
		js, err := receipts.FrameToJSON(sf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := receipts.FrameFromJSON(js)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, js, err)
		}
		if !bytes.Equal(got.Body(), sf.Body()) || got.KeyID != sf.KeyID || !bytes.Equal(got.Signature, sf.Signature) {
			t.Fatalf("%s: round trip differs: %s", name, js)
		}
	}
	good, _ := receipts.FrameToJSON(receipts.SignFrame(a, sampleFrame()))
	if !bytes.Contains(good, []byte(`"payload":{"attempt":2}`)) || !bytes.Contains(good, []byte(`"seq":3`)) {
		t.Fatalf("frame json: %s", good)
	}
	ed := func(old, new string) string {
		s := strings.Replace(string(good), old, new, 1)
		if s == string(good) {
			t.Fatalf("edit %q not applied", old)
		}
		return s
	}
	for name, in := range map[string]string{
		"unknown field":  ed(`"seq":3`, `"seq":3,"x":1`),
		"missing seq":    ed(`,"seq":3`, ``),
		"seq 0":          ed(`"seq":3`, `"seq":0`),
		"seq negative":   ed(`"seq":3`, `"seq":-3`),
		"missing effect": ed(`"effect":"com.test/timer.set@1",`, ``),
		"both payloads":  ed(`"payload":{`, `"payload_cbor":"AQ==","payload":{`),
		"no signature":   ed(`,"signature":"`, `,"x":"`),
		"old form":       `{"intent":"` + schemas.HashBytes([]byte("i")).String() + `","seq":1,"executor":"p","payload":{}}`,
	} {
		if _, err := receipts.FrameFromJSON([]byte(in)); !errors.Is(err, receipts.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzFrameFromJSON: whatever FrameFromJSON accepts passes Check and
// survives FrameToJSON unchanged.
func FuzzFrameFromJSON(f *testing.F) {
	a := testKey("a")
	for _, fr := range []receipts.Frame{sampleFrame(), {Intent: schemas.HashBytes(nil), Effect: "e", Seq: 1 << 62, Executor: "x", Payload: schemas.MustMarshal([]any{[]byte{1}, -5, 2.5})}} {
		js, _ := receipts.FrameToJSON(receipts.SignFrame(a, fr))
		f.Add(js)
	}
	f.Add([]byte(`{"seq":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := receipts.FrameFromJSON(data)
		if err != nil {
			if !errors.Is(err, receipts.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if err := sf.Check(); err != nil {
			t.Fatalf("accepted a frame Check refuses: %v", err)
		}
		js, err := receipts.FrameToJSON(sf)
		if err != nil {
			t.Fatal(err)
		}
		back, err := receipts.FrameFromJSON(js)
		if err != nil || !bytes.Equal(back.Body(), sf.Body()) || back.KeyID != sf.KeyID || !bytes.Equal(back.Signature, sf.Signature) {
			t.Fatalf("round trip of %s: %v", js, err)
		}
	})
}
