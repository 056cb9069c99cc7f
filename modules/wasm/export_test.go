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

// Instantiations reports how many of m's instances were adopted from a
// spare built in the background and how many were built inline by a Step.
func Instantiations(m *Module) (adopted, inline int) { return m.s.adopted, m.s.inline }

// SpareDone is closed when m's spare's goroutine has ended; nil if m has
// no spare.
func SpareDone(m *Module) <-chan struct{} {
	if m.s.spare == nil {
		return nil
	}
	return m.s.spare.done
}

// StartSpare starts building m's next instance in the background, as Reset
// does for a warm module, so that tests reach the spare path with guests
// that never get warm.
func StartSpare(m *Module) {
	m.s.dropSpare()
	m.s.startSpare()
}

// DropSpare stops and discards m's spare, so that the next Step
// instantiates inline, as before spares.
func DropSpare(m *Module) { m.s.dropSpare() }
