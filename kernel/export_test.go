package kernel

import (
	"context"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// TraceUnfiltered and TraceIntentUnfiltered are Trace and TraceIntent
// decoding every record: what the byte prefilter must not change.
func (w *World) TraceUnfiltered(ctx context.Context, workflow string, key []byte) ([]TraceEntry, error) {
	_, match := instanceFilters(workflow, key)
	return w.trace(ctx, func(journal.Kind, []byte) bool { return true }, match)
}

func (w *World) TraceIntentUnfiltered(ctx context.Context, h schemas.Hash) ([]TraceEntry, error) {
	_, match := intentFilters(h)
	return w.trace(ctx, func(journal.Kind, []byte) bool { return true }, match)
}
