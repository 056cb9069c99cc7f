package kernel

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
)

// Page sizes of a cell listing.
const (
	// DefaultCellPage is the page size of a listing that asks for none.
	DefaultCellPage = 100
	// MaxCellPage is the largest page one listing may ask for; more is
	// refused (ErrInvalid), not clamped.
	MaxCellPage = 10_000
)

// CellPage is one page of a workflow's cells (`aosd cells ls`).
type CellPage struct {
	Cells []CellInfo
	// Next is the cursor to pass as after for the following page; empty on
	// the last page.
	Next string
}

// pageArgs checks a page request's size (0: DefaultCellPage) and cursor.
func pageArgs(limit int, after string) (int, *schemas.Hash, error) {
	switch {
	case limit == 0:
		limit = DefaultCellPage
	case limit < 0 || limit > MaxCellPage:
		return 0, nil, fmt.Errorf("%w: limit: %d is not a page size (1..%d)", ErrInvalid, limit, MaxCellPage)
	}
	from, err := ParseCellCursor(after)
	return limit, from, err
}

// ParseCellCursor reads a page cursor: the Next of an earlier page (64 hex
// digits, the key hash of that page's last row). "" is the start (nil).
func ParseCellCursor(s string) (*schemas.Hash, error) {
	if s == "" {
		return nil, nil
	}
	var h schemas.Hash
	if len(s) != 2*len(h) {
		return nil, fmt.Errorf("%w: after: cursor %q is not a cell cursor (64 hex digits, the next of an earlier page)", ErrInvalid, s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return nil, fmt.Errorf("%w: after: cursor %q is not a cell cursor (64 hex digits, the next of an earlier page)", ErrInvalid, s)
	}
	return &h, nil
}

// cellCursor is the cursor that continues after the row with key hash kh.
func cellCursor(kh schemas.Hash) string { return hex.EncodeToString(kh[:]) }

// CellPage lists at most limit rows of a workflow (DefaultCellPage when
// limit is 0; more than MaxCellPage is ErrInvalid) in key-hash order,
// starting strictly after the cursor after ("" for the first page).
//
// The rows are the workflow's cells and, in the same order, its instances
// that are not at rest but have no cell (failed on their first event, or
// waiting before their first state), with a zero state hash. One cursor
// covers both, so paging through with no writes in between returns every
// row exactly once.
//
// The cells are read off the loop (cells.Head.Page: the head's lock is held
// only to copy at most limit+1 delta entries, never while index nodes are
// read from the store); the loop is visited twice, to find the workflow's
// head (after every request queued before the listing) and to find the
// instances among and between the page's cells, which costs O(log instances
// + instances on the page) there: nothing per cell. Merging and rendering
// rows happens off the loop too. So a listing holds the loop for
// microseconds and the head for one page's copy of the delta, whatever the
// number of cells. Under concurrent writes each row was true at some instant
// during the call.
func (w *World) CellPage(ctx context.Context, workflow, after string, limit int) (*CellPage, error) {
	limit, from, err := pageArgs(limit, after)
	if err != nil {
		return nil, err
	}
	var head *cells.Head
	var qerr error
	err = w.do(ctx, func(st *state) {
		rt := st.wfs[workflow]
		if rt == nil {
			qerr = fmt.Errorf("%w: unknown workflow %q", ErrInvalid, workflow)
			return
		}
		head = rt.head
	})
	if err == nil {
		err = qerr
	}
	if err != nil {
		return nil, err
	}
	// One row more than the page tells whether another page follows.
	es, err := head.Page(from, limit+1)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: read cells: %w", workflow, err)
	}
	khs := make([]schemas.Hash, len(es))
	for i := range es {
		khs[i] = cells.KeyHash(es[i].Key)
	}
	var insts []cellRow
	if err := w.do(ctx, func(st *state) {
		insts = st.pageInstances(workflow, from, khs, limit+1)
	}); err != nil {
		return nil, err
	}
	// Merging rows happens here, off the loop (and rendering them as JSON,
	// the costly part, in the daemon).
	rows := mergeRows(khs, insts, limit+1)
	page := &CellPage{Cells: make([]CellInfo, 0, min(len(rows), limit))}
	for _, r := range rows[:min(len(rows), limit)] {
		ci := CellInfo{Status: r.status, Reason: r.reason, Pin: r.pin, PinReason: r.pinWhy}
		if r.cell >= 0 {
			e := &es[r.cell]
			ci.Key, ci.StateHash, ci.Size, ci.LastActive = e.Key, e.StateHash, e.Size, e.LastActive
		} else {
			ci.Key = r.key
		}
		page.Cells = append(page.Cells, ci)
	}
	if len(rows) > limit {
		page.Next = cellCursor(rows[limit-1].kh)
	}
	return page, nil
}

// Cells lists the rows of a workflow as CellPage does, all of them (limit 0)
// or the first limit, fetching them a page of MaxCellPage at a time so the
// loop is never held for more than one page.
func (w *World) Cells(ctx context.Context, workflow string, limit int) ([]CellInfo, error) {
	var out []CellInfo
	after := ""
	for {
		n := MaxCellPage
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		p, err := w.CellPage(ctx, workflow, after, n)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Cells...)
		if p.Next == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		after = p.Next
	}
}

// cellRow is a listing row as the loop sees it: a cell (index into the
// entries read) or an instance without one (its key), its status, and its
// key hash.
type cellRow struct {
	kh     schemas.Hash
	cell   int    // index in the cells read; -1 for an instance without a cell
	key    []byte // the instance's key, when cell is -1
	status string
	reason string
	pin    string // the older manifest it is pinned to ("" on the current one)
	pinWhy string
}

// pageInstances returns, in key-hash order, the workflow's listed
// instances after from that a page of the cells khs (sorted, all after from,
// read from the head just before) needs: those among the cells, to give them
// their status, and those without a cell that are not at rest, which are rows
// of their own. When khs holds n cells the page ends at or before the last,
// so instances past it are not needed; nor are more than n without a cell.
// Cost on the loop: O(log instances + k log n) for the k instances visited,
// with no allocation per cell.
func (st *state) pageInstances(workflow string, from *schemas.Hash, khs []schemas.Hash, n int) []cellRow {
	list := st.listed[workflow]
	if list == nil {
		return nil
	}
	var out []cellRow
	extra := 0
	full := len(khs) >= n
	list.Ascend(from, func(kh schemas.Hash, in *instance) bool {
		if full && bytes.Compare(kh[:], khs[len(khs)-1][:]) > 0 {
			return false
		}
		if j, ok := slices.BinarySearchFunc(khs, kh, compareHash); ok {
			out = append(out, cellRow{kh: kh, cell: j, status: in.status(), reason: in.reason, pin: st.pinText(in), pinWhy: in.pinWhy})
		} else if s := in.status(); s != StatusCompleted {
			out = append(out, cellRow{kh: kh, cell: -1, key: in.key, status: s, reason: in.reason, pin: st.pinText(in), pinWhy: in.pinWhy})
			extra++
		}
		return extra < n
	})
	return out
}

// mergeRows merges the cells khs with the instances pageInstances found, in
// key-hash order, up to n rows: a cell with an instance takes its status, a
// cell without one is completed.
func mergeRows(khs []schemas.Hash, insts []cellRow, n int) []cellRow {
	rows := make([]cellRow, 0, min(n, len(khs)+len(insts)))
	i, j := 0, 0
	for len(rows) < n {
		hasCell, hasInst := j < len(khs), i < len(insts)
		switch {
		case hasInst && (!hasCell || bytes.Compare(insts[i].kh[:], khs[j][:]) <= 0):
			if insts[i].cell >= 0 { // the instance of cell j
				j++
			}
			rows = append(rows, insts[i])
			i++
		case hasCell:
			rows = append(rows, cellRow{kh: khs[j], cell: j, status: StatusCompleted})
			j++
		default:
			return rows
		}
	}
	return rows
}

func compareHash(a, b schemas.Hash) int { return bytes.Compare(a[:], b[:]) }

// instanceLists holds the instance table again, per workflow, in key-hash
// order (the order of cell listings), so a page of cells finds the
// instances among its rows, and those without a cell, without a scan of the
// table. The table's only insertion and removal (state.instance, settle)
// keep it exact.
type instanceLists map[string]*cells.Ordered[*instance]

// listInstance enters a new table instance into its workflow's list.
func (st *state) listInstance(in *instance) {
	in.kh = cells.KeyHash(in.key)
	if st.listed == nil {
		st.listed = instanceLists{}
	}
	l := st.listed[in.wf]
	if l == nil {
		l = &cells.Ordered[*instance]{}
		st.listed[in.wf] = l
	}
	l.Set(in.kh, in)
}

// unlistInstance removes an instance leaving the table. The emptied list is
// kept: the table of a workflow typically fills and empties on every event.
func (st *state) unlistInstance(in *instance) {
	if l := st.listed[in.wf]; l != nil {
		l.Delete(in.kh)
	}
}

// InstancePage lists at most limit rows of a workflow's instances that are
// not at rest and whose status is one of statuses (running, waiting,
// failed, parked), in key-hash order after the cursor after, as CellPage shows them
// (a row's cell fields are zero when the instance has no cell). It walks the
// instance list on the loop, O(log instances + rows visited), never the
// cells: the rows of a status filter without completed are found among the
// instances alone. Next is set when more instances follow.
func (w *World) InstancePage(ctx context.Context, workflow, after string, limit int, statuses []string) (*CellPage, error) {
	return w.instancePage(ctx, workflow, after, limit, func(in *instance, status string) bool {
		return slices.Contains(statuses, status)
	})
}

// PinnedPage lists at most limit rows of a workflow's instances pinned to
// the live manifest pin, whatever their status (those at rest that stay
// pinned included), and, when statuses is not empty, with one of those
// statuses, in key-hash order after the cursor after, as InstancePage does.
// A pinned instance is always in the instance table, so this walks the
// instance list alone, O(log instances + instances visited), never the
// cells. A hash that is no live manifest's lists nothing.
func (w *World) PinnedPage(ctx context.Context, workflow string, pin schemas.Hash, after string, limit int, statuses []string) (*CellPage, error) {
	return w.instancePage(ctx, workflow, after, limit, func(in *instance, status string) bool {
		return in.pin != nil && in.pin.m.Hash == pin && (len(statuses) == 0 || slices.Contains(statuses, status))
	})
}

// instancePage lists the workflow's listed instances that keep takes.
func (w *World) instancePage(ctx context.Context, workflow, after string, limit int, keep func(in *instance, status string) bool) (*CellPage, error) {
	limit, from, err := pageArgs(limit, after)
	if err != nil {
		return nil, err
	}
	var head *cells.Head
	var rows []cellRow
	var qerr error
	err = w.do(ctx, func(st *state) {
		rt := st.wfs[workflow]
		if rt == nil {
			qerr = fmt.Errorf("%w: unknown workflow %q", ErrInvalid, workflow)
			return
		}
		head = rt.head
		list := st.listed[workflow]
		if list == nil {
			return
		}
		list.Ascend(from, func(kh schemas.Hash, in *instance) bool {
			if s := in.status(); keep(in, s) {
				rows = append(rows, cellRow{kh: kh, cell: -1, key: in.key, status: s, reason: in.reason, pin: st.pinText(in), pinWhy: in.pinWhy})
			}
			return len(rows) <= limit
		})
	})
	if err == nil {
		err = qerr
	}
	if err != nil {
		return nil, err
	}
	page := &CellPage{Cells: make([]CellInfo, 0, min(len(rows), limit))}
	for _, r := range rows[:min(len(rows), limit)] {
		ci := CellInfo{Key: r.key, Status: r.status, Reason: r.reason, Pin: r.pin, PinReason: r.pinWhy}
		e, ok, err := head.Lookup(r.key)
		if err != nil {
			return nil, fmt.Errorf("workflow %s: read cell %s: %w", workflow, keyText(r.key), err)
		}
		if ok {
			ci.StateHash, ci.Size, ci.LastActive = e.StateHash, e.Size, e.LastActive
		}
		page.Cells = append(page.Cells, ci)
	}
	if len(rows) > limit {
		page.Next = cellCursor(rows[limit-1].kh)
	}
	return page, nil
}
