package kernel

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/aos-kernel/aos/schemas"
)

// validCacheSize bounds the cache of (schema, value hash) pairs known valid.
const validCacheSize = 1 << 16

type validKey struct {
	schema string
	hash   schemas.Hash
}

// validator remembers values that passed schema validation. Validation is a
// pure function of (schema, bytes), so the cache can only skip repeating it;
// it never changes an outcome (invalid values are never cached). A manifest
// change replaces the registry and with it the cache.
type validator struct {
	reg   *schemas.Registry
	cache *lru.Cache[validKey, struct{}]
}

func newValidator(reg *schemas.Registry) *validator {
	c, err := lru.New[validKey, struct{}](validCacheSize)
	if err != nil {
		panic(err) // only for a non-positive size
	}
	return &validator{reg: reg, cache: c}
}

func (v *validator) validate(schema string, value []byte) error {
	if v.reg.HasFastPath(schema) {
		// About a microsecond, less than hashing and caching would cost.
		return v.reg.Validate(schema, value)
	}
	k := validKey{schema: schema, hash: schemas.HashBytes(value)}
	if _, ok := v.cache.Get(k); ok {
		return nil
	}
	if err := v.reg.Validate(schema, value); err != nil {
		return err
	}
	v.cache.Add(k, struct{}{})
	return nil
}
