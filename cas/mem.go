package cas

import (
	"sort"
	"sync"

	"github.com/aos-kernel/aos/schemas"
)

// Memory is an in-memory Store for unit tests.
type Memory struct {
	mu   sync.RWMutex
	objs map[schemas.Hash][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{objs: map[schemas.Hash][]byte{}} }

func (m *Memory) Put(data []byte) (schemas.Hash, error) {
	h := schemas.HashBytes(data)
	m.mu.Lock()
	if old, ok := m.objs[h]; !ok || schemas.HashBytes(old) != h {
		m.objs[h] = append([]byte(nil), data...) // new, or healing a corrupt copy
	}
	m.mu.Unlock()
	return h, nil
}

func (m *Memory) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	hs := make([]schemas.Hash, len(objs))
	for i, o := range objs {
		hs[i], _ = m.Put(o)
	}
	return hs, nil
}

func (m *Memory) Get(h schemas.Hash) ([]byte, error) {
	m.mu.RLock()
	b, ok := m.objs[h]
	m.mu.RUnlock()
	return Verified(h, b, ok)
}

func (m *Memory) Has(h schemas.Hash) (bool, error) {
	m.mu.RLock()
	_, ok := m.objs[h]
	m.mu.RUnlock()
	return ok, nil
}

func (m *Memory) Iterate(fn func(h schemas.Hash, size int) error) error {
	m.mu.RLock()
	hs := make([]schemas.Hash, 0, len(m.objs))
	for h := range m.objs {
		hs = append(hs, h)
	}
	m.mu.RUnlock()
	sort.Slice(hs, func(i, j int) bool { return string(hs[i][:]) < string(hs[j][:]) })
	for _, h := range hs {
		m.mu.RLock()
		b, ok := m.objs[h]
		m.mu.RUnlock()
		if !ok {
			continue
		}
		if err := fn(h, len(b)); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) Delete(hs []schemas.Hash) error {
	m.mu.Lock()
	for _, h := range hs {
		delete(m.objs, h)
	}
	m.mu.Unlock()
	return nil
}

// Corrupt overwrites an object's bytes without changing its key; tests use it
// to prove reads are verified.
func (m *Memory) Corrupt(h schemas.Hash, data []byte) {
	m.mu.Lock()
	m.objs[h] = data
	m.mu.Unlock()
}
