package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/kernel"
)

// cellsWorld is tallyWorld with n keys: every tenth failed on its first
// event (so it has no cell and is listed without one), the rest cells.
func cellsWorld(t *testing.T, n int) *served {
	t.Helper()
	s, _ := tallyWorld(t)
	var evs []kernel.Event
	for i := range n {
		by := 1
		if i%10 == 0 {
			by = 13
		}
		evs = append(evs, kernel.Event{Schema: "t/Add@1", JSON: json.RawMessage(fmt.Sprintf(`{"key":"t-%03d","by":%d}`, i, by))})
	}
	if _, err := s.w.Submit(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	return s
}

type pageBody struct {
	Cells []api.CellInfo `json:"cells"`
	Next  *string        `json:"next"`
}

func decodePage(t *testing.T, body string) pageBody {
	t.Helper()
	var p pageBody
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("page %s: %v", body, err)
	}
	return p
}

// TestCellsPageLimits: GET /v1/cells/{workflow} answers kernel.DefaultCellPage
// rows and a next cursor when no limit is given, everything (and no next
// field) with the maximum limit, and refuses a limit over the maximum, a
// negative or non-numeric limit, and a cursor that is not one with 400
// invalid_input naming the parameter, journaling nothing.
func TestCellsPageLimits(t *testing.T) {
	s := cellsWorld(t, 250)
	path := "/v1/cells/" + url.PathEscape(tallyWF)
	code, body := s.do(t, "GET", path, "")
	p := decodePage(t, body)
	if code != 200 || len(p.Cells) != kernel.DefaultCellPage || p.Next == nil || len(*p.Next) != 64 {
		t.Fatalf("default page: %d, %d rows, next %v", code, len(p.Cells), p.Next)
	}
	code, body = s.do(t, "GET", fmt.Sprintf("%s?limit=%d", path, kernel.MaxCellPage), "")
	if p := decodePage(t, body); code != 200 || len(p.Cells) != 250 || strings.Contains(body, `"next"`) {
		t.Fatalf("largest page: %d, %d rows, %.200s", code, len(p.Cells), body)
	}
	height := s.height(t)
	for _, c := range []struct{ query, where, msg string }{
		{fmt.Sprintf("limit=%d", kernel.MaxCellPage+1), "limit", "10001 is not a page size: want 1..10000"},
		{"limit=-1", "limit", "-1 is not a page size"},
		{"limit=ten", "limit", `"ten" is not a page size`},
		{"after=nope", "after", `"nope" is not a cell cursor`},
		{"after=" + strings.Repeat("0", 65), "after", "is not a cell cursor"},
	} {
		code, body := s.do(t, "GET", path+"?"+c.query, "")
		var eb struct {
			Error api.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &eb); err != nil || code != 400 || eb.Error.Code != api.CodeInvalidInput ||
			eb.Error.Where != c.where || !strings.Contains(eb.Error.Message, c.msg) {
			t.Errorf("?%s: %d %s; want 400 invalid_input at %q saying %q", c.query, code, body, c.where, c.msg)
		}
	}
	if got := s.height(t); got != height {
		t.Fatalf("refusals journaled: height %d, was %d", got, height)
	}
	if code, body := s.do(t, "GET", "/v1/cells/nope%40x?after=nope", ""); code != 400 || !strings.Contains(body, `"where":"after"`) {
		t.Errorf("bad cursor for an unknown workflow: %d %s", code, body)
	}
}

// TestCellsPagingOverHTTP pages through a workflow with the HTTP client and
// with the in-process backend, which answer the same pages: every row once,
// failed instances without a cell included, the next page starting after
// the cursor.
func TestCellsPagingOverHTTP(t *testing.T) {
	s := cellsWorld(t, 95)
	remote := &api.Client{Base: s.url, Token: s.token}
	local := api.NewLocal(s.w, nil)
	seen := map[string]string{}
	q := api.CellsQuery{Limit: 7}
	for pages := 0; ; pages++ {
		rp, err := remote.Cells(context.Background(), tallyWF, q)
		if err != nil {
			t.Fatal(err)
		}
		lp, err := local.Cells(context.Background(), tallyWF, q)
		if err != nil {
			t.Fatal(err)
		}
		rb, _ := json.Marshal(rp)
		lb, _ := json.Marshal(lp)
		if string(rb) != string(lb) {
			t.Fatalf("page %d differs:\nhttp  %s\nlocal %s", pages, rb, lb)
		}
		for _, r := range rp.Cells {
			if _, dup := seen[string(r.Key)]; dup {
				t.Fatalf("%s listed twice", r.Key)
			}
			seen[string(r.Key)] = r.Status
		}
		if rp.Next == "" {
			break
		}
		if len(rp.Cells) != q.Limit {
			t.Fatalf("page %d: %d rows and a next", pages, len(rp.Cells))
		}
		q.After = rp.Next
	}
	failed := 0
	for _, st := range seen {
		if st == kernel.StatusFailed {
			failed++
		}
	}
	if len(seen) != 95 || failed != 10 {
		t.Fatalf("%d rows, %d failed; want 95 and 10", len(seen), failed)
	}
	var e *api.Error
	if _, err := remote.Cells(context.Background(), tallyWF, api.CellsQuery{After: "x"}); !errors.As(err, &e) || e.Status != 400 || e.Where != "after" {
		t.Fatalf("bad cursor through the client: %v", err)
	}
}
