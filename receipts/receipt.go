package receipts

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/internal/canon"

	"github.com/aos-kernel/aos/schemas"
)

// Domain prefixes every signed receipt that names its world (the layout of
// version 2). It names what is signed and the version of its layout, and
// ends in NUL so no other aos message that starts with a different label
// can be confused with a receipt.
const Domain = "aos/receipt/v2\x00"

// DomainV1 prefixed receipts of the first layout, which named no world. A
// receipt whose World is empty is signed and verified under it, so that
// receipts journaled before worlds had identities still verify (`aosd
// journal verify`); the kernel refuses such a receipt when it is posted
// (it could settle another world's intent). A v1 signature never verifies
// as a v2 one, or the reverse: the labels differ.
const DomainV1 = "aos/receipt/v1\x00"

// KeyIDPrefix starts every key id.
const KeyIDPrefix = "ed25519:"

// Status is how the executor says the effect ended.
type Status string

// The three statuses a receipt may carry (sys/EffectReceiptEnvelope@1).
const (
	StatusOK      Status = "ok"
	StatusError   Status = "error"
	StatusTimeout Status = "timeout"
)

// Valid reports whether s is one of the three statuses.
func (s Status) Valid() bool {
	return s == StatusOK || s == StatusError || s == StatusTimeout
}

// Errors callers branch on. Every error this package returns for a receipt
// wraps one of them and names the intent hash (and key id where it matters).
var (
	ErrMalformed     = errors.New("receipts: malformed receipt")
	ErrUnknownSigner = errors.New("receipts: unknown signer")
	ErrBadSignature  = errors.New("receipts: bad signature")
)

// MaxNameLen bounds effect names, executor names and issuer refs.
const MaxNameLen = 256

// Receipt is the signed body: what an executor asserts about one intent of
// one world. Its canonical CBOR encoding is a map with these text keys
// (sorted by the core deterministic rules: shorter keys first, then
// bytewise):
//
//	"world"       text   the world's identity (kernel.World.Identity);
//	                     omitted when empty, the layout of DomainV1
//	"effect"      text   effect name, e.g. "sys/timer.set@1"
//	"status"      text   "ok" | "error" | "timeout"
//	"attempt"     uint   executor's attempt number (informational)
//	"payload"     bytes  canonical CBOR of the receipt value
//	"executor"    text   the executor's name; must match its keyring entry
//	"issuer_ref"  text   omitted when empty
//	"intent_hash" bytes  32-byte SHA-256 intent hash
//
// Executors in other languages must reproduce exactly these bytes.
type Receipt struct {
	// World is the identity of the world whose intent this settles. A
	// receipt signed for one world is refused by every other, even where
	// the intent hashes coincide (worlds made before identities existed).
	World     string       `cbor:"world,omitempty" json:"world,omitempty"`
	Intent    schemas.Hash `cbor:"intent_hash" json:"intent_hash"`
	Effect    string       `cbor:"effect" json:"effect"`
	Executor  string       `cbor:"executor" json:"executor"`
	Status    Status       `cbor:"status" json:"status"`
	Payload   []byte       `cbor:"payload" json:"payload"`
	Attempt   uint64       `cbor:"attempt" json:"attempt"`
	IssuerRef string       `cbor:"issuer_ref,omitempty" json:"issuer_ref,omitempty"`
}

// SignedReceipt is a Receipt with the ed25519 signature over
// SigningMessage(Receipt) and the id of the key that made it. Its CBOR form
// (schemas.Marshal) is the body's map plus "key_id" and "signature".
type SignedReceipt struct {
	Receipt
	KeyID     string `cbor:"key_id" json:"key_id"`
	Signature []byte `cbor:"signature" json:"signature"`
}

// Body returns the canonical CBOR encoding of r.
func (r *Receipt) Body() []byte { return r.appendBody(make([]byte, 0, r.bodySize())) }

// appendBody appends r's canonical CBOR encoding, written by hand because
// every receipt is encoded twice (signed, then verified) on the hot path
// and reflection cost a third of a signature. TestBodyMatchesLibrary and
// FuzzBody hold it to schemas.Marshal's bytes.
func (r *Receipt) appendBody(b []byte) []byte { return appendReceipt(b, r, nil) }

// AppendSignedReceipt appends schemas.Marshal(sr): the body's fields with
// key_id and signature in one map. The kernel journals every admitted
// receipt this way (records.EncodeReceipt), so it is the body's encoder
// too: one place knows the receipt's keys.
func AppendSignedReceipt(b []byte, sr *SignedReceipt) []byte {
	return appendReceipt(b, &sr.Receipt, sr)
}

// SignedReceiptSize bounds the length of AppendSignedReceipt's output.
func SignedReceiptSize(sr *SignedReceipt) int {
	return sr.bodySize() + 20 + 9 + len(sr.KeyID) + 9 + len(sr.Signature)
}

// appendReceipt writes r's fields, and sr's key_id and signature when sr is
// not nil, as one canonical map. Key order (shorter keys first, then
// bytewise): world?, effect, key_id?, status, attempt, payload, executor,
// signature?, issuer_ref?, intent_hash.
func appendReceipt(b []byte, r *Receipt, sr *SignedReceipt) []byte {
	n := uint64(6)
	if sr != nil {
		n += 2
	}
	if r.IssuerRef != "" {
		n++
	}
	if r.World != "" {
		n++
	}
	b = canon.AppendMap(b, n)
	if r.World != "" {
		b = canon.AppendText(canon.AppendText(b, "world"), r.World)
	}
	b = canon.AppendText(canon.AppendText(b, "effect"), r.Effect)
	if sr != nil {
		b = canon.AppendText(canon.AppendText(b, "key_id"), sr.KeyID)
	}
	b = canon.AppendText(canon.AppendText(b, "status"), string(r.Status))
	b = canon.AppendUint(canon.AppendText(b, "attempt"), r.Attempt)
	b = canon.AppendBytesOrNull(canon.AppendText(b, "payload"), r.Payload) // nil is null (and Verify refuses it)
	b = canon.AppendText(canon.AppendText(b, "executor"), r.Executor)
	if sr != nil {
		b = canon.AppendBytesOrNull(canon.AppendText(b, "signature"), sr.Signature)
	}
	if r.IssuerRef != "" {
		b = canon.AppendText(canon.AppendText(b, "issuer_ref"), r.IssuerRef)
	}
	return canon.AppendBytesOrNull(canon.AppendText(b, "intent_hash"), r.Intent[:])
}

// bodySize bounds the length of r's body: each item's head is at most 9
// bytes, and the fixed keys take under 80.
func (r *Receipt) bodySize() int {
	return 86 + 9*9 + len(r.World) + len(r.Effect) + len(r.Status) + len(r.Payload) + len(r.Executor) + len(r.IssuerRef) + len(r.Intent)
}

// SigningMessage is what a signature covers: Domain followed by the
// canonical CBOR body, or DomainV1 for a receipt that names no world.
func SigningMessage(r *Receipt) []byte {
	d := r.domain()
	return r.appendBody(append(make([]byte, 0, len(d)+r.bodySize()), d...))
}

// domain is the label r is signed under: its layout's.
func (r *Receipt) domain() string {
	if r.World == "" {
		return DomainV1
	}
	return Domain
}

// Sign signs r with priv. It does not check r; the verifier will.
func Sign(priv ed25519.PrivateKey, r Receipt) SignedReceipt {
	pub := priv.Public().(ed25519.PublicKey)
	return SignedReceipt{
		Receipt:   r,
		KeyID:     KeyID(pub),
		Signature: signEd25519(priv, SigningMessage(&r)),
	}
}

// KeyID names a public key: "ed25519:" followed by the lower-case hex of the
// first 16 bytes of SHA-256(pub) (32 hex digits, 128 bits: collisions need
// about 2^64 keys, and a forged collision would still have to pass the
// signature check under the trusted key).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return KeyIDPrefix + hex.EncodeToString(sum[:16])
}

// checkName refuses empty, oversize or non-printable names.
func checkName(what, s string, required bool) error {
	if s == "" {
		if required {
			return fmt.Errorf("%s is empty", what)
		}
		return nil
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%s is longer than %d bytes", what, MaxNameLen)
	}
	for _, c := range s {
		if c < 0x21 || c == 0x7f || c == 0xfffd {
			return fmt.Errorf("%s %q holds a space, control or invalid character", what, s)
		}
	}
	return nil
}

// Check reports structural problems that make r unacceptable whatever its
// signature: an unknown status, a zero intent hash, an empty or odd effect
// or executor name, an odd world, a payload that is not one canonical CBOR
// item. An empty world is not a problem here (it is the v1 layout, which
// journaled receipts have); the kernel refuses it when posted. Errors
// wrap ErrMalformed. It does not validate the payload against a schema: the
// kernel does that with the effect's receipt schema.
func (r *Receipt) Check() error {
	if err := r.checkFields(); err != nil {
		return err
	}
	return r.checkPayload()
}

func (r *Receipt) checkFields() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: intent %s: %s", ErrMalformed, r.Intent, fmt.Sprintf(format, a...))
	}
	if r.Intent.IsZero() {
		return fmt.Errorf("%w: intent hash is missing (zero)", ErrMalformed)
	}
	if !r.Status.Valid() {
		return bad("status %q is not one of ok, error, timeout", string(r.Status))
	}
	if err := checkName("effect", r.Effect, true); err != nil {
		return bad("%v", err)
	}
	if err := checkName("executor", r.Executor, true); err != nil {
		return bad("%v", err)
	}
	if err := checkName("issuer_ref", r.IssuerRef, false); err != nil {
		return bad("%v", err)
	}
	if err := checkName("world", r.World, false); err != nil {
		return bad("%v", err)
	}
	return nil
}

func (r *Receipt) checkPayload() error {
	if err := schemas.CheckCanonical(r.Payload); err != nil {
		return fmt.Errorf("%w: intent %s: payload is not one canonical CBOR item: %v", ErrMalformed, r.Intent, err)
	}
	return nil
}

// checkEnvelope checks the signature fields' shape (not their validity).
func (sr *SignedReceipt) checkEnvelope() error {
	if len(sr.Signature) != ed25519.SignatureSize {
		return fmt.Errorf("%w: intent %s: signature is %d bytes, want %d", ErrMalformed, sr.Intent, len(sr.Signature), ed25519.SignatureSize)
	}
	if _, err := parseKeyID(sr.KeyID); err != nil {
		return fmt.Errorf("%w: intent %s: %v", ErrMalformed, sr.Intent, err)
	}
	return nil
}

func parseKeyID(id string) ([16]byte, error) {
	var b [16]byte
	if len(id) != len(KeyIDPrefix)+32 || id[:len(KeyIDPrefix)] != KeyIDPrefix {
		return b, fmt.Errorf("key id %q is not %s<32 hex digits>", id, KeyIDPrefix)
	}
	if _, err := hex.Decode(b[:], []byte(id[len(KeyIDPrefix):])); err != nil || hex.EncodeToString(b[:]) != id[len(KeyIDPrefix):] {
		return b, fmt.Errorf("key id %q is not %s<32 lower-case hex digits>", id, KeyIDPrefix)
	}
	return b, nil
}

// Marshal returns the canonical CBOR form of sr, for the journal.
func (sr *SignedReceipt) Marshal() []byte { return schemas.MustMarshal(sr) }

// Unmarshal decodes the canonical CBOR form of a signed receipt strictly
// (unknown keys, non-canonical bytes and wrong types are errors) and checks
// its structure (Check plus the signature's shape). It does not verify the
// signature.
func Unmarshal(data []byte) (SignedReceipt, error) {
	var sr SignedReceipt
	if err := schemas.Unmarshal(data, &sr); err != nil {
		return SignedReceipt{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// Unknown keys are dropped by the struct decoder; re-encoding and
	// comparing refuses them, and any other form that would not round-trip.
	if re := sr.Marshal(); string(re) != string(data) {
		return SignedReceipt{}, fmt.Errorf("%w: intent %s: unknown or misplaced fields", ErrMalformed, sr.Intent)
	}
	if err := sr.Check(); err != nil {
		return SignedReceipt{}, err
	}
	if err := sr.checkEnvelope(); err != nil {
		return SignedReceipt{}, err
	}
	return sr, nil
}
