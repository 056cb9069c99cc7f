package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
)

// Key is one trusted executor key.
type Key struct {
	Name   string            // executor name receipts signed by this key must carry
	ID     string            // KeyID(Public)
	Public ed25519.PublicKey // 32 bytes

	expanded *voi.ExpandedPublicKey // Public, precomputed for verification
}

// Keyring holds the world's trusted executor keys. One executor name may
// have several keys (rotation: add the new key, move the executor, remove
// the old one); a key belongs to one name. Methods are safe for concurrent
// use, so HTTP handlers can verify receipts off the kernel loop; the kernel
// changes the keyring only in its loop, journaling each change.
type Keyring struct {
	mu   sync.RWMutex
	keys map[string]Key // by key id
}

// NewKeyring returns an empty keyring.
func NewKeyring() *Keyring { return &Keyring{keys: map[string]Key{}} }

// Add trusts pub for executor name. A key already trusted (under any name)
// is refused with ErrDuplicateKey.
func (k *Keyring) Add(name string, pub ed25519.PublicKey) error {
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
		return fmt.Errorf("%w: %s (executor %s)", ErrDuplicateKey, id, old.Name)
	}
	k.keys[id] = Key{Name: name, ID: id, Public: bytes.Clone(pub), expanded: x}
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
		out = append(out, Key{Name: e.Name, ID: e.ID, Public: bytes.Clone(e.Public)})
	}
	k.mu.RUnlock()
	sortKeys(out)
	return out
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
//  5. the payload is one canonical CBOR item                       -> ErrMalformed
//
// Verify does not look at pending intents (see Fence) or payload schemas.
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
// Key ids are derived, so they are not stored.
type keyringCBOR struct {
	V    uint64    `cbor:"v"`
	Keys []keyCBOR `cbor:"keys"`
}

type keyCBOR struct {
	Name   string `cbor:"name"`
	Public []byte `cbor:"public"`
}

// MarshalCBOR encodes the keyring as canonical CBOR:
// {"v": 1, "keys": [{"name": text, "public": bytes(32)}, ...]} with keys in
// List order, so equal keyrings give equal bytes (and hashes).
func (k *Keyring) MarshalCBOR() ([]byte, error) {
	ks := k.List()
	doc := keyringCBOR{V: 1, Keys: make([]keyCBOR, len(ks))}
	for i, e := range ks {
		doc.Keys[i] = keyCBOR{Name: e.Name, Public: e.Public}
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
		if err := n.Add(e.Name, e.Public); err != nil {
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
	Name      string `json:"name"`
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"` // standard base64 of the 32 raw bytes
}

// MarshalJSON renders the keyring file form, indented, keys in List order:
//
//	{"keys": [{"name": "timer", "key_id": "ed25519:...", "public_key": "<base64>"}]}
func (k *Keyring) MarshalJSON() ([]byte, error) {
	ks := k.List()
	doc := keyringJSON{Keys: make([]keyJSON, len(ks))}
	for i, e := range ks {
		doc.Keys[i] = keyJSON{Name: e.Name, KeyID: e.ID, PublicKey: base64.StdEncoding.EncodeToString(e.Public)}
	}
	return json.MarshalIndent(&doc, "", "  ")
}

// UnmarshalJSON replaces the keyring's contents with the file form. Entries
// may come in any order; unknown fields, duplicate keys, a key_id that does
// not match public_key, and bad base64 are errors naming the entry. On
// error the keyring is unchanged.
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
		if err := n.Add(e.Name, pub); err != nil {
			return fmt.Errorf("/keys/%d: %w", i, err)
		}
	}
	k.replace(n)
	return nil
}
