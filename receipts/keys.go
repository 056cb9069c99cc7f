package receipts

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// ErrBadKey reports key text or a key file that cannot be used.
var ErrBadKey = errors.New("receipts: bad key")

// PEM block types (RFC 7468 labels for PKCS #8 and PKIX).
const (
	pemPrivate = "PRIVATE KEY"
	pemPublic  = "PUBLIC KEY"
)

// GenerateKey returns a new ed25519 private key from crypto/rand.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return priv, nil
}

// EncodePrivateKey renders priv as PEM "PRIVATE KEY" (PKCS #8), the form
// openssl and most languages' crypto libraries read.
func EncodePrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: private key is %d bytes, want %d", ErrBadKey, len(priv), ed25519.PrivateKeySize)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivate, Bytes: der}), nil
}

// DecodePrivateKey parses one PEM "PRIVATE KEY" block holding an ed25519
// PKCS #8 key. Other key types and trailing data are refused.
func DecodePrivateKey(text []byte) (ed25519.PrivateKey, error) {
	der, err := onePEM(text, pemPrivate)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: private key is %T, want ed25519", ErrBadKey, k)
	}
	return priv, nil
}

// EncodePublicKey renders pub as PEM "PUBLIC KEY" (PKIX SubjectPublicKeyInfo).
func EncodePublicKey(pub ed25519.PublicKey) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: public key is %d bytes, want %d", ErrBadKey, len(pub), ed25519.PublicKeySize)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublic, Bytes: der}), nil
}

// DecodePublicKey parses one PEM "PUBLIC KEY" block holding an ed25519 key.
func DecodePublicKey(text []byte) (ed25519.PublicKey, error) {
	der, err := onePEM(text, pemPublic)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: public key is %T, want ed25519", ErrBadKey, k)
	}
	return pub, nil
}

func onePEM(text []byte, typ string) ([]byte, error) {
	b, rest := pem.Decode(text)
	if b == nil {
		return nil, fmt.Errorf("%w: no PEM %q block", ErrBadKey, typ)
	}
	if b.Type != typ {
		return nil, fmt.Errorf("%w: PEM block is %q, want %q", ErrBadKey, b.Type, typ)
	}
	if len(b.Headers) != 0 {
		return nil, fmt.Errorf("%w: PEM block has headers (encrypted keys are not supported)", ErrBadKey)
	}
	if len(trimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: data after the PEM block", ErrBadKey)
	}
	return b.Bytes, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// WritePrivateKeyFile writes priv to path as PEM with mode 0600. It refuses
// to replace an existing file: overwriting a key by mistake orphans every
// keyring that trusts it.
func WritePrivateKeyFile(path string, priv ed25519.PrivateKey) error {
	text, err := EncodePrivateKey(priv)
	if err != nil {
		return err
	}
	return writeNew(path, text)
}

// WritePublicKeyFile writes pub to path as PEM with mode 0600, refusing to
// replace an existing file.
func WritePublicKeyFile(path string, pub ed25519.PublicKey) error {
	text, err := EncodePublicKey(pub)
	if err != nil {
		return err
	}
	return writeNew(path, text)
}

// ReadPrivateKeyFile reads a key written by WritePrivateKeyFile. On Unix it
// refuses a file that group or others may read or write (as ssh does): a
// leaked executor key lets anyone settle that executor's intents.
func ReadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("read private key: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%w: %s has mode %v; want 0600 (chmod 600 %s)", ErrBadKey, path, fi.Mode().Perm(), path)
		}
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read private key: %w", err)
	}
	priv, err := DecodePrivateKey(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return priv, nil
}

// ReadPublicKeyFile reads a PEM public key file.
func ReadPublicKeyFile(path string) (ed25519.PublicKey, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read public key: %w", err)
	}
	pub, err := DecodePublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pub, nil
}

// WriteKeyringFile writes the keyring's JSON file form to path with mode
// 0600, replacing it atomically (temp file in the same directory, fsync,
// rename).
func WriteKeyringFile(path string, k *Keyring) error {
	text, err := k.MarshalJSON()
	if err != nil {
		return err
	}
	text = append(text, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write keyring: %w", err)
	}
	ok = true
	return nil
}

// ReadKeyringFile reads a keyring JSON file.
func ReadKeyringFile(path string) (*Keyring, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keyring: %w", err)
	}
	k := NewKeyring()
	if err := k.UnmarshalJSON(text); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func writeNew(path string, text []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if _, err := f.Write(text); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write key: %w", err)
	}
	return nil
}
