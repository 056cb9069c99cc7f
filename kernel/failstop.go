package kernel

import (
	"errors"
	"fmt"
)

// ErrStorage marks a failure of the store under the world (a CAS read or
// write, a journal append). The world stops on it: it is not the workflow's
// doing, so no fault is journaled, and nothing not yet durable is
// acknowledged. Errors wrapping it also wrap ErrBroken.
var ErrStorage = errors.New("kernel: storage failed")

// stop records a storage failure met on the loop. The step or request that
// met it returns at once; the loop then discards the turn's records (some of
// them may describe a state the store did not take), answers every request
// of the turn with the error, and refuses all later work. Reopening the
// world replays the journal, which holds only what was acknowledged or at
// least durable, so nothing acknowledged is lost.
func (st *state) stop(what string, err error) {
	if st.stopped == nil {
		st.stopped = fmt.Errorf("%w: %s: %w", ErrStorage, what, err)
	}
}

// halt makes the world refuse all further work with err (a storage failure)
// and logs the cause once.
func (w *World) halt(err error) {
	if w.broken.CompareAndSwap(nil, &err) {
		w.cfg.Logger.Error("storage failed; the world stopped and accepts no work until it is reopened", "err", err)
	}
}
