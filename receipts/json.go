package receipts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aos-kernel/aos/schemas"
)

// anySchema is a private schema that accepts every JSON value, so payload
// values go through the schemas package's one JSON -> canonical CBOR
// conversion (number rules included) without a schema of their own.
const anySchema = "aos.receipts/any@1"

var anyRegistry = sync.OnceValue(func() *schemas.Registry {
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{{Name: anySchema, Schema: json.RawMessage(`{}`)}}); err != nil {
		panic("receipts: " + err.Error())
	}
	return r
})

// PayloadFromJSON converts one JSON value to canonical CBOR with no schema:
// integral numbers become integers (1.0 and 1e0 are 1), other numbers the
// shortest exact float, strings text strings. There are no byte strings in
// this form: a payload that needs them is sent as payload_cbor.
func PayloadFromJSON(js []byte) ([]byte, error) {
	return anyRegistry().FromJSON(anySchema, js)
}

func payloadFromValue(v any) ([]byte, error) {
	return anyRegistry().FromValue(anySchema, v)
}

// ReceiptForm is a signed receipt in the HTTP API's JSON form, the one
// Go shape of it: ToJSON writes it, and a reader that must give back what a
// journal holds without judging it (the journal's export, package views)
// decodes into it and takes Unchecked. FromJSON reads the same form
// strictly, judging as it goes. Fields are declared in key order, so the
// output has sorted keys.
type ReceiptForm struct {
	Attempt     uint64          `json:"attempt"`
	Effect      string          `json:"effect"`
	Executor    string          `json:"executor"`
	IntentHash  schemas.Hash    `json:"intent_hash"`
	IssuerRef   string          `json:"issuer_ref,omitempty"`
	KeyID       string          `json:"key_id"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	PayloadCBOR []byte          `json:"payload_cbor,omitempty"`
	Signature   []byte          `json:"signature"`
	Status      Status          `json:"status"`
	World       string          `json:"world,omitempty"`
}

// ToJSON renders sr in the HTTP API's receipt form: compact, keys sorted,
//
//	{"attempt": 1, "effect": "...", "executor": "...", "intent_hash": "sha256:<hex>",
//	 "issuer_ref": "...", "key_id": "ed25519:<hex>", "payload": <JSON value>,
//	 "signature": "<base64>", "status": "ok", "world": "..."}
//
// The payload appears as a JSON value ("payload") when that value converts
// back to exactly the same CBOR bytes, and otherwise (byte strings, maps
// with non-text keys, floats JSON cannot carry) as "payload_cbor", the
// standard base64 of the bytes. So FromJSON(ToJSON(sr)) == sr.
func ToJSON(sr SignedReceipt) ([]byte, error) {
	w := ReceiptForm{
		Attempt:    sr.Attempt,
		Effect:     sr.Effect,
		Executor:   sr.Executor,
		IntentHash: sr.Intent,
		IssuerRef:  sr.IssuerRef,
		KeyID:      sr.KeyID,
		Signature:  sr.Signature,
		Status:     sr.Status,
		World:      sr.World,
	}
	if js, ok := payloadAsJSON(sr.Payload); ok {
		w.Payload = js
	} else {
		w.PayloadCBOR = sr.Payload
	}
	js, err := encodeJSON(&w)
	if err != nil {
		return nil, fmt.Errorf("receipt %s to json: %w", sr.Intent, err)
	}
	return js, nil
}

// Unchecked is the signed receipt f holds, as it is: its payload from
// payload (a JSON value, converted as PayloadFromJSON does) or else
// payload_cbor, and nothing judged (Check, the signature: Keyring.Verify
// judges). Errors name the field.
func (f *ReceiptForm) Unchecked() (SignedReceipt, error) {
	sr := SignedReceipt{Receipt: Receipt{World: f.World, Intent: f.IntentHash, Effect: f.Effect, Executor: f.Executor,
		Status: f.Status, Attempt: f.Attempt, IssuerRef: f.IssuerRef}, KeyID: f.KeyID, Signature: f.Signature}
	switch {
	case f.Payload != nil && f.PayloadCBOR != nil:
		return sr, errors.New("receipt: both payload and payload_cbor")
	case f.Payload != nil:
		p, err := PayloadFromJSON(f.Payload)
		if err != nil {
			return sr, fmt.Errorf("receipt/payload: %v", err)
		}
		sr.Payload = p
	default:
		sr.Payload = f.PayloadCBOR
	}
	return sr, nil
}

func payloadAsJSON(p []byte) (json.RawMessage, bool) {
	js, err := schemas.ToJSON(p)
	if err != nil {
		return nil, false
	}
	back, err := PayloadFromJSON(js)
	if err != nil || !bytes.Equal(back, p) {
		return nil, false
	}
	return js, true
}

// FromJSON parses the HTTP API's receipt form strictly: one JSON object,
// no duplicate or unknown keys, required keys intent_hash, effect,
// executor, status, key_id, signature and exactly one of payload (a JSON
// value, converted as PayloadFromJSON does) or payload_cbor (standard
// base64 of canonical CBOR); attempt (a non-negative integer literal),
// issuer_ref and world are optional (a receipt without a world is in the v1
// layout, which exports of old journals hold; the kernel refuses one when
// it is posted, saying how to update the executor). The result passes Check and has a signature of
// the right length; the signature itself is verified by Keyring.Verify.
// Every error wraps ErrMalformed and names the JSON pointer.
func FromJSON(data []byte) (SignedReceipt, error) {
	var sr SignedReceipt
	o, err := readObject(data, "receipt", "attempt", "effect", "executor", "intent_hash", "issuer_ref", "key_id", "payload", "payload_cbor", "signature", "status", "world")
	if err != nil {
		return sr, err
	}
	if sr.World, err = o.str("world", false); err != nil {
		return sr, err
	}
	if sr.Intent, err = o.hash("intent_hash"); err != nil {
		return sr, err
	}
	if sr.Effect, err = o.str("effect", true); err != nil {
		return sr, err
	}
	if sr.Executor, err = o.str("executor", true); err != nil {
		return sr, err
	}
	st, err := o.str("status", true)
	if err != nil {
		return sr, err
	}
	sr.Status = Status(st)
	if sr.IssuerRef, err = o.str("issuer_ref", false); err != nil {
		return sr, err
	}
	if sr.KeyID, err = o.str("key_id", true); err != nil {
		return sr, err
	}
	if sr.Signature, err = o.b64("signature"); err != nil {
		return sr, err
	}
	if sr.Attempt, _, err = o.uint("attempt"); err != nil {
		return sr, err
	}
	if sr.Payload, err = o.payload(); err != nil {
		return sr, err
	}
	if err := sr.Check(); err != nil {
		return SignedReceipt{}, err
	}
	if err := sr.checkEnvelope(); err != nil {
		return SignedReceipt{}, err
	}
	return sr, nil
}

// jsonObject is one strictly parsed JSON object of the HTTP API's signed
// forms (receipts, frames); its accessors' errors wrap ErrMalformed and
// name the JSON pointer.
type jsonObject map[string]any

// readObject parses data as one JSON object (no duplicate keys, nothing
// after it) whose keys are all among known.
func readObject(data []byte, what string, known ...string) (jsonObject, error) {
	v, err := schemas.DecodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrMalformed, what)
	}
	for k := range m {
		if !slices.Contains(known, k) {
			return nil, badField(k, "unknown field (want %s)", strings.Join(known, ", "))
		}
	}
	return m, nil
}

func badField(key, format string, a ...any) error {
	return fmt.Errorf("%w: /%s: %s", ErrMalformed, key, fmt.Sprintf(format, a...))
}

func (o jsonObject) str(key string, required bool) (string, error) {
	x, ok := o[key]
	if !ok {
		if required {
			return "", badField(key, "missing")
		}
		return "", nil
	}
	s, ok := x.(string)
	if !ok {
		return "", badField(key, "want a string")
	}
	return s, nil
}

func (o jsonObject) b64(key string) ([]byte, error) {
	s, err := o.str(key, true)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, badField(key, "not standard padded base64: %v", err)
	}
	return b, nil
}

func (o jsonObject) hash(key string) (schemas.Hash, error) {
	s, err := o.str(key, true)
	if err != nil {
		return schemas.Hash{}, err
	}
	h, err := schemas.ParseHash(s)
	if err != nil {
		return schemas.Hash{}, badField(key, "%v", err)
	}
	return h, nil
}

// uint reads an optional non-negative integer literal.
func (o jsonObject) uint(key string) (uint64, bool, error) {
	a, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	n, isNum := a.(json.Number)
	if !isNum {
		return 0, true, badField(key, "want a non-negative integer")
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, true, badField(key, "want a non-negative integer literal below 2^64, got %s", n)
	}
	return u, true, nil
}

// payload reads exactly one of payload (a JSON value) and payload_cbor.
func (o jsonObject) payload() ([]byte, error) {
	pv, hasValue := o["payload"]
	_, hasCBOR := o["payload_cbor"]
	switch {
	case hasValue && hasCBOR:
		return nil, badField("payload", "give payload or payload_cbor, not both")
	case hasValue:
		p, err := payloadFromValue(pv)
		if err != nil {
			var ve *schemas.ValueError
			if errors.As(err, &ve) {
				return nil, fmt.Errorf("%w: /payload%s: %s", ErrMalformed, strings.TrimSuffix(ve.Pointer, "/"), ve.Msg)
			}
			return nil, badField("payload", "%v", err)
		}
		return p, nil
	case hasCBOR:
		return o.b64("payload_cbor")
	}
	return nil, badField("payload", "missing (give payload or payload_cbor)")
}

// encodeJSON writes v compactly without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
