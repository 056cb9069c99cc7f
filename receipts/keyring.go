package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/aos-kernel/aos/schemas"
)

// Keyring errors.
var (
	ErrDuplicateKey     = errors.New("receipts: key already trusted")
	ErrKeyNotFound      = errors.New("receipts: key not in keyring")
	ErrExecutorMismatch = errors.New("receipts: receipt names another executor than its key")
	ErrBadKeyring       = errors.New("receipts: bad keyring")
	// ErrEffectNotAllowed: the key is trusted, but not for the effect the
	// receipt or frame is about.
	ErrEffectNotAllowed = errors.New("receipts: key not allowed for effect")
)

// BuiltinExecutor is the executor name of the built-in executors that run
// inside the daemon. Only a key trusted under this name may be allowed
// effects in the sys/ namespace.
const BuiltinExecutor = "aos/builtin"

// SysPrefix starts the names of the built-in effects.
const SysPrefix = "sys/"

// Key is one trusted executor key.
type Key struct {
	Name   string            // executor name receipts signed by this key must carry
	ID     string            // KeyID(Public)
	Public ed25519.PublicKey // 32 bytes
	// Effects are what the key may settle (receipts) and report progress on
	// (frames): exact effect names ("com.acme/charge@1") and namespace
	// patterns ("com.acme/*", every effect whose name starts with
	// "com.acme/"), sorted and without repeats. Empty only for a key read
	// from a keyring written before keys were bound to effects: such a key
	// may settle nothing until it is added again with its effects.
	Effects []string

	expanded *voi.ExpandedPublicKey // Public, precomputed for verification
}

// Allows reports whether the key may settle effect.
func (key *Key) Allows(effect string) bool {
	for _, p := range key.Effects {
		if p == effect || strings.HasSuffix(p, "/*") && strings.HasPrefix(effect, p[:len(p)-1]) {
			return true
		}
	}
	return false
}

// notAllowed is the refusal of a receipt or frame about effect, signed by
// key, for intent h.
func (key *Key) notAllowed(what string, h schemas.Hash, effect string) error {
	if len(key.Effects) == 0 {
		return fmt.Errorf("%w: %s for intent %s: key %s (executor %s) may not settle effect %s: it may settle no effect, "+
			"because it was trusted before keys were bound to effects; add it again naming its effects (aosd keys add %s PUBLIC_KEY_FILE --effects %s)",
			ErrEffectNotAllowed, what, h, key.ID, key.Name, effect, key.Name, effect)
	}
	return fmt.Errorf("%w: %s for intent %s: key %s (executor %s) may not settle effect %s (it may settle %s)",
		ErrEffectNotAllowed, what, h, key.ID, key.Name, effect, strings.Join(key.Effects, ", "))
}

// CheckEffects validates the effects a key trusted under executor name may
// settle and returns them sorted without repeats. Each is an effect name or
// a namespace pattern "ns/*"; "*" alone (every effect) is refused, and so is
// any sys/ effect unless name is BuiltinExecutor. At least one is required.
// Errors wrap ErrBadKeyring.
func CheckEffects(name string, effects []string) ([]string, error) {
	if len(effects) == 0 {
		return nil, fmt.Errorf("%w: executor %s: no effects: name the effects the key may settle (a key is never trusted for every effect)", ErrBadKeyring, name)
	}
	out := make([]string, 0, len(effects))
	for _, e := range effects {
		if err := checkEffect(name, e); err != nil {
			return nil, fmt.Errorf("%w: executor %s: %v", ErrBadKeyring, name, err)
		}
		out = append(out, e)
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

func checkEffect(name, e string) error {
	if err := checkName("effect", e, true); err != nil {
		return err
	}
	if i := strings.IndexByte(e, '*'); i >= 0 {
		if e == "*" {
			return fmt.Errorf("effect pattern \"*\" would allow every effect; name the effects, or a namespace as \"ns/*\"")
		}
		if i != len(e)-1 || i < 2 || e[i-1] != '/' {
			return fmt.Errorf("effect %q: a wildcard is allowed only as a whole last segment, as in \"ns/*\"", e)
		}
	}
	if strings.HasPrefix(e, SysPrefix) && name != BuiltinExecutor {
		return fmt.Errorf("effect %s is built in: only the built-in executors' key (%s) may settle %s effects", e, BuiltinExecutor, SysPrefix)
	}
	return nil
}

// Keyring holds the world's trusted executor keys. One executor name may
// have several keys (rotation: add the new key, move the executor, remove
// the old one); a key belongs to one name, and is allowed the effects it
// was added for. Methods are safe for concurrent use, so HTTP handlers can
// verify receipts off the kernel loop. The keyring is not journaled: the
// kernel consults it only to admit a receipt or frame, and replay trusts
// what the journal admitted (keys may have been removed since).
type Keyring struct {
	mu   sync.RWMutex
	keys map[string]Key // by key id
}

// NewKeyring returns an empty keyring.
func NewKeyring() *Keyring { return &Keyring{keys: map[string]Key{}} }

// Add trusts pub for executor name, for the effects given (see
// CheckEffects). A key already trusted is refused with ErrDuplicateKey,
// unless it is trusted under the same name for no effect (read from a
// keyring written before keys were bound to effects): then it gains them.
func (k *Keyring) Add(name string, pub ed25519.PublicKey, effects []string) error {
	if err := checkName("executor name", name, true); err != nil {
		return fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	effs, err := CheckEffects(name, effects)
	if err != nil {
		return err
	}
	return k.add(name, pub, effs, true)
}

// add is Add with effects already checked; none is allowed here, for keys
// read from keyrings written before keys were bound to effects. upgrade
// lets a key allowed no effect gain effects (Add); a keyring being loaded
// refuses every repeated key.
func (k *Keyring) add(name string, pub ed25519.PublicKey, effects []string, upgrade bool) error {
	if err := checkName("executor name", name, true); err != nil {
		return fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: executor %s: public key is %d bytes, want %d", ErrBadKeyring, name, len(pub), ed25519.PublicKeySize)
	}
	x, err := checkPublicKey(pub)
	if err != nil {
		return fmt.Errorf("%w: executor %s: %v", ErrBadKeyring, name, err)
	}
	id := KeyID(pub)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		k.keys = map[string]Key{}
	}
	if old, ok := k.keys[id]; ok {
		if upgrade && len(old.Effects) == 0 && len(effects) > 0 && old.Name == name {
			old.Effects = effects
			k.keys[id] = old
			return nil
		}
		return fmt.Errorf("%w: %s (executor %s)", ErrDuplicateKey, id, old.Name)
	}
	k.keys[id] = Key{Name: name, ID: id, Public: bytes.Clone(pub), Effects: effects, expanded: x}
	return nil
}

// Remove stops trusting the key with id keyID. Receipts it signed are
// refused from then on, even for intents opened before.
func (k *Keyring) Remove(keyID string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.keys[keyID]; !ok {
		return fmt.Errorf("%w: %s", ErrKeyNotFound, keyID)
	}
	delete(k.keys, keyID)
	return nil
}

// Len is the number of trusted keys.
func (k *Keyring) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.keys)
}

// List returns the trusted keys sorted by name, then key id.
func (k *Keyring) List() []Key {
	k.mu.RLock()
	out := make([]Key, 0, len(k.keys))
	for _, e := range k.keys {
		out = append(out, Key{Name: e.Name, ID: e.ID, Public: bytes.Clone(e.Public), Effects: append([]string(nil), e.Effects...)})
	}
	k.mu.RUnlock()
	sortKeys(out)
	return out
}

// Trusts reports whether a key trusted under executor name may settle
// effect (Key.Allows): only then may that executor claim its intents, since
// whatever it did with them could never be settled.
func (k *Keyring) Trusts(executor, effect string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, e := range k.keys {
		if e.Name == executor && e.Allows(effect) {
			return true
		}
	}
	return false
}

func sortKeys(ks []Key) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].Name != ks[j].Name {
			return ks[i].Name < ks[j].Name
		}
		return ks[i].ID < ks[j].ID
	})
}

// Verify checks sr and returns the name of the executor whose trusted key
// signed it. In order, so the cheapest refusal comes first and no payload
// from an untrusted party is ever decoded:
//
//  1. shape: status, intent, names, signature length, key id form -> ErrMalformed
//  2. the key id is trusted                                        -> ErrUnknownSigner
//  3. the ed25519 signature over SigningMessage verifies            -> ErrBadSignature
//  4. the receipt's executor is the key's executor name            -> ErrExecutorMismatch
//  5. the key is allowed the receipt's effect (Key.Allows)          -> ErrEffectNotAllowed
//  6. the payload is one canonical CBOR item                       -> ErrMalformed
//
// Verify does not look at pending intents or payload schemas: the kernel
// does, and checks that the intent's effect is the receipt's.
func (k *Keyring) Verify(sr SignedReceipt) (executorName string, err error) {
	key, err := k.precheck(&sr)
	if err != nil {
		return "", err
	}
	if !voi.VerifyExpanded(key.expanded, SigningMessage(&sr.Receipt), sr.Signature) {
		return "", badSignature(&sr, key)
	}
	return postcheck(&sr, key)
}

// keyringCBOR is the canonical CBOR form: version 1, entries in List order.
// Key ids are derived, so they are not stored. "effects" is omitted for a
// key allowed no effect, so keyrings written before keys were bound to
// effects keep their bytes (and load, their keys allowed nothing).
type keyringCBOR struct {
	V    uint64    `cbor:"v"`
	Keys []keyCBOR `cbor:"keys"`
}

type keyCBOR struct {
	Name    string   `cbor:"name"`
	Public  []byte   `cbor:"public"`
	Effects []string `cbor:"effects,omitempty"`
}

// MarshalCBOR encodes the keyring as canonical CBOR:
// {"v": 1, "keys": [{"name": text, "public": bytes(32), "effects": [text, ...]}, ...]}
// with keys in List order and effects sorted, so equal keyrings give equal
// bytes (and hashes).
func (k *Keyring) MarshalCBOR() ([]byte, error) {
	ks := k.List()
	doc := keyringCBOR{V: 1, Keys: make([]keyCBOR, len(ks))}
	for i, e := range ks {
		doc.Keys[i] = keyCBOR{Name: e.Name, Public: e.Public, Effects: e.Effects}
	}
	return schemas.Marshal(&doc)
}

// UnmarshalCBOR replaces the keyring's contents with data, which must be
// exactly what MarshalCBOR writes (canonical, sorted, no duplicates, no
// unknown fields). On error the keyring is unchanged.
func (k *Keyring) UnmarshalCBOR(data []byte) error {
	var doc keyringCBOR
	if err := schemas.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	if doc.V != 1 {
		return fmt.Errorf("%w: version %d, want 1", ErrBadKeyring, doc.V)
	}
	n := NewKeyring()
	for i, e := range doc.Keys {
		if err := n.addStored(e.Name, e.Public, e.Effects); err != nil {
			return fmt.Errorf("%w: entry %d: %v", ErrBadKeyring, i, err)
		}
	}
	re, err := n.MarshalCBOR()
	if err != nil || !bytes.Equal(re, data) {
		return fmt.Errorf("%w: not in canonical form (entries unsorted or unknown fields)", ErrBadKeyring)
	}
	k.replace(n)
	return nil
}

// addStored adds a key read from a keyring file or its CBOR form: its
// effects are checked like Add's, but may be absent (a keyring written
// before keys were bound to effects), leaving the key allowed nothing.
func (k *Keyring) addStored(name string, pub ed25519.PublicKey, effects []string) error {
	if effects != nil {
		var err error
		if effects, err = CheckEffects(name, effects); err != nil {
			return err
		}
	}
	return k.add(name, pub, effects, false)
}

func (k *Keyring) replace(n *Keyring) {
	k.mu.Lock()
	k.keys = n.keys
	k.mu.Unlock()
}

// keyringJSON is the file form: readable and hand-editable.
type keyringJSON struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	Name      string   `json:"name"`
	KeyID     string   `json:"key_id"`
	PublicKey string   `json:"public_key"` // standard base64 of the 32 raw bytes
	Effects   []string `json:"effects,omitempty"`
}

// MarshalJSON renders the keyring file form, indented, keys in List order:
//
//	{"keys": [{"name": "payments", "key_id": "ed25519:...", "public_key": "<base64>",
//	           "effects": ["com.acme/charge@1", "com.acme/refunds/*"]}]}
//
// "effects" is left out for a key allowed no effect.
func (k *Keyring) MarshalJSON() ([]byte, error) {
	ks := k.List()
	doc := keyringJSON{Keys: make([]keyJSON, len(ks))}
	for i, e := range ks {
		doc.Keys[i] = keyJSON{Name: e.Name, KeyID: e.ID, PublicKey: base64.StdEncoding.EncodeToString(e.Public), Effects: e.Effects}
	}
	return json.MarshalIndent(&doc, "", "  ")
}

// UnmarshalJSON replaces the keyring's contents with the file form. Entries
// may come in any order; unknown fields, duplicate keys, a key_id that does
// not match public_key, bad base64 and effects CheckEffects refuses are
// errors naming the entry. An entry without "effects" (a file written
// before keys were bound to effects) loads as a key allowed no effect; an
// empty "effects" list is refused. On error the keyring is unchanged.
func (k *Keyring) UnmarshalJSON(data []byte) error {
	// DecodeJSON refuses duplicate object keys, which encoding/json accepts.
	if _, err := schemas.DecodeJSON(data); err != nil {
		return fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	var doc keyringJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%w: %v", ErrBadKeyring, err)
	}
	n := NewKeyring()
	for i, e := range doc.Keys {
		pub, err := base64.StdEncoding.Strict().DecodeString(e.PublicKey)
		if err != nil {
			return fmt.Errorf("%w: /keys/%d/public_key: not standard base64: %v", ErrBadKeyring, i, err)
		}
		if e.KeyID != "" && len(pub) == ed25519.PublicKeySize && e.KeyID != KeyID(pub) {
			return fmt.Errorf("%w: /keys/%d/key_id: %s does not match public_key (its id is %s)", ErrBadKeyring, i, e.KeyID, KeyID(pub))
		}
		if e.Effects != nil && len(e.Effects) == 0 {
			return fmt.Errorf("%w: /keys/%d/effects: empty; name the effects the key may settle, or leave the field out (the key then settles nothing)", ErrBadKeyring, i)
		}
		if err := n.addStored(e.Name, pub, e.Effects); err != nil {
			return fmt.Errorf("/keys/%d: %w", i, err)
		}
	}
	k.replace(n)
	return nil
}
