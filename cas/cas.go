package cas

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/schemas"
)

// Errors callers branch on.
var (
	ErrNotFound = errors.New("cas: object not found")
	ErrCorrupt  = errors.New("cas: object bytes do not match their hash")
)

// Store is an immutable hash -> bytes store. Every read is verified against its hash.
type Store interface {
	// Put stores data and returns its hash. Storing an existing object is a no-op.
	Put(data []byte) (schemas.Hash, error)
	// PutBatch stores many objects in one write.
	PutBatch(objs [][]byte) ([]schemas.Hash, error)
	// Get returns the bytes for h, ErrNotFound, or ErrCorrupt (wrapped, naming h).
	Get(h schemas.Hash) ([]byte, error)
	// Has reports whether h is stored.
	Has(h schemas.Hash) (bool, error)
	// Iterate calls fn for each stored object in hash order; fn returning an error stops.
	Iterate(fn func(h schemas.Hash, size int) error) error
	// Delete removes objects; only garbage collection calls it.
	Delete(hs []schemas.Hash) error
}

// Verified is how every store's Get ends: data is what was read under h
// (found: whether anything was), checked against h. It returns data, or
// ErrNotFound or ErrCorrupt wrapped and naming h (and, when corrupt, the hash
// the stored bytes have), so every backend refuses a bad object alike.
func Verified(h schemas.Hash, data []byte, found bool) ([]byte, error) {
	if !found {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, h)
	}
	if got := schemas.HashBytes(data); got != h {
		return nil, fmt.Errorf("%w: %s (stored bytes hash to %s)", ErrCorrupt, h, got)
	}
	return data, nil
}
