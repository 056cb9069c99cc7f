package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/schemas"
)

// Filtered cell listings (GET /v1/cells/{workflow}?status=S[,S]&key=K).
//
// A key is looked up, not searched for: the page starting just before its
// key hash holds its row first, if it has one. A status filter without
// completed pages through the instances not at rest alone
// (kernel.World.InstancePage), whatever the number of cells. A filter with
// completed must read the cells: it examines at most MaxFilteredRows rows
// per request, so a page may hold fewer rows than its limit, even none,
// and still have a next.

// MaxFilteredRows bounds the rows one filtered listing that includes
// completed examines.
const MaxFilteredRows = kernel.MaxCellPage

// cellStatuses are the statuses a listing may be filtered by.
var cellStatuses = []string{kernel.StatusRunning, kernel.StatusWaiting, kernel.StatusCompleted, kernel.StatusFailed, kernel.StatusParked}

func checkStatuses(ss []string) error {
	for _, s := range ss {
		if !slices.Contains(cellStatuses, s) {
			return newError(http.StatusBadRequest, CodeInvalidInput, "status",
				"unknown status %q (statuses: %s)", s, strings.Join(cellStatuses, ", "))
		}
	}
	return nil
}

// ParseStatuses reads status query values: repeated or comma-separated.
func ParseStatuses(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func (l *Local) filteredCells(ctx context.Context, workflow string, q CellsQuery) (*CellPage, error) {
	where := "workflow " + workflow
	keep := func(r kernel.CellInfo) bool { return len(q.Status) == 0 || slices.Contains(q.Status, r.Status) }
	if q.HasKey {
		def, err := l.workflow(workflow)
		if err != nil {
			return nil, AsError(err, where)
		}
		k, err := ParseKey(l.W.Manifest(), def, q.Key)
		if err != nil {
			return nil, AsError(err, "key")
		}
		p, err := l.W.CellPage(ctx, workflow, cursorBefore(schemas.HashBytes(k)), 1)
		if err != nil {
			return nil, AsError(err, where)
		}
		out := &CellPage{Cells: []CellInfo{}}
		if len(p.Cells) == 1 && bytes.Equal(p.Cells[0].Key, k) && keep(p.Cells[0]) {
			out.Cells = CellInfoViews(p.Cells)
		}
		return out, nil
	}
	if !slices.Contains(q.Status, kernel.StatusCompleted) {
		p, err := l.W.InstancePage(ctx, workflow, q.After, q.Limit, q.Status)
		if err != nil {
			return nil, AsError(err, where)
		}
		return CellPageView(p), nil
	}
	limit := q.Limit
	if limit == 0 {
		limit = kernel.DefaultCellPage
	}
	var rows []kernel.CellInfo
	after, examined := q.After, 0
	for {
		p, err := l.W.CellPage(ctx, workflow, after, min(limit, MaxFilteredRows-examined))
		if err != nil {
			return nil, AsError(err, where)
		}
		for i, r := range p.Cells {
			examined++
			if !keep(r) {
				continue
			}
			rows = append(rows, r)
			if len(rows) == limit {
				next := ""
				if i < len(p.Cells)-1 || p.Next != "" {
					next = cellCursorOf(r.Key)
				}
				return &CellPage{Cells: CellInfoViews(rows), Next: next}, nil
			}
		}
		if p.Next == "" || examined >= MaxFilteredRows {
			return &CellPage{Cells: CellInfoViews(rows), Next: p.Next}, nil
		}
		after = p.Next
	}
}

// pinnedCells lists the instances pinned to the manifest q.Pin: they are
// all in the instance table (pinned or not at rest), so the page is found
// among the instances alone, whatever the number of cells; a key is looked
// up among those rows.
func (l *Local) pinnedCells(ctx context.Context, workflow string, q CellsQuery) (*CellPage, error) {
	where := "workflow " + workflow
	pin, err := schemas.ParseHash(q.Pin)
	if err != nil {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "pin",
			"%q is not a manifest hash (sha256:<64 hex>; GET /v1/manifests lists the live ones): %v", q.Pin, err)
	}
	if q.HasKey {
		def, err := l.workflow(workflow)
		if err != nil {
			return nil, AsError(err, where)
		}
		k, err := ParseKey(l.W.Manifest(), def, q.Key)
		if err != nil {
			return nil, AsError(err, "key")
		}
		p, err := l.W.PinnedPage(ctx, workflow, pin, cursorBefore(schemas.HashBytes(k)), 1, q.Status)
		if err != nil {
			return nil, AsError(err, where)
		}
		out := &CellPage{Cells: []CellInfo{}}
		if len(p.Cells) == 1 && bytes.Equal(p.Cells[0].Key, k) {
			out.Cells = CellInfoViews(p.Cells)
		}
		return out, nil
	}
	p, err := l.W.PinnedPage(ctx, workflow, pin, q.After, q.Limit, q.Status)
	if err != nil {
		return nil, AsError(err, where)
	}
	return CellPageView(p), nil
}

// cellCursorOf is the listing cursor that continues after the row of key.
func cellCursorOf(key []byte) string {
	h := schemas.HashBytes(key)
	return hex.EncodeToString(h[:])
}

// cursorBefore is the listing cursor whose page starts at key hash kh: the
// hash one less ("" for the zero hash, the first page).
func cursorBefore(kh schemas.Hash) string {
	for i := len(kh) - 1; i >= 0; i-- {
		if kh[i] > 0 {
			kh[i]--
			return hex.EncodeToString(kh[:])
		}
		kh[i] = 0xff
	}
	return ""
}
