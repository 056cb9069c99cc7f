package host

import (
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
)

// store is a world's store as a Host opens it. It is the one place the host
// names the storage engine: the built-in executors share its CAS, and the
// kernel opens on its two ports.
//
// Every CAS write of the world (the kernel's and the blob executor's) goes
// through one cas.Guard, so a garbage collection running beside the world
// spares what they write.
type store struct {
	db    *badgerdb.DB
	guard *cas.Guard
}

// StoreOptions are the choices about a world's store on disk; the zero
// value is the default.
type StoreOptions struct {
	// DiskReserve is the free space, in bytes, the store keeps on its
	// filesystem beyond its tables and the writes under way: a write that
	// would leave less stops the world (a storage failure naming the disk
	// as full), and opening a world with less is refused. 0 is the default,
	// badgerdb.DefaultDiskReserve (docs/limits.md, "A full disk").
	DiskReserve int64
}

// openStore opens the store of the world in d. A store another process
// holds is badgerdb.ErrLocked, with a hint at who.
func openStore(d Dir, so StoreOptions) (*store, error) {
	s, err := openStoreAt(d.Store(), so)
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("open world %s: %w (another process, perhaps aosd serve, holds it)", d, err)
		}
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	return s, nil
}

// openStoreAt opens the store directory at path.
func openStoreAt(path string, so StoreOptions) (*store, error) {
	db, err := badgerdb.OpenWith(path, badgerdb.Options{DiskReserve: so.DiskReserve})
	if err != nil {
		return nil, err
	}
	return &store{db: db, guard: cas.NewGuard(db.CAS())}, nil
}

// isLocked says whether err is a store held by another process.
func isLocked(err error) bool { return errors.Is(err, badgerdb.ErrLocked) }

// openWorld opens the store directory and the world on it. The caller
// closes the world, then the store.
func openWorld(path string, cfg kernel.Config, so StoreOptions) (*kernel.World, *store, error) {
	s, err := openStoreAt(path, so)
	if err != nil {
		return nil, nil, err
	}
	w, err := s.openKernel(cfg)
	if err != nil {
		s.close()
		return nil, nil, err
	}
	return w, s, nil
}

// cas is the store's content-addressed half, for the built-in executors.
func (s *store) cas() cas.Store { return s.guard }

// openKernel opens the kernel on the store, which stays the caller's.
func (s *store) openKernel(cfg kernel.Config) (*kernel.World, error) {
	return kernel.Open(kernel.Stores{CAS: s.guard, Journal: s.db.Journal()}, cfg)
}

func (s *store) close() error { return s.db.Close() }
