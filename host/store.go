package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules/wasm"
)

// store is a world's store as a Host opens it. It is the one place the host
// names the storage engine: the built-in executors share its CAS, and the
// kernel opens on its two ports. It is also where the host makes the
// world's wasm engine, which the kernel is handed (it names none).
//
// Every CAS write of the world (the kernel's and the blob executor's) goes
// through one cas.Guard, so a garbage collection running beside the world
// spares what they write.
type store struct {
	db    *badgerdb.DB
	guard *cas.Guard
	// engine is the wasm engine openKernel made for the world (its
	// configuration named none); closed with the store, after the world.
	engine *wasm.Engine
}

// StoreOptions are the choices about what a world keeps on disk; the zero
// value is the default.
type StoreOptions struct {
	// WasmCacheDir is where the world's wasm engine keeps compiled code
	// across restarts (default: the world directory's wasm-cache; worlds
	// may share one). It changes nothing journaled.
	WasmCacheDir string
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

// wasmCache is where the world in d keeps compiled wasm code.
func (so StoreOptions) wasmCache(d Dir) string {
	if so.WasmCacheDir != "" {
		return so.WasmCacheDir
	}
	return d.Path(WasmCacheDir)
}

// openWorld opens the store of the world in d and the world on it, and
// returns the configuration it runs with (openKernel). The caller closes
// the world, then the store.
func openWorld(d Dir, cfg kernel.Config, so StoreOptions) (*kernel.World, *store, kernel.Config, error) {
	s, err := openStoreAt(d.Store(), so)
	if err != nil {
		return nil, nil, cfg, err
	}
	w, cfg, err := s.openKernel(cfg, so.wasmCache(d))
	if err != nil {
		s.close()
		return nil, nil, cfg, err
	}
	return w, s, cfg, nil
}

// cas is the store's content-addressed half, for the built-in executors.
func (s *store) cas() cas.Store { return s.guard }

// openKernel opens the kernel on the store, which stays the caller's, and
// returns the configuration the world runs with: a configuration without a
// wasm engine is handed the store's, made on first use with its compiled
// code kept in wasmCache. Whoever opens scratch worlds beside this one
// (Local.Config: replay verification, timelines) uses that configuration,
// so they share the engine.
func (s *store) openKernel(cfg kernel.Config, wasmCache string) (*kernel.World, kernel.Config, error) {
	if cfg.Wasm == nil {
		if s.engine == nil {
			e, err := wasm.NewEngine(context.Background(), wasm.Config{CacheDir: wasmCache})
			if err != nil {
				return nil, cfg, err
			}
			s.engine = e
		}
		cfg.Wasm = s.engine
	}
	w, err := kernel.Open(kernel.Stores{CAS: s.guard, Journal: s.db.Journal()}, cfg)
	return w, cfg, err
}

// close closes the store and the engine it made; every world on it must be
// closed first.
func (s *store) close() error {
	err := s.db.Close()
	if s.engine != nil {
		err = errors.Join(err, s.engine.Close(context.Background()))
	}
	return err
}
