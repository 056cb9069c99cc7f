package kernel

import "context"

// StateChecks is how many times a cell's state was validated against a
// changed state schema (schema_epoch.go), replay included.
func (w *World) StateChecks(ctx context.Context) (n uint64, err error) {
	err = w.do(ctx, func(st *state) { n = st.epochs.checked })
	return n, err
}

// CellLastActive is the LastActive of a cell: the logical time of the step
// that last wrote it.
func (w *World) CellLastActive(ctx context.Context, workflow string, key []byte) (last uint64, ok bool, err error) {
	err2 := w.do(ctx, func(st *state) {
		head := st.heads[workflow]
		if head == nil {
			return
		}
		e, found, lerr := head.Lookup(key)
		last, ok, err = e.LastActive, found, lerr
	})
	if err2 != nil {
		return 0, false, err2
	}
	return last, ok, err
}
