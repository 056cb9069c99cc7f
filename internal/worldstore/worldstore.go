// Package worldstore opens the stores of a world directory for code that
// must not name the storage engine: the kernel's own tests, which need a
// real durable store (crash and reopen tests) but, like the kernel, speak
// only to its ports. Which engine backs a world directory is decided here
// for them (and in the daemon for a running world).
//
// It must not import the kernel (the kernel's internal tests could then not
// use it); what it hands out satisfies the kernel's ports structurally.
package worldstore

import (
	"context"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
)

// ErrLocked reports a directory another process has open.
var ErrLocked = badgerdb.ErrLocked

// Journal is the journal port (kernel.Log) as a world directory provides it.
type Journal interface {
	Height() uint64
	Append(recs []journal.Record) error
	Read(from uint64, fn func(journal.Record) (bool, error)) error
	Wait(ctx context.Context, after uint64) (uint64, error)
}

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
func (s *Store) Journal() Journal { return s.db.Journal() }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }
