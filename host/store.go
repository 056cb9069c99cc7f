package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules/wasm"
)

// store is a world's store as a Host opens it. It is the one place the host
// names the storage engines: a Badger directory (the default), or a
// PostgreSQL schema (a world whose directory holds postgres.json). The
// built-in executors share its CAS, and the kernel opens on its two ports.
// It is also where the host makes the world's wasm engine, which the kernel
// is handed (it names none), and where the world's files live (files: the
// token, the executor key, the trusted keys).
//
// Every CAS write of the world (the kernel's and the blob executor's) goes
// through one cas.Guard, so a garbage collection running beside the world
// spares what they write.
type store struct {
	bdb *badgerdb.DB // a Badger world's; nil on PostgreSQL
	pg  *pgStore     // a PostgreSQL world's; nil on Badger

	log   kernel.Log // the journal port
	raw   cas.Store  // the CAS as the engine gives it
	guard *cas.Guard
	files files

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
	// badgerdb.DefaultDiskReserve (docs/limits.md, "A full disk"). A world
	// on PostgreSQL has no disk of its own: it does not apply.
	DiskReserve int64
	// LeaseTTL is how long this node's lease on a world on PostgreSQL lasts
	// unless renewed (default DefaultLeaseTTL); the owner renews it every
	// third of it. It bounds how soon another node may take the world from
	// an owner that died; it never decides safety (pgdb fences every write).
	LeaseTTL time.Duration
	// Advertise is the address the lease names for this node (where other
	// nodes and clients reach its API); default: the address it serves on.
	Advertise string
	// NodeLocked says the caller holds the node directory's lock already
	// (RunNode holds it for the node's whole life, standby or owner), so
	// opening the world as owner does not take it again.
	NodeLocked bool
}

// files is where a world keeps its small named files: the API token, the
// executor key and the trusted executor keys. A Badger world keeps them in
// its directory (dirFiles), a world on PostgreSQL in its database
// (pgFiles); the rest of host and api do not care which.
type files interface {
	// read returns the file's bytes; a file never written is an error
	// that errors.Is(err, fs.ErrNotExist).
	read(name string) ([]byte, error)
	// write replaces the file atomically and durably.
	write(name string, data []byte) error
	// where names the file for messages: a path, or the database.
	where(name string) string
}

// dirFiles are a Badger world's files: its directory's.
type dirFiles Dir

func (f dirFiles) read(name string) ([]byte, error) { return os.ReadFile(Dir(f).Path(name)) }

// write writes a new file beside the old one, syncs it, renames it over the
// old one and syncs the directory, mode 0600.
func (f dirFiles) write(name string, data []byte) error {
	d := Dir(f)
	tmp := d.Path(name + ".tmp")
	os.Remove(tmp)
	if err := writeNew(tmp, data); err != nil {
		return err
	}
	if err := os.Rename(tmp, d.Path(name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", d.Path(name), err)
	}
	return syncDir(string(d))
}

func (f dirFiles) where(name string) string { return Dir(f).Path(name) }

// openStore opens the store of the world in d as its owner. A Badger store
// another process holds is badgerdb.ErrLocked, with a hint at who; a world
// on PostgreSQL another node owns is ErrOwnedElsewhere, naming it.
func openStore(d Dir, so StoreOptions, log *slog.Logger) (*store, error) {
	s, err := openStoreAs(d, so, roleOwner, log)
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("open world %s: %w (another process, perhaps aosd serve, holds it)", d, err)
		}
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	return s, nil
}

// openStoreAs opens the store of the world in d: its Badger directory, or
// its PostgreSQL schema (as owner or reader, r; a Badger store is always
// opened whole, by one process).
func openStoreAs(d Dir, so StoreOptions, r role, log *slog.Logger) (*store, error) {
	pc, err := d.Postgres()
	if err != nil {
		return nil, err
	}
	if pc == nil {
		return openStoreAt(d.Store(), so)
	}
	pg, err := openPostgres(d, pc, "", so, r, log)
	if err != nil {
		return nil, err
	}
	return pgStoreOf(pg), nil
}

// pgStoreOf is the store of a world on PostgreSQL: the ports pgdb gives
// for pg's lease (none for a reader).
func pgStoreOf(pg *pgStore) *store {
	raw := pg.db.CAS(pg.lease)
	return &store{pg: pg, log: pg.j, raw: raw, guard: cas.NewGuard(raw), files: pgFiles{pg}}
}

// openStoreAt opens the Badger store directory at path (its world's files
// are the directory's, path's parent).
func openStoreAt(path string, so StoreOptions) (*store, error) {
	db, err := badgerdb.OpenWith(path, badgerdb.Options{DiskReserve: so.DiskReserve})
	if err != nil {
		return nil, err
	}
	return &store{bdb: db, log: db.Journal(), raw: db.CAS(), guard: cas.NewGuard(db.CAS()), files: dirFiles(Dir(filepath.Dir(path)))}, nil
}

// isLocked says whether err is a store held by another process.
func isLocked(err error) bool {
	return errors.Is(err, badgerdb.ErrLocked) || errors.Is(err, ErrNodeLocked)
}

// wasmCache is where the world in d keeps compiled wasm code.
func (so StoreOptions) wasmCache(d Dir) string {
	if so.WasmCacheDir != "" {
		return so.WasmCacheDir
	}
	return d.Path(WasmCacheDir)
}

// openWorld opens the store of the world in d (as r) and the world on it,
// and returns the configuration it runs with (openKernel). The caller
// closes the world, then the store.
func openWorld(d Dir, cfg kernel.Config, so StoreOptions, r role) (*kernel.World, *store, kernel.Config, error) {
	s, err := openStoreAs(d, so, r, cfg.Logger)
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
	w, err := kernel.Open(kernel.Stores{CAS: s.guard, Journal: s.log}, cfg)
	return w, cfg, err
}

// close closes the store and the engine it made; every world on it must be
// closed first.
func (s *store) close() error {
	var err error
	if s.bdb != nil {
		err = s.bdb.Close()
	} else {
		err = s.pg.close()
	}
	if s.engine != nil {
		err = errors.Join(err, s.engine.Close(context.Background()))
	}
	return err
}
