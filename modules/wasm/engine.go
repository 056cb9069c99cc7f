package wasm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// Defaults of Config and of a module's memory limit.
const (
	DefaultMaxResultBytes = 4 << 20
	DefaultStderrTail     = 2048
	DefaultMaxMemoryMiB   = 256
)

// wasm32MaxMiB is all a wasm32 memory can address: 65536 pages of 64 KiB.
const wasm32MaxMiB = 4096

// ErrClosed reports use of an Engine or Module after Close.
var ErrClosed = errors.New("wasm: closed")

// Config configures an Engine. The zero value is usable.
type Config struct {
	// CacheDir holds compiled code across processes
	// (wazero.NewCompilationCacheWithDir); "" keeps it in memory only.
	CacheDir string
	// MaxResultBytes caps a guest's result buffer (default 4 MiB); a larger
	// result is a business fault.
	MaxResultBytes int
	// StderrTail is how many bytes of a step's stdout and of its stderr the
	// host keeps for a fault's reason (default 2048 each; the first and the
	// last half).
	StderrTail int
}

func (c Config) withDefaults() Config {
	if c.MaxResultBytes <= 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.StderrTail <= 0 {
		c.StderrTail = DefaultStderrTail
	}
	return c
}

// Engine compiles modules and keeps their compiled code, shared by every
// Module of the same code and memory limit. One per world. Safe for
// concurrent use.
type Engine struct {
	cfg   Config
	cache wazero.CompilationCache
	stop  stopper // how a done context stops a running guest

	// spares stops the Modules' spares (see startSpare) when the engine
	// closes; spareWG waits for them.
	spares     context.Context
	stopSpares context.CancelFunc
	spareWG    sync.WaitGroup // Add under mu, before closed is set

	mu       sync.Mutex
	closed   bool
	runtimes map[uint32]wazero.Runtime // by memory limit, in pages; see runtimeLocked
	compiled map[compileKey]*compiled
}

var _ modules.Compiler = (*Engine)(nil)

type compileKey struct {
	hash  string
	pages uint32
}

// compiled is one module's compiled code, shared by the Modules made from
// it and released when the last of them closes.
type compiled struct {
	key   compileKey
	ready chan struct{} // closed once code or err is set
	err   error
	code  wazero.CompiledModule
	rt    wazero.Runtime
	init  bool // exports _initialize
	refs  int  // Modules using it; guarded by Engine.mu
}

// stopper is how a done context stops a running guest.
type stopper uint8

const (
	// stopByInterrupt instruments every module with an interrupt check
	// (see interruptExport), which the host sets when the context is done.
	stopByInterrupt stopper = iota
	// stopByWazero is wazero's WithCloseOnContextDone. Only benchmarks use
	// it, to compare.
	stopByWazero
	// stopNever runs modules as they are: a deadline cannot stop them.
	// Only benchmarks use it, to price the interrupt checks.
	stopNever
)

// NewEngine returns an engine with the given configuration.
func NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	return newEngine(ctx, cfg, stopByInterrupt)
}

func newEngine(_ context.Context, cfg Config, stop stopper) (*Engine, error) {
	cfg = cfg.withDefaults()
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("wasm: compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	spares, stopSpares := context.WithCancel(context.Background())
	return &Engine{
		spares:     spares,
		stopSpares: stopSpares,
		cfg:        cfg,
		cache:      cache,
		stop:       stop,
		runtimes:   map[uint32]wazero.Runtime{},
		compiled:   map[compileKey]*compiled{},
	}, nil
}

// Close releases every runtime, instance and compiled module. Modules made
// by the engine fail after it.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	rts := e.runtimes
	e.runtimes, e.compiled = nil, nil
	e.mu.Unlock()
	e.stopSpares()
	e.spareWG.Wait() // no spare runs on a runtime being closed
	var errs []error
	for _, rt := range rts {
		errs = append(errs, rt.Close(ctx)) // closes its instances
	}
	errs = append(errs, e.cache.Close(ctx)) // and this all compiled code
	return errors.Join(errs...)
}

// spareStarted registers a spare's goroutine, returning the context that
// stops it when the engine closes; false if the engine is closed.
func (e *Engine) spareStarted() (context.Context, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, false
	}
	e.spareWG.Add(1)
	return e.spares, true
}

// Compile implements modules.Compiler: it returns a *Module.
func (e *Engine) Compile(ctx context.Context, name, hash string, code []byte, maxMemoryMiB uint32) (modules.Runner, error) {
	m, err := e.CompileModule(ctx, name, hash, code, maxMemoryMiB)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CompileModule validates code against the module ABI (docs/wasm-abi.md)
// and compiles it for a memory limit of maxMemoryMiB (0: 256 MiB). Code is
// compiled once per hash and limit: compiling the same again returns a new
// Module on the same compiled code, at once. hash must identify code (the
// kernel passes the artifact's sha256). Errors name the module and what in
// it breaks the ABI.
func (e *Engine) CompileModule(ctx context.Context, name, hash string, code []byte, maxMemoryMiB uint32) (*Module, error) {
	if maxMemoryMiB == 0 {
		maxMemoryMiB = DefaultMaxMemoryMiB
	}
	if maxMemoryMiB > wasm32MaxMiB {
		return nil, fmt.Errorf("wasm module %s: memory limit %d MiB is over the %d MiB a wasm32 memory can address",
			name, maxMemoryMiB, wasm32MaxMiB)
	}
	if hash == "" {
		hash = schemas.HashBytes(code).String()
	}
	key := compileKey{hash: hash, pages: maxMemoryMiB * 16}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	// Every caller holds a reference to c from here on, so closing the last
	// Module of the same code meanwhile does not release it.
	c, ok := e.compiled[key]
	if ok {
		c.refs++
		e.mu.Unlock()
	} else {
		rt, err := e.runtimeLocked(ctx, key.pages)
		if err != nil {
			e.mu.Unlock()
			return nil, err
		}
		c = &compiled{key: key, ready: make(chan struct{}), rt: rt, refs: 1}
		e.compiled[key] = c
		e.mu.Unlock()
		code, init, err := compileChecked(ctx, rt, name, code, e.stop == stopByInterrupt)
		e.mu.Lock()
		c.code, c.init, c.err = code, init, err
		if err != nil && e.compiled[key] == c {
			delete(e.compiled, key) // a failure is not cached: the next try compiles again
		}
		e.mu.Unlock()
		close(c.ready)
	}

	select {
	case <-c.ready:
	case <-ctx.Done():
		e.release(c)
		return nil, ctx.Err()
	}
	if c.err != nil {
		e.release(c)
		return nil, c.err
	}
	return newModule(e, name, c), nil
}

// runtimeLocked returns the runtime for a memory limit, making it on first
// use: wazero sets the limit per runtime. Each has the host's WASI module in
// it, and all share the engine's compilation cache, so code compiled for
// one limit is not compiled again for another. e.mu is held.
func (e *Engine) runtimeLocked(ctx context.Context, pages uint32) (wazero.Runtime, error) {
	if r, ok := e.runtimes[pages]; ok {
		return r, nil
	}
	cfg := wazero.NewRuntimeConfig() // the compiler where the platform has one
	cfg = cfg.WithCompilationCache(e.cache)
	cfg = cfg.WithMemoryLimitPages(pages)
	cfg = cfg.WithCloseOnContextDone(e.stop == stopByWazero)
	cfg = cfg.WithDebugInfoEnabled(false) // a trap's reason has its first line only
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateWASI(ctx, r); err != nil {
		_ = r.Close(ctx)
		return nil, fmt.Errorf("wasm: host WASI module: %w", err)
	}
	e.runtimes[pages] = r
	return r, nil
}

// release drops one Module's hold on compiled code, closing the code when
// no Module holds it.
func (e *Engine) release(c *compiled) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c.refs--
	if c.refs > 0 || e.closed {
		return
	}
	if e.compiled[c.key] == c {
		delete(e.compiled, c.key)
	}
	if c.code != nil {
		_ = c.code.Close(context.Background())
	}
}

// newModule wraps compiled code in a Module. A Module dropped without Close
// is closed when it is collected, so an abandoned one does not keep its
// instance and code forever.
func newModule(e *Engine, name string, c *compiled) *Module {
	s := &moduleState{
		eng:    e,
		name:   name,
		c:      c,
		stdout: newCapture(e.cfg.StderrTail),
		stderr: newCapture(e.cfg.StderrTail),
	}
	m := &Module{s: s}
	m.cleanup = runtime.AddCleanup(m, func(s *moduleState) { s.close() }, s)
	return m
}
