package wasm

import "context"

// NewEngineStoppedByWazero is NewEngine with wazero's
// WithCloseOnContextDone instead of the host's interrupt checks, for a
// benchmark to compare.
func NewEngineStoppedByWazero(ctx context.Context, cfg Config) (*Engine, error) {
	return newEngine(ctx, cfg, stopByWazero)
}

// NewEngineNeverStopped is NewEngine with no way for a deadline to stop a
// guest, for a benchmark to price the interrupt checks.
func NewEngineNeverStopped(ctx context.Context, cfg Config) (*Engine, error) {
	return newEngine(ctx, cfg, stopNever)
}

// SameCode reports whether two Modules run the same compiled code.
func SameCode(a, b *Module) bool { return a.s.c == b.s.c }

// WallStandIn is what the guest's wall clock reads.
const WallStandIn = wallStandIn

// CompiledCount is how many compiled modules e holds.
func CompiledCount(e *Engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.compiled)
}
