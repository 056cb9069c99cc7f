package daemon

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
)

// store is a world's store as a Host opens it. It is the one place the host
// names the storage engine: the built-in executors share its CAS, and the
// kernel opens on it.
type store struct{ db *badger.DB }

// openStore opens the store of the world in d. A store another process
// holds is cas.ErrLocked, with a hint at who.
func openStore(d Dir) (*store, error) {
	db, err := cas.OpenBadger(d.Store())
	if err != nil {
		if errors.Is(err, cas.ErrLocked) {
			return nil, fmt.Errorf("open world %s: %w (another process, perhaps aosd serve, holds it)", d, err)
		}
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	return &store{db: db}, nil
}

// cas is the store's content-addressed half, for the built-in executors.
func (s *store) cas() cas.Store { return cas.NewBadger(s.db) }

// openKernel opens the kernel on the store, which stays the caller's.
func (s *store) openKernel(cfg kernel.Config) (*kernel.World, error) { return kernel.OpenDB(s.db, cfg) }

func (s *store) close() error { return s.db.Close() }
