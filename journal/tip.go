package journal

import (
	"context"
	"sync"
)

// Tip is the durable end of a journal and the readers waiting for it to
// move. Every backend keeps one: it calls Advance only after a frame is
// durable, so Height and Wait never show a record that could still be lost.
// The zero Tip is a journal of height 0.
type Tip struct {
	mu      sync.Mutex
	height  uint64        // last durable seq
	changed chan struct{} // closed and replaced on every height change
}

// Height is the last durable sequence number, 0 when the journal is empty.
func (t *Tip) Height() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.height
}

// Advance moves the height to h and wakes every Wait.
func (t *Tip) Advance(h uint64) {
	t.mu.Lock()
	t.height = h
	if t.changed != nil {
		close(t.changed)
		t.changed = nil // the next Wait makes a fresh channel
	}
	t.mu.Unlock()
}

// Wait blocks until Height() > after, returning the new height, or until ctx
// is done, returning ctx.Err(). It sleeps on a channel that Advance closes;
// there is no polling.
func (t *Tip) Wait(ctx context.Context, after uint64) (uint64, error) {
	for {
		t.mu.Lock()
		h := t.height
		if t.changed == nil {
			t.changed = make(chan struct{})
		}
		ch := t.changed
		t.mu.Unlock()
		if h > after {
			return h, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return h, ctx.Err()
		}
	}
}
