package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Hash is a SHA-256 digest of canonical bytes. Its text form is "sha256:<64 hex>".
type Hash [32]byte

// HashPrefix starts the text form of every Hash.
const HashPrefix = "sha256:"

// ErrBadHash reports a hash string that is not "sha256:" followed by 64 hex digits.
var ErrBadHash = errors.New("schemas: malformed hash")

// HashBytes returns the SHA-256 of b. Callers hash canonical bytes only.
func HashBytes(b []byte) Hash { return Hash(sha256.Sum256(b)) }

// String renders the hash as "sha256:<hex>".
func (h Hash) String() string {
	var buf [len(HashPrefix) + 64]byte
	copy(buf[:], HashPrefix)
	hex.Encode(buf[len(HashPrefix):], h[:])
	return string(buf[:])
}

// IsZero reports whether h is the zero value (no hash).
func (h Hash) IsZero() bool { return h == Hash{} }

// Short is the first 12 hex digits, for tables meant for people.
func (h Hash) Short() string { return hex.EncodeToString(h[:6]) }

// ParseHash parses the text form produced by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if !strings.HasPrefix(s, HashPrefix) || len(s) != len(HashPrefix)+64 {
		return h, fmt.Errorf("%w: %q (want sha256:<64 hex digits>)", ErrBadHash, s)
	}
	if _, err := hex.Decode(h[:], []byte(s[len(HashPrefix):])); err != nil {
		return h, fmt.Errorf("%w: %q: %v", ErrBadHash, s, err)
	}
	return h, nil
}

// MarshalText makes Hash print as its text form in JSON.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses the text form.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}
