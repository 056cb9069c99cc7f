package worldstore

import (
	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
)

// ErrLocked reports a directory another process has open.
var ErrLocked = badgerdb.ErrLocked

// Store is a world directory's open stores. Close it after every world
// running on it is closed.
type Store struct {
	db *badgerdb.DB
}

// Open opens (creating if needed) the store directory of a world.
func Open(dir string) (*Store, error) {
	db, err := badgerdb.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// OpenInMemory opens a store that lives in memory only: the same engine as
// on disk, without durability.
func OpenInMemory() (*Store, error) {
	db, err := badgerdb.OpenInMemory()
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// CAS is the world's content-addressed store.
func (s *Store) CAS() cas.Store { return s.db.CAS() }

// Journal is the world's journal, its height recovered at Open.
func (s *Store) Journal() kernel.Log { return s.db.Journal() }

// Stores are both ports, for kernel.Open.
func (s *Store) Stores() kernel.Stores {
	return kernel.Stores{CAS: s.db.CAS(), Journal: s.db.Journal()}
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }
