package receipts

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/aos-kernel/aos/schemas"
)

// FrameDomain prefixes every signed stream frame that names its world (the
// layout of version 2). It differs from Domain, so a receipt's signature is
// never a frame's and a frame's never a receipt's, whatever their bytes.
const FrameDomain = "aos/frame/v2\x00"

// FrameDomainV1 prefixed frames of the first layout, which named no world;
// a frame whose World is empty is signed and verified under it (see
// DomainV1).
const FrameDomainV1 = "aos/frame/v1\x00"

// Frame is the signed body of a stream frame: non-authoritative progress an
// executor reports on one intent (sys/EffectStreamFrame@1). Its canonical
// CBOR encoding is a map with these text keys (core deterministic order):
//
//	"seq"          uint   the executor's frame number for the intent, from 1
//	"world"        text   the world's identity; omitted when empty (v1)
//	"effect"       text   the intent's effect; the key must be allowed it
//	"payload"      bytes  canonical CBOR of the progress value
//	"executor"     text   the executor's name; must match its keyring entry
//	"intent_hash"  bytes  32-byte SHA-256 intent hash
type Frame struct {
	World    string       `cbor:"world,omitempty"`
	Intent   schemas.Hash `cbor:"intent_hash"`
	Effect   string       `cbor:"effect"`
	Seq      uint64       `cbor:"seq"`
	Executor string       `cbor:"executor"`
	Payload  []byte       `cbor:"payload"`
}

// SignedFrame is a Frame with the ed25519 signature over
// FrameSigningMessage(Frame) and the id of the key that made it.
type SignedFrame struct {
	Frame
	KeyID     string
	Signature []byte
}

// Body returns the canonical CBOR encoding of f.
func (f *Frame) Body() []byte { return schemas.MustMarshal(f) }

// FrameSigningMessage is what a frame's signature covers: FrameDomain
// followed by the canonical CBOR body, or FrameDomainV1 for a frame that
// names no world.
func FrameSigningMessage(f *Frame) []byte {
	if f.World == "" {
		return append([]byte(FrameDomainV1), f.Body()...)
	}
	return append([]byte(FrameDomain), f.Body()...)
}

// SignFrame signs f with priv. It does not check f; the verifier will.
func SignFrame(priv ed25519.PrivateKey, f Frame) SignedFrame {
	pub := priv.Public().(ed25519.PublicKey)
	return SignedFrame{Frame: f, KeyID: KeyID(pub), Signature: signEd25519(priv, FrameSigningMessage(&f))}
}

// Check reports structural problems that make f unacceptable whatever its
// signature: a zero intent hash, seq 0, an empty or odd effect or executor
// name, an odd world, a payload that is not one canonical CBOR item. An
// empty world is the v1 layout, refused by the kernel when posted. Errors
// wrap ErrMalformed.
func (f *Frame) Check() error {
	if err := f.checkFields(); err != nil {
		return err
	}
	return f.checkPayload()
}

func (f *Frame) checkFields() error {
	if f.Intent.IsZero() {
		return fmt.Errorf("%w: frame: intent hash is missing (zero)", ErrMalformed)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: frame for intent %s: %s", ErrMalformed, f.Intent, fmt.Sprintf(format, a...))
	}
	if f.Seq == 0 {
		return bad("seq is 0; frame seqs start at 1")
	}
	if err := checkName("effect", f.Effect, true); err != nil {
		return bad("%v", err)
	}
	if err := checkName("executor", f.Executor, true); err != nil {
		return bad("%v", err)
	}
	if err := checkName("world", f.World, false); err != nil {
		return bad("%v", err)
	}
	return nil
}

func (f *Frame) checkPayload() error {
	if err := schemas.CheckCanonical(f.Payload); err != nil {
		return fmt.Errorf("%w: frame for intent %s: payload is not one canonical CBOR item: %v", ErrMalformed, f.Intent, err)
	}
	return nil
}

func (sf *SignedFrame) checkEnvelope() error {
	if len(sf.Signature) != ed25519.SignatureSize {
		return fmt.Errorf("%w: frame for intent %s: signature is %d bytes, want %d", ErrMalformed, sf.Intent, len(sf.Signature), ed25519.SignatureSize)
	}
	if _, err := parseKeyID(sf.KeyID); err != nil {
		return fmt.Errorf("%w: frame for intent %s: %v", ErrMalformed, sf.Intent, err)
	}
	return nil
}

// VerifyFrame checks sf as Verify checks a receipt and returns the name of
// the executor whose trusted key signed it. In order:
//
//  1. shape: intent, seq, names, signature length, key id form -> ErrMalformed
//  2. the key id is trusted                                  -> ErrUnknownSigner
//  3. the signature over FrameSigningMessage verifies         -> ErrBadSignature
//  4. the frame's executor is the key's executor name         -> ErrExecutorMismatch
//  5. the key is allowed the frame's effect                   -> ErrEffectNotAllowed
//  6. the payload is one canonical CBOR item                 -> ErrMalformed
//
// Like Verify, it does not look at pending intents: the kernel checks that
// the intent is pending and that its effect is the frame's.
func (k *Keyring) VerifyFrame(sf SignedFrame) (executorName string, err error) {
	if err := sf.checkFields(); err != nil {
		return "", err
	}
	if err := sf.checkEnvelope(); err != nil {
		return "", err
	}
	key, err := k.lookup(sf.KeyID, sf.Intent)
	if err != nil {
		return "", err
	}
	if !voi.VerifyExpanded(key.expanded, FrameSigningMessage(&sf.Frame), sf.Signature) {
		return "", fmt.Errorf("%w: frame for intent %s: signature does not verify under key %s (executor %s)", ErrBadSignature, sf.Intent, sf.KeyID, key.Name)
	}
	if sf.Executor != key.Name {
		return "", fmt.Errorf("%w: frame for intent %s: frame says executor %q, key %s belongs to %q", ErrExecutorMismatch, sf.Intent, sf.Executor, sf.KeyID, key.Name)
	}
	if !key.Allows(sf.Effect) {
		return "", key.notAllowed("frame", sf.Intent, sf.Effect)
	}
	if err := sf.checkPayload(); err != nil {
		return "", err
	}
	return key.Name, nil
}

// frameJSON is the HTTP form of a signed frame; fields in key order.
type frameJSON struct {
	Effect      string          `json:"effect"`
	Executor    string          `json:"executor"`
	IntentHash  schemas.Hash    `json:"intent_hash"`
	KeyID       string          `json:"key_id"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadCBOR []byte          `json:"payload_cbor,omitempty"`
	Seq         uint64          `json:"seq"`
	Signature   []byte          `json:"signature"`
	World       string          `json:"world,omitempty"`
}

// FrameToJSON renders sf in the HTTP API's frame form, compact with sorted
// keys:
//
//	{"effect": "...", "executor": "...", "intent_hash": "sha256:<hex>",
//	 "key_id": "ed25519:<hex>", "payload": <JSON value>, "seq": 1,
//	 "signature": "<base64>", "world": "..."}
//
// with "payload_cbor" (base64) instead of "payload" when the payload has no
// exact JSON form, as ToJSON does for receipts. FrameFromJSON(FrameToJSON(sf))
// == sf.
func FrameToJSON(sf SignedFrame) ([]byte, error) {
	w := frameJSON{Effect: sf.Effect, Executor: sf.Executor, IntentHash: sf.Intent, KeyID: sf.KeyID, Seq: sf.Seq, Signature: sf.Signature, World: sf.World}
	if js, ok := payloadAsJSON(sf.Payload); ok {
		w.Payload = js
	} else {
		w.PayloadCBOR = sf.Payload
	}
	js, err := encodeJSON(&w)
	if err != nil {
		return nil, fmt.Errorf("frame for intent %s to json: %w", sf.Intent, err)
	}
	return js, nil
}

// FrameFromJSON parses the HTTP API's frame form strictly, as FromJSON
// parses a receipt: one JSON object, no duplicate or unknown keys, required
// intent_hash, effect, executor, seq (an integer literal of 1 or more),
// key_id, signature and exactly one of payload or payload_cbor; world is
// optional here (a frame without one is in the v1 layout, which exports of
// old journals hold, and the kernel refuses it when posted). The result
// passes Check and has a signature of the right length; the signature is
// verified by Keyring.VerifyFrame. Errors wrap ErrMalformed and name the
// JSON pointer.
func FrameFromJSON(data []byte) (SignedFrame, error) {
	var sf SignedFrame
	o, err := readObject(data, "frame", "effect", "executor", "intent_hash", "key_id", "payload", "payload_cbor", "seq", "signature", "world")
	if err != nil {
		return sf, err
	}
	if sf.World, err = o.str("world", false); err != nil {
		return sf, err
	}
	if sf.Intent, err = o.hash("intent_hash"); err != nil {
		return sf, err
	}
	if sf.Effect, err = o.str("effect", true); err != nil {
		return sf, err
	}
	if sf.Executor, err = o.str("executor", true); err != nil {
		return sf, err
	}
	var has bool
	if sf.Seq, has, err = o.uint("seq"); err != nil {
		return sf, err
	} else if !has {
		return sf, badField("seq", "missing")
	}
	if sf.KeyID, err = o.str("key_id", true); err != nil {
		return sf, err
	}
	if sf.Signature, err = o.b64("signature"); err != nil {
		return sf, err
	}
	if sf.Payload, err = o.payload(); err != nil {
		return sf, err
	}
	if err := sf.Check(); err != nil {
		return SignedFrame{}, err
	}
	if err := sf.checkEnvelope(); err != nil {
		return SignedFrame{}, err
	}
	return sf, nil
}
