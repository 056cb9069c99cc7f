package main

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// pagedBackend answers Cells with pages of its rows and records each query.
type pagedBackend struct {
	api.Backend
	rows    int
	queries []api.CellsQuery
}

func (b *pagedBackend) Cells(_ context.Context, _ string, q api.CellsQuery) (*api.CellPage, error) {
	b.queries = append(b.queries, q)
	start := 0
	if q.After != "" {
		fmt.Sscanf(q.After, "%d", &start)
	}
	size := q.Limit
	if size == 0 {
		size = kernel.DefaultCellPage
	}
	p := &api.CellPage{}
	for i := start; i < min(start+size, b.rows); i++ {
		p.Cells = append(p.Cells, api.CellInfo{Key: []byte(fmt.Sprint(i))})
	}
	if start+size < b.rows {
		p.Next = fmt.Sprint(start + size)
	}
	return p, nil
}

// TestListCellsAll: --all asks for pages of the largest size unless --limit
// says otherwise, follows each next from the given cursor until a page has
// none, and returns every row without a cursor; without --all one query is
// passed through as given.
func TestListCellsAll(t *testing.T) {
	b := &pagedBackend{rows: 2*kernel.MaxCellPage + 5}
	c := &host.Conn{Backend: b}
	p, err := listCells(context.Background(), c, "wf", api.CellsQuery{}, true)
	if err != nil || len(p.Cells) != b.rows || p.Next != "" || len(b.queries) != 3 {
		t.Fatalf("--all: %d rows, next %q, %d queries, %v", len(p.Cells), p.Next, len(b.queries), err)
	}
	for i, q := range b.queries {
		if q.Limit != kernel.MaxCellPage || (i > 0 && q.After != fmt.Sprint(i*kernel.MaxCellPage)) {
			t.Fatalf("query %d: %+v", i, q)
		}
	}
	b.queries = nil
	p, err = listCells(context.Background(), c, "wf", api.CellsQuery{Limit: 7, After: "20000"}, true)
	if err != nil || len(p.Cells) != 5 || len(b.queries) != 1 || !reflect.DeepEqual(b.queries[0], api.CellsQuery{Limit: 7, After: "20000"}) {
		t.Fatalf("--all --limit 7 --after: %d rows, queries %+v, %v", len(p.Cells), b.queries, err)
	}
	b.queries = nil
	p, err = listCells(context.Background(), c, "wf", api.CellsQuery{Limit: 3}, false)
	if err != nil || len(p.Cells) != 3 || p.Next != "3" || len(b.queries) != 1 {
		t.Fatalf("one page: %d rows, next %q, queries %+v, %v", len(p.Cells), p.Next, b.queries, err)
	}
}
