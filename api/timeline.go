package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/views"
)

// Timeline implements Reader: one page of a cell's timeline
// (views.Timelines), its page size and key checked here.
func (l *Local) Timeline(ctx context.Context, workflow, key string, q views.TimelineQuery) (*views.TimelinePage, error) {
	if q.Limit < 0 || q.Limit > views.MaxTimelinePage {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit",
			"%d is not a page size: want 1..%d (0 or none: %d)", q.Limit, views.MaxTimelinePage, views.DefaultTimelinePage)
	}
	k, err := l.key(workflow, key)
	if err != nil {
		return nil, err
	}
	page, err := l.timelines.Page(ctx, l.W, l.Config, workflow, k, q)
	if err != nil {
		return nil, AsError(err, fmt.Sprintf("timeline %s key %s", workflow, records.KeyJSON(k)))
	}
	return page, nil
}

// Close releases what the Local holds beside the world (the timelines'
// wasm engine); the world is its owner's to close.
func (l *Local) Close() error { return l.timelines.Close() }
