package cas

import (
	"errors"

	"github.com/aos-kernel/aos/schemas"
)

// ErrReadOnly is what an Overlay answers Delete with.
var ErrReadOnly = errors.New("cas: overlay: the base store is read only")

// Overlay is a Store that reads through to a base store and keeps every
// write in memory, so a scratch world (replay verification, a shadow run)
// can write cells and snapshots over a live world's CAS without changing
// it. Objects written to the overlay shadow nothing: content addressing
// makes a base object and an overlay object with the same hash equal.
type Overlay struct {
	base Store
	top  *Memory
}

var _ Store = (*Overlay)(nil)

// NewOverlay returns an overlay over base.
func NewOverlay(base Store) *Overlay { return &Overlay{base: base, top: NewMemory()} }

// Put implements Store: the object goes to memory.
func (o *Overlay) Put(data []byte) (schemas.Hash, error) { return o.top.Put(data) }

// PutBatch implements Store.
func (o *Overlay) PutBatch(objs [][]byte) ([]schemas.Hash, error) { return o.top.PutBatch(objs) }

// Get implements Store: memory first, then the base.
func (o *Overlay) Get(h schemas.Hash) ([]byte, error) {
	if b, err := o.top.Get(h); err == nil {
		return b, nil
	}
	return o.base.Get(h)
}

// Has implements Store.
func (o *Overlay) Has(h schemas.Hash) (bool, error) {
	if ok, _ := o.top.Has(h); ok {
		return true, nil
	}
	return o.base.Has(h)
}

// Iterate implements Store over the objects written to the overlay only.
func (o *Overlay) Iterate(fn func(h schemas.Hash, size int) error) error { return o.top.Iterate(fn) }

// Delete implements Store: refused, the base is read only.
func (o *Overlay) Delete([]schemas.Hash) error { return ErrReadOnly }

// Written is how many objects and bytes were written to the overlay.
func (o *Overlay) Written() (objects int, bytes int64) {
	_ = o.top.Iterate(func(_ schemas.Hash, size int) error {
		objects++
		bytes += int64(size)
		return nil
	})
	return objects, bytes
}
