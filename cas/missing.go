package cas

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/schemas"
)

// ErrHashMismatch reports a PutMissing whose caller named an object by a
// hash its bytes do not have.
var ErrHashMismatch = errors.New("cas: object does not hash to the hash given for it")

// MissingPutter is a Store that can write, of many objects, only those it
// does not hold, more cheaply than a Has per object and a PutBatch would
// (the Badger store answers every presence from one read transaction).
type MissingPutter interface {
	// PutMissing is PutMissing (the function) on this store.
	PutMissing(hs []schemas.Hash, objs [][]byte) (written int, err error)
}

// PutMissing stores those of objs that s does not hold yet, and returns
// how many it wrote. hs[i] is the hash of objs[i], which the caller has
// computed already: an object that is written is hashed again, and one
// that does not hash to its hs[i] is ErrHashMismatch (then nothing is
// written). An object s holds is neither read nor rewritten, so, unlike
// PutBatch, PutMissing does not heal a stored copy that is corrupt: Get
// still finds it corrupt (every read is verified) and a Put heals it.
//
// It is for a writer that knows most of what it writes is stored already:
// a replay re-creating the cell index nodes the live world wrote. Where
// most objects are new, PutBatch is cheaper (no presence reads).
func PutMissing(s Store, hs []schemas.Hash, objs [][]byte) (int, error) {
	if len(hs) != len(objs) {
		return 0, fmt.Errorf("cas: put missing: %d hashes for %d objects", len(hs), len(objs))
	}
	if m, ok := s.(MissingPutter); ok {
		return m.PutMissing(hs, objs)
	}
	var missing []int
	seen := make(map[schemas.Hash]struct{}, len(hs))
	for i, h := range hs {
		if _, dup := seen[h]; dup {
			continue
		}
		seen[h] = struct{}{}
		ok, err := s.Has(h)
		if err != nil {
			return 0, fmt.Errorf("cas: put missing: %w", err)
		}
		if !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	_, write, err := MissingObjects(hs, objs, missing)
	if err != nil {
		return 0, err
	}
	if _, err := s.PutBatch(write); err != nil {
		return 0, err
	}
	return len(write), nil
}

// MissingObjects returns the objects at the indexes missing, each once, and
// their hashes, checking each object hashes to its hs entry: a store
// implementing MissingPutter calls it with the indexes it found absent.
func MissingObjects(hs []schemas.Hash, objs [][]byte, missing []int) ([]schemas.Hash, [][]byte, error) {
	outHs := make([]schemas.Hash, 0, len(missing))
	out := make([][]byte, 0, len(missing))
	seen := make(map[schemas.Hash]struct{}, len(missing))
	for _, i := range missing {
		if _, dup := seen[hs[i]]; dup {
			continue
		}
		seen[hs[i]] = struct{}{}
		if got := schemas.HashBytes(objs[i]); got != hs[i] {
			return nil, nil, fmt.Errorf("%w: object %d of %d was given as %s, hashes to %s", ErrHashMismatch, i, len(objs), hs[i], got)
		}
		outHs = append(outHs, hs[i])
		out = append(out, objs[i])
	}
	return outHs, out, nil
}
