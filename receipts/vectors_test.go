package receipts_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// The test vectors of docs/executor-protocol.md: what an executor in any
// language must reproduce byte for byte. TestVectorsFile regenerates them
// from this package's code and fails when the checked-in file differs, so
// they cannot rot; TestVectorsVerify checks the file as another language
// would, with the standard library's ed25519. Rewrite the file (only when
// the protocol changed on purpose, which breaks every executor) with
//
//	go test ./receipts -run TestVectorsFile -write-vectors
var writeVectors = flag.Bool("write-vectors", false, "rewrite "+vectorsFile)

const vectorsFile = "../docs/receipt-vectors.json"

// vectorSeed is the secret key of RFC 8032's first Ed25519 test vector, so
// an implementation can check its key handling against the RFC as well.
const vectorSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"

type vectorFile struct {
	About         string          `json:"about"`
	Version       int             `json:"version"`
	ReceiptDomain string          `json:"receipt_domain_hex"`
	FrameDomain   string          `json:"frame_domain_hex"`
	Key           vectorKey       `json:"key"`
	Payloads      []payloadVector `json:"payloads"`
	Refused       []refusedVector `json:"refused_payloads"`
	Receipts      []receiptVector `json:"receipts"`
	Frames        []frameVector   `json:"frames"`
}

type vectorKey struct {
	Seed       string `json:"seed_hex"`
	Public     string `json:"public_key_hex"`
	KeyID      string `json:"key_id"`
	PublicPEM  string `json:"public_key_pem"`
	PrivatePEM string `json:"private_key_pem"`
}

// payloadVector: a payload as JSON text (the literal spelling matters: 1.0
// is the integer 1) and the canonical CBOR the daemon makes of it.
type payloadVector struct {
	Name string `json:"name"`
	JSON string `json:"json"`
	CBOR string `json:"cbor_hex"`
}

// refusedVector: payload JSON the daemon refuses (json_hex when the input
// is not UTF-8 text).
type refusedVector struct {
	Name    string `json:"name"`
	JSON    string `json:"json,omitempty"`
	JSONHex string `json:"json_hex,omitempty"`
}

type receiptFields struct {
	World      string      `json:"world"`
	IntentHash string      `json:"intent_hash"`
	Effect     string      `json:"effect"`
	Executor   string      `json:"executor"`
	Status     string      `json:"status"`
	Attempt    json.Number `json:"attempt"`
	IssuerRef  string      `json:"issuer_ref,omitempty"`
	Payload    string      `json:"payload_cbor_hex"`
}

type receiptVector struct {
	Name      string          `json:"name"`
	Fields    receiptFields   `json:"fields"`
	Body      string          `json:"body_hex"`
	Signature string          `json:"signature_hex"`
	HTTP      json.RawMessage `json:"http"`
}

type frameFields struct {
	World      string      `json:"world"`
	IntentHash string      `json:"intent_hash"`
	Effect     string      `json:"effect"`
	Seq        json.Number `json:"seq"`
	Executor   string      `json:"executor"`
	Payload    string      `json:"payload_cbor_hex"`
}

type frameVector struct {
	Name      string          `json:"name"`
	Fields    frameFields     `json:"fields"`
	Body      string          `json:"body_hex"`
	Signature string          `json:"signature_hex"`
	HTTP      json.RawMessage `json:"http"`
}

// vectorPayloads are the payload conversions: integral literals, integer
// head sizes and the integer range, floats in their shortest form
// (half-precision subnormals included), strings and escapes, key order,
// nesting and length heads.
var vectorPayloads = []struct{ name, json string }{
	{"integral literals are integers", `[0, 1, 1.0, 1e0, 10e-1, 1.5e1, 1E+2, -0, -0.0, 0e-400, 100000000000000000000000e-4]`},
	{"integer heads and the integer range", `[23, 24, 255, 256, 65535, 65536, 4294967295, 4294967296, 9007199254740993, 18446744073709551615, -1, -24, -25, -256, -257, -9223372036854775808, -9223372036854775809, -18446744073709551616]`},
	{"integral values beyond the integer range are floats", `[18446744073709551616, 1e20, 3.4028234663852886e38, 1e300]`},
	{"decimals that round to integers are integers", `[12345678901234567890.5, -18446744073709551617]`},
	{"floats in their shortest exact form", `[0.5, 1.5, -2.5, 65504.5, 0.1, 1.1, 123456789.125, 6.103515625e-5, 5.960464477539063e-8, 1.7881393432617188e-7, 1.401298464324817e-45, 1e-320]`},
	{"strings and escapes", `["", "a", "é", "\u00e9", "😀", "\ud83d\ude00", "\ufffd", "a\nb\t\"\\\/", "Grüße, 世界"]`},
	{"string length heads", `["` + strings.Repeat("x", 23) + `", "` + strings.Repeat("y", 24) + `", "` + strings.Repeat("z", 256) + `"]`},
	{"map keys sorted by their encoded bytes", `{"b": 1, "a": 2, "aa": 3, "": 4, "é": 5, "z": 6, "A": 7, "ab": 8, "~": 9}`},
	{"nested maps and arrays", `{"order": {"total": {"currency": "EUR", "cents": 1250}, "lines": [{"sku": "x-1", "qty": 2}, {"qty": 1, "sku": "y"}]}, "tags": [], "meta": {}, "ok": true, "no": false, "none": null}`},
	{"array and map length heads", `{"list": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24], "map": {"k01": 1, "k02": 2, "k03": 3, "k04": 4, "k05": 5, "k06": 6, "k07": 7, "k08": 8, "k09": 9, "k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16, "k17": 17, "k18": 18, "k19": 19, "k20": 20, "k21": 21, "k22": 22, "k23": 23, "k24": 24}}`},
	{"a scalar payload", `"just a string"`},
}

// vectorRefused are payloads no executor should send as "payload" JSON:
// the daemon refuses each with 400 invalid_input.
var vectorRefused = []refusedVector{
	{Name: "duplicate key, even with the same value", JSON: `{"a": 1, "a": 1}`},
	{Name: "nesting deeper than 64", JSON: strings.Repeat("[", 65) + strings.Repeat("]", 65)},
	{Name: "magnitude beyond float64", JSON: `1e400`},
	{Name: "non-zero magnitude below 1e-320", JSON: `1e-321`},
	{Name: "exponent written beyond 1000", JSON: `0e1001`},
	{Name: "number literal over 400 characters", JSON: "1" + strings.Repeat("0", 400)},
	{Name: "NaN", JSON: `NaN`},
	{Name: "Infinity", JSON: `[Infinity]`},
	{Name: "leading zero", JSON: `01`},
	{Name: "fraction without digits", JSON: `1.`},
	{Name: "trailing comma", JSON: `[1,]`},
	{Name: "content after the value", JSON: `{} {}`},
	{Name: "raw control character in a string", JSON: "\"a\tb\""},
	{Name: "unknown escape", JSON: `"\x"`},
	{Name: "single quotes", JSON: `'a'`},
	{Name: "empty input", JSON: ``},
	{Name: "invalid UTF-8", JSONHex: "22ff22"},
	{Name: "lone surrogate escape", JSON: `"\ud800"`},
	{Name: "surrogate escape not followed by its pair", JSON: `["\ud83d\u0041"]`},
}

func vectorIntent(name string) schemas.Hash {
	return schemas.HashBytes([]byte("aos test vector: " + name))
}

// vectorWorld is the world the vectors sign for, in the form a world's
// identity takes (kernel.World.Identity); vectorOtherWorld is a second one,
// so a vector shows the world is in what is signed.
const (
	vectorWorld      = "world:5f0c2a9b8e7d6c5b4a39281706f5e4d3"
	vectorOtherWorld = "world:00112233445566778899aabbccddeeff"
)

func mustPayload(t *testing.T, js string) []byte {
	t.Helper()
	p, err := receipts.PayloadFromJSON([]byte(js))
	if err != nil {
		t.Fatalf("payload %s: %v", js, err)
	}
	return p
}

// vectorReceipts: the statuses, optional fields present and absent,
// unicode, the largest integers, nested payloads, a payload JSON cannot
// carry (byte strings), and the longest names.
func vectorReceipts(t *testing.T) []struct {
	name string
	r    receipts.Receipt
} {
	const charge = "com.example/payment.charge@1"
	long := func(prefix string) string { return prefix + strings.Repeat("n", receipts.MaxNameLen-len(prefix)) }
	return []struct {
		name string
		r    receipts.Receipt
	}{
		{"ok: an order's charge succeeded", receipts.Receipt{World: vectorWorld, Effect: charge, Executor: "payments", Status: receipts.StatusOK, Attempt: 1,
			Payload: mustPayload(t, `{"charge_id": "ch_4f9a01b2c3d4", "status": "succeeded"}`)}},
		{"ok with issuer_ref: declined on the second attempt", receipts.Receipt{World: vectorWorld, Effect: charge, Executor: "payments", Status: receipts.StatusOK, Attempt: 2,
			IssuerRef: "order-o-2", Payload: mustPayload(t, `{"charge_id": "ch_000000000002", "status": "declined"}`)}},
		{"the same receipt for another world", receipts.Receipt{World: vectorOtherWorld, Intent: vectorIntent("ok: an order's charge succeeded"), Effect: charge, Executor: "payments", Status: receipts.StatusOK, Attempt: 1,
			Payload: mustPayload(t, `{"charge_id": "ch_4f9a01b2c3d4", "status": "succeeded"}`)}},
		{"error after five attempts", receipts.Receipt{World: vectorWorld, Effect: charge, Executor: "payments", Status: receipts.StatusError, Attempt: 5,
			Payload: mustPayload(t, `{"error": "payment provider unavailable", "attempts": 5}`)}},
		{"timeout, attempt 0, null payload", receipts.Receipt{World: vectorWorld, Effect: "com.example/ship.label@1", Executor: "shipping", Status: receipts.StatusTimeout,
			Payload: mustPayload(t, `null`)}},
		{"largest integers", receipts.Receipt{World: vectorWorld, Effect: "com.example/clock.read@1", Executor: "clock", Status: receipts.StatusOK, Attempt: 1<<64 - 1,
			Payload: mustPayload(t, `{"now_ns": 1767225600000000000, "max": 18446744073709551615, "min": -18446744073709551616, "pi": 3.141592653589793}`)}},
		{"unicode names, issuer_ref and payload", receipts.Receipt{World: vectorWorld, Effect: "com.example/zahlung.ausführen@1", Executor: "zahlungen-ü", Status: receipts.StatusOK, Attempt: 1,
			IssuerRef: "ref-日本-😀", Payload: mustPayload(t, `{"grüße": "世界 😀", "z": "ascii sorts first", "é": "\u00e9"}`)}},
		{"nested payload maps", receipts.Receipt{World: vectorWorld, Effect: "com.example/quote.get@1", Executor: "quotes", Status: receipts.StatusOK, Attempt: 3,
			Payload: mustPayload(t, `{"quote": {"lines": [{"sku": "x-1", "qty": 2, "price": {"cents": 499, "currency": "EUR"}}], "valid": true}, "id": "q-7", "expires": null}`)}},
		{"byte strings: only payload_cbor carries them", receipts.Receipt{World: vectorWorld, Effect: "com.example/blob.read@1", Executor: "blobs", Status: receipts.StatusOK, Attempt: 1,
			Payload: schemas.MustMarshal(map[string]any{"bytes": []byte{0, 1, 2, 0xfe, 0xff}, "size": uint64(5)})}},
		{"longest names", receipts.Receipt{World: vectorWorld, Effect: long("com.example/long@1."), Executor: long("executor-"), Status: receipts.StatusOK, Attempt: 24,
			IssuerRef: long("ref-"), Payload: mustPayload(t, `{}`)}},
	}
}

func vectorFrames(t *testing.T) []struct {
	name string
	f    receipts.Frame
} {
	return []struct {
		name string
		f    receipts.Frame
	}{
		{"a failed attempt that will be retried", receipts.Frame{World: vectorWorld, Effect: "com.example/payment.charge@1", Executor: "payments", Seq: 1,
			Payload: mustPayload(t, `{"attempt": 1, "error": "payment provider unavailable", "retry_in_ms": 200}`)}},
		{"a large seq and a float", receipts.Frame{World: vectorWorld, Effect: "com.example/export.run@1", Executor: "exporter", Seq: 1 << 32,
			Payload: mustPayload(t, `{"pct": 50.5, "stage": "écriture"}`)}},
	}
}

func vectorKeyPair(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	seed, err := hex.DecodeString(vectorSeed)
	if err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// buildVectors computes every vector with this package's code.
func buildVectors(t *testing.T) vectorFile {
	priv := vectorKeyPair(t)
	pubKey := priv.Public().(ed25519.PublicKey)
	pubPEM, err := receipts.EncodePublicKey(pubKey)
	if err != nil {
		t.Fatal(err)
	}
	privPEM, err := receipts.EncodePrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	vf := vectorFile{
		About: "Test vectors for executors of aos, in any language: payload JSON -> canonical CBOR; receipt and frame fields -> " +
			"canonical CBOR body -> ed25519 signature over domain || body, with the key below (RFC 8032's first test key). " +
			"Version 2: every body names the world it is for. docs/executor-protocol.md explains every byte. Generated by receipts/vectors_test.go (go test ./receipts -run TestVectorsFile -write-vectors).",
		Version:       2,
		ReceiptDomain: hex.EncodeToString([]byte(receipts.Domain)),
		FrameDomain:   hex.EncodeToString([]byte(receipts.FrameDomain)),
		Key: vectorKey{Seed: vectorSeed, Public: hex.EncodeToString(pubKey), KeyID: receipts.KeyID(pubKey),
			PublicPEM: string(pubPEM), PrivatePEM: string(privPEM)},
	}
	for _, p := range vectorPayloads {
		vf.Payloads = append(vf.Payloads, payloadVector{Name: p.name, JSON: p.json, CBOR: hex.EncodeToString(mustPayload(t, p.json))})
	}
	for _, v := range vectorRefused {
		refused(t, v)
		vf.Refused = append(vf.Refused, v)
	}
	for _, v := range vectorReceipts(t) {
		r := v.r
		if r.Intent.IsZero() {
			r.Intent = vectorIntent(v.name)
		}
		if err := r.Check(); err != nil {
			t.Fatalf("vector %q: %v", v.name, err)
		}
		sr := receipts.Sign(priv, r)
		js, err := receipts.ToJSON(sr)
		if err != nil {
			t.Fatal(err)
		}
		vf.Receipts = append(vf.Receipts, receiptVector{Name: v.name,
			Fields: receiptFields{World: r.World, IntentHash: r.Intent.String(), Effect: r.Effect, Executor: r.Executor, Status: string(r.Status),
				Attempt: json.Number(strconv.FormatUint(r.Attempt, 10)), IssuerRef: r.IssuerRef, Payload: hex.EncodeToString(r.Payload)},
			Body: hex.EncodeToString(r.Body()), Signature: hex.EncodeToString(sr.Signature), HTTP: js})
	}
	for _, v := range vectorFrames(t) {
		f := v.f
		f.Intent = vectorIntent(v.name)
		if err := f.Check(); err != nil {
			t.Fatalf("vector %q: %v", v.name, err)
		}
		sf := receipts.SignFrame(priv, f)
		js, err := receipts.FrameToJSON(sf)
		if err != nil {
			t.Fatal(err)
		}
		vf.Frames = append(vf.Frames, frameVector{Name: v.name,
			Fields: frameFields{World: f.World, IntentHash: f.Intent.String(), Effect: f.Effect, Seq: json.Number(strconv.FormatUint(f.Seq, 10)), Executor: f.Executor,
				Payload: hex.EncodeToString(f.Payload)},
			Body: hex.EncodeToString(f.Body()), Signature: hex.EncodeToString(sf.Signature), HTTP: js})
	}
	return vf
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func encodeVectors(t *testing.T, vf vectorFile) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVectorsFile: docs/receipt-vectors.json is exactly what this package
// computes, so the published vectors are the protocol the daemon speaks.
func TestVectorsFile(t *testing.T) {
	want := encodeVectors(t, buildVectors(t))
	if *writeVectors {
		if err := os.WriteFile(vectorsFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("%v (write it with: go test ./receipts -run TestVectorsFile -write-vectors)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the code computes; if the protocol changed on purpose (every executor breaks), "+
			"rewrite it with: go test ./receipts -run TestVectorsFile -write-vectors", vectorsFile)
	}
}

// TestVectorsVerify reads the vectors file as an implementer in another
// language would and checks each claim it makes with independent means:
// the standard library's ed25519 for the key and signatures, PayloadFromJSON
// for payloads, Body for bodies, and the daemon's own FromJSON and Keyring
// for the HTTP forms, both as Go writes them and with payload_cbor.
func TestVectorsVerify(t *testing.T) {
	raw, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&vf); err != nil {
		t.Fatal(err)
	}
	seed := unhex(t, vf.Key.Seed)
	priv := ed25519.NewKeyFromSeed(seed)
	pubKey := priv.Public().(ed25519.PublicKey)
	// RFC 8032, section 7.1, TEST 1.
	if vf.Key.Public != "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a" || hex.EncodeToString(pubKey) != vf.Key.Public {
		t.Fatalf("public key %s, want RFC 8032's d75a98...511a", vf.Key.Public)
	}
	if vf.Key.KeyID != receipts.KeyID(pubKey) {
		t.Fatalf("key id %s, want %s", vf.Key.KeyID, receipts.KeyID(pubKey))
	}
	if p, err := receipts.DecodePublicKey([]byte(vf.Key.PublicPEM)); err != nil || !p.Equal(pubKey) {
		t.Fatalf("public_key_pem: %v", err)
	}
	if k, err := receipts.DecodePrivateKey([]byte(vf.Key.PrivatePEM)); err != nil || !k.Equal(priv) {
		t.Fatalf("private_key_pem: %v", err)
	}
	if vf.Version != 2 || string(unhex(t, vf.ReceiptDomain)) != "aos/receipt/v2\x00" || string(unhex(t, vf.FrameDomain)) != "aos/frame/v2\x00" {
		t.Fatalf("domains %s %s", vf.ReceiptDomain, vf.FrameDomain)
	}
	if len(vf.Payloads) == 0 || len(vf.Receipts) == 0 || len(vf.Frames) == 0 {
		t.Fatal("the vectors file is missing a section")
	}
	for _, p := range vf.Payloads {
		if got := mustPayload(t, p.JSON); hex.EncodeToString(got) != p.CBOR {
			t.Errorf("payload %q: %x, file says %s", p.Name, got, p.CBOR)
		}
	}
	for _, v := range vf.Refused {
		refused(t, v)
	}
	kr := receipts.NewKeyring()
	if err := kr.Add("vectors", pubKey, []string{"com.example/*"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range vf.Receipts {
		attempt, err := parseUint(v.Fields.Attempt)
		if err != nil {
			t.Fatalf("receipt %q: attempt: %v", v.Name, err)
		}
		h, err := schemas.ParseHash(v.Fields.IntentHash)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.Fields.World, "world:") {
			t.Errorf("receipt %q: world %q", v.Name, v.Fields.World)
		}
		r := receipts.Receipt{World: v.Fields.World, Intent: h, Effect: v.Fields.Effect, Executor: v.Fields.Executor, Status: receipts.Status(v.Fields.Status),
			Attempt: attempt, IssuerRef: v.Fields.IssuerRef, Payload: unhex(t, v.Fields.Payload)}
		body := unhex(t, v.Body)
		if !bytes.Equal(r.Body(), body) {
			t.Errorf("receipt %q: body %x, file says %x", v.Name, r.Body(), body)
		}
		sig := unhex(t, v.Signature)
		if !ed25519.Verify(pubKey, append(unhex(t, vf.ReceiptDomain), body...), sig) {
			t.Errorf("receipt %q: the signature does not verify over domain || body", v.Name)
		}
		if !bytes.Equal(ed25519.Sign(priv, append([]byte(receipts.Domain), body...)), sig) {
			t.Errorf("receipt %q: signing again gives another signature (ed25519 is deterministic)", v.Name)
		}
		// The world is in what is signed: the same receipt for another
		// world has another body, which the signature does not cover.
		other := r
		other.World += "0"
		if ed25519.Verify(pubKey, append(unhex(t, vf.ReceiptDomain), other.Body()...), sig) {
			t.Errorf("receipt %q: the signature verifies for world %q too", v.Name, other.World)
		}
		withCBOR := wireWithCBOR(t, v.HTTP, r.Payload)
		for form, js := range map[string][]byte{"http": v.HTTP, "http with payload_cbor": withCBOR} {
			sr, err := receipts.FromJSON(js)
			if err != nil {
				t.Errorf("receipt %q: %s: %v", v.Name, form, err)
				continue
			}
			if !bytes.Equal(sr.Body(), body) || !bytes.Equal(sr.Signature, sig) || sr.KeyID != vf.Key.KeyID {
				t.Errorf("receipt %q: %s is another receipt", v.Name, form)
			}
			// kr trusts the key under another name, so a good signature
			// gets as far as the executor check.
			if _, err := kr.Verify(sr); !errors.Is(err, receipts.ErrExecutorMismatch) {
				t.Errorf("receipt %q: %s: verify: %v, want a good signature refused only for its executor name", v.Name, form, err)
			}
		}
		trusted := receipts.NewKeyring()
		if err := trusted.Add(v.Fields.Executor, pubKey, []string{v.Fields.Effect}); err != nil {
			t.Fatal(err)
		}
		sr, _ := receipts.FromJSON(withCBOR)
		if name, err := trusted.Verify(sr); err != nil || name != v.Fields.Executor {
			t.Errorf("receipt %q: verify under its executor: %q %v", v.Name, name, err)
		}
	}
	for _, v := range vf.Frames {
		seq, err := parseUint(v.Fields.Seq)
		if err != nil {
			t.Fatal(err)
		}
		h, err := schemas.ParseHash(v.Fields.IntentHash)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.Fields.World, "world:") {
			t.Errorf("frame %q: world %q", v.Name, v.Fields.World)
		}
		f := receipts.Frame{World: v.Fields.World, Intent: h, Effect: v.Fields.Effect, Seq: seq, Executor: v.Fields.Executor, Payload: unhex(t, v.Fields.Payload)}
		body := unhex(t, v.Body)
		if !bytes.Equal(f.Body(), body) {
			t.Errorf("frame %q: body %x, file says %x", v.Name, f.Body(), body)
		}
		sig := unhex(t, v.Signature)
		if !ed25519.Verify(pubKey, append(unhex(t, vf.FrameDomain), body...), sig) {
			t.Errorf("frame %q: the signature does not verify over domain || body", v.Name)
		}
		trusted := receipts.NewKeyring()
		if err := trusted.Add(v.Fields.Executor, pubKey, []string{v.Fields.Effect}); err != nil {
			t.Fatal(err)
		}
		for form, js := range map[string][]byte{"http": v.HTTP, "http with payload_cbor": wireWithCBOR(t, v.HTTP, f.Payload)} {
			sf, err := receipts.FrameFromJSON(js)
			if err != nil {
				t.Errorf("frame %q: %s: %v", v.Name, form, err)
				continue
			}
			if name, err := trusted.VerifyFrame(sf); err != nil || name != v.Fields.Executor || !bytes.Equal(sf.Body(), body) {
				t.Errorf("frame %q: %s: verify: %q %v", v.Name, form, name, err)
			}
		}
	}
}

func refused(t *testing.T, v refusedVector) {
	t.Helper()
	in := []byte(v.JSON)
	if v.JSONHex != "" {
		in = unhex(t, v.JSONHex)
	}
	if p, err := receipts.PayloadFromJSON(in); err == nil {
		t.Errorf("refused payload %q: converted to %x", v.Name, p)
	}
}

// TestProtocolDocQuotesVectors: docs/executor-protocol.md walks through the
// first receipt vector; what it quotes is what the file holds.
func TestProtocolDocQuotesVectors(t *testing.T) {
	doc, err := os.ReadFile("../docs/executor-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	vf := buildVectors(t)
	r := vf.Receipts[0]
	for _, want := range []string{r.Body, r.Signature, r.Fields.IntentHash, r.Fields.Effect, vf.Key.KeyID, vf.ReceiptDomain, vf.FrameDomain,
		vf.Key.Seed[:8], vf.Key.Seed[len(vf.Key.Seed)-4:], vf.Key.Public[:8], vf.Key.Public[len(vf.Key.Public)-4:]} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/executor-protocol.md does not quote %q", want)
		}
	}
}

// wireWithCBOR rewrites an HTTP form to carry the payload as payload_cbor,
// as an executor that sends exactly the bytes it signed does.
func wireWithCBOR(t *testing.T, js json.RawMessage, payload []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "payload")
	m["payload_cbor"] = mustJSON(base64.StdEncoding.EncodeToString(payload))
	return mustJSON(m)
}

func parseUint(n json.Number) (uint64, error) {
	var u uint64
	err := json.Unmarshal([]byte(n), &u)
	return u, err
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}
