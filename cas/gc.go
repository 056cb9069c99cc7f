package cas

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/schemas"
)

// ErrMissing reports an object GC must reach (a root or a child of a reached
// object) that is not in the store. GC deletes nothing when it sees one.
var ErrMissing = errors.New("cas: gc: reachable object missing")

// GCStats counts what a collection kept and freed. Bytes are object sizes as
// reported by Store.Iterate.
type GCStats struct {
	KeptObjects  int
	KeptBytes    int64
	FreedObjects int
	FreedBytes   int64
	// KeptWritten counts the kept objects that were not marked but were
	// written during the collection (a Guard's; always 0 for GC).
	KeptWritten int
}

// deleteChunk bounds one Delete call so a large sweep is not one giant batch
// and a Guard's writers wait for one chunk at most.
const deleteChunk = 4096

// GC deletes every object not reachable from roots. children decodes an
// object's outgoing references; it is called once per reachable object, with
// bytes already verified against h.
//
// Marking is iterative (an explicit stack), so deep chains do not grow the Go
// stack. A missing root or child, a corrupt object, or an error from children
// stops GC before anything is deleted. The sweep is a Guard collection's.
//
// GC must not run concurrently with writers: an object written after marking
// that no root reaches yet would be swept. To collect while writers run, route
// their writes through a Guard and use its Collection.
func GC(store Store, roots []schemas.Hash, children func(h schemas.Hash, data []byte) ([]schemas.Hash, error)) (GCStats, error) {
	marked, err := mark(store, roots, children)
	if err != nil {
		return GCStats{}, err
	}
	c, err := NewGuard(store).Begin()
	if err != nil {
		return GCStats{}, err // a fresh Guard has no collection running
	}
	return c.Sweep(func(h schemas.Hash) bool {
		_, ok := marked[h]
		return ok
	}, nil)
}

// pending is an object still to visit and the object that referenced it
// (zero for a root), kept so errors can say where a dangling reference is.
type pending struct {
	h, parent schemas.Hash
}

func mark(store Store, roots []schemas.Hash, children func(schemas.Hash, []byte) ([]schemas.Hash, error)) (map[schemas.Hash]struct{}, error) {
	marked := make(map[schemas.Hash]struct{})
	stack := make([]pending, 0, len(roots))
	for i := len(roots) - 1; i >= 0; i-- {
		stack = append(stack, pending{h: roots[i]})
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := marked[p.h]; ok {
			continue
		}
		data, err := store.Get(p.h)
		switch {
		case errors.Is(err, ErrNotFound) && p.parent.IsZero():
			return nil, fmt.Errorf("%w: root %s", ErrMissing, p.h)
		case errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("%w: %s (referenced by %s)", ErrMissing, p.h, p.parent)
		case err != nil:
			return nil, fmt.Errorf("cas: gc: mark: %w", err)
		}
		marked[p.h] = struct{}{}
		kids, err := children(p.h, data)
		if err != nil {
			return nil, fmt.Errorf("cas: gc: children of %s: %w", p.h, err)
		}
		for _, k := range kids {
			if _, ok := marked[k]; !ok {
				stack = append(stack, pending{h: k, parent: p.h})
			}
		}
	}
	return marked, nil
}
