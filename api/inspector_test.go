package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// TestTimelineStateUnavailable: a state that no store keeps and that
// cannot be recomputed (the server runs without the builtins the world's
// manifest binds) is unavailable, with the reason, never invented; the
// step after it, whose state is the cell's live one, has its state and no
// diff (its start is not known).
func TestTimelineStateUnavailable(t *testing.T) {
	s, _ := tallyWorld(t) // its Local has no Config: no builtins to replay with
	for _, by := range []int{2, 3} {
		if _, err := s.w.Submit(context.Background(), kernel.Event{Schema: "t/Add@1", JSON: json.RawMessage(fmt.Sprintf(`{"key":"a","by":%d}`, by))}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := s.do(t, "GET", "/v1/timeline/"+url.PathEscape(tallyWF)+"/a", "")
	var tl timelineBody
	if code != 200 || json.Unmarshal([]byte(body), &tl) != nil {
		t.Fatalf("timeline: %d %s", code, body)
	}
	st := stepEntries(tl.Entries)
	if len(st) != 2 {
		t.Fatalf("%d steps: %s", len(st), body)
	}
	first, second := st[0], st[1]
	if first.StateSource != views.StateUnavailable || !strings.Contains(first.StateReason, "builtin") || first.State != nil || first.Diff != nil {
		t.Errorf("first step: source %q reason %q state %s diff %s; want unavailable, naming the builtin, no state, no diff",
			first.StateSource, first.StateReason, first.State, first.Diff)
	}
	if second.StateSource != views.StateFromLive || string(second.State) != `{"n":5}` || second.Diff != nil {
		t.Errorf("second step: source %q state %s diff %s; want live {\"n\":5} and no diff", second.StateSource, second.State, second.Diff)
	}
}

// cellsPages pages through a filtered listing, checking each page's size.
func cellsPages(t *testing.T, s *served, query string, limit int) (rows []api.CellInfo, pages int) {
	t.Helper()
	after := ""
	for {
		q := fmt.Sprintf("%s&limit=%d", query, limit)
		if after != "" {
			q += "&after=" + after
		}
		code, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+"?"+q, "")
		if code != 200 {
			t.Fatalf("?%s: %d %s", q, code, body)
		}
		p := decodePage(t, body)
		if len(p.Cells) > limit {
			t.Fatalf("?%s: %d rows over the limit", q, len(p.Cells))
		}
		rows, pages = append(rows, p.Cells...), pages+1
		if p.Next == nil {
			return rows, pages
		}
		after = *p.Next
	}
}

func keysOf(rows []api.CellInfo) []string {
	var out []string
	for _, r := range rows {
		out = append(out, string(r.Key))
	}
	return out
}

// TestCellsFilters: a status filter keeps exactly the rows of those
// statuses, in listing order, across pages of any size, whether it is
// served from the instances (failed) or by reading the cells (completed);
// a key filter finds the one row of its key, or none.
func TestCellsFilters(t *testing.T) {
	s := cellsWorld(t, 250) // every tenth key failed without a cell
	all, _ := cellsPages(t, s, "", 1000)
	want := map[string][]api.CellInfo{}
	for _, r := range all {
		want[r.Status] = append(want[r.Status], r)
	}
	if len(want["failed"]) != 25 || len(want["completed"]) != 225 {
		t.Fatalf("the world: %d failed, %d completed", len(want["failed"]), len(want["completed"]))
	}
	for _, c := range []struct {
		query string
		want  []api.CellInfo
	}{
		{"status=failed", want["failed"]},
		{"status=completed", want["completed"]},
		{"status=completed,failed", all},
		{"status=failed&status=completed", all},
		{"status=running,waiting", nil},
	} {
		for _, limit := range []int{1, 7, 100} {
			got, pages := cellsPages(t, s, c.query, limit)
			if !reflect.DeepEqual(keysOf(got), keysOf(c.want)) || !reflect.DeepEqual(got, append([]api.CellInfo(nil), c.want...)) && len(c.want) > 0 {
				t.Errorf("?%s limit %d: %d rows in %d pages; want %d", c.query, limit, len(got), pages, len(c.want))
			}
		}
	}
	for _, c := range []struct {
		query  string
		status string // "" : no row
	}{
		{"key=t-005", "completed"},
		{"key=t-010", "failed"},
		{"key=%22t-011%22", "completed"},
		{"key=zzz", ""},
		{"key=t-005&status=failed", ""},
		{"key=t-010&status=failed", "failed"},
	} {
		code, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+"?"+c.query, "")
		p := decodePage(t, body)
		switch {
		case code != 200 || p.Next != nil:
			t.Errorf("?%s: %d %s", c.query, code, body)
		case c.status == "" && len(p.Cells) != 0:
			t.Errorf("?%s: %s; want no row", c.query, body)
		case c.status != "" && (len(p.Cells) != 1 || p.Cells[0].Status != c.status || !strings.Contains(c.query, strings.Trim(string(p.Cells[0].Key), `"`))):
			t.Errorf("?%s: %s; want its %s row", c.query, body, c.status)
		}
	}
}

// TestCellsFilterBound: a filter that includes completed examines at most
// api.MaxFilteredRows rows per request, so a page may be short and still
// have a next; paging on finds the rest.
func TestCellsFilterBound(t *testing.T) {
	s := cellsWorld(t, api.MaxFilteredRows+50)
	_, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+fmt.Sprintf("?limit=%d", api.MaxFilteredRows), "")
	completed := 0 // among the first MaxFilteredRows rows
	for _, r := range decodePage(t, body).Cells {
		if r.Status == "completed" {
			completed++
		}
	}
	code, body := s.do(t, "GET", "/v1/cells/"+url.PathEscape(tallyWF)+fmt.Sprintf("?status=completed&limit=%d", api.MaxFilteredRows), "")
	p := decodePage(t, body)
	if code != 200 || len(p.Cells) != completed || completed >= api.MaxFilteredRows || p.Next == nil {
		t.Fatalf("first page: %d, %d rows, next %v; want the %d completed rows of the first %d and a next", code, len(p.Cells), p.Next, completed, api.MaxFilteredRows)
	}
	rows, _ := cellsPages(t, s, "status=completed", api.MaxFilteredRows)
	if len(rows) != (api.MaxFilteredRows+50)*9/10 {
		t.Fatalf("all pages: %d rows", len(rows))
	}
}

// TestManifestRoute: GET /v1/manifest names the manifest in force and the
// record that applied it, and its source, written to a file, loads as the
// same manifest.
func TestManifestRoute(t *testing.T) {
	s := serveWorld(t, false)
	code, body := s.do(t, "GET", "/v1/manifest", "")
	var v api.ManifestView
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("manifest: %d %s", code, body)
	}
	m := s.w.Manifest()
	if v.Hash != m.Hash || v.Name != m.Name {
		t.Fatalf("manifest %s %s; the world's is %s %s", v.Name, v.Hash, m.Name, m.Hash)
	}
	_, jbody := s.do(t, "GET", "/v1/journal?kind=manifest", "")
	var rec struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(strings.SplitN(jbody, "\n", 2)[0]), &rec); err != nil || rec.Seq == 0 || v.Seq != rec.Seq {
		t.Fatalf("seq %d; the manifest record is %s", v.Seq, jbody)
	}
	p := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(p, v.Source, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := manifest.LoadWith(p, s.w.CAS().Get)
	if err != nil || again.Hash != m.Hash {
		t.Fatalf("the source loads as %v, %v; want %s", again, err, m.Hash)
	}
}

// TestStatusJournaled: /v1/status counts every record kind, and an order
// adds exactly what it journals.
func TestStatusJournaled(t *testing.T) {
	s := serveWorld(t, false)
	read := func() map[journal.Kind]uint64 {
		code, body := s.do(t, "GET", "/v1/status", "")
		var st api.Status
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("status: %d %s", code, body)
		}
		return st.Journaled
	}
	before := read()
	for _, k := range journal.Kinds() {
		if _, ok := before[k]; !ok {
			t.Fatalf("status journaled lacks %s: %v", k, before)
		}
	}
	s.order(t, "o1")
	after := read()
	for _, k := range journal.Kinds() {
		want := before[k] + map[journal.Kind]uint64{journal.KindEvent: 1, journal.KindStep: 1, journal.KindIntent: 2}[k]
		if after[k] != want {
			t.Errorf("%s: %d -> %d, want %d", k, before[k], after[k], want)
		}
	}
}

// TestTimelineDiffAfterReset: after a reset recover the cell starts from no
// state, so the next step's diff is from null (the whole state added), not
// from the state before the reset.
func TestTimelineDiffAfterReset(t *testing.T) {
	s, _ := tallyWorld(t)
	ctx := context.Background()
	for _, by := range []int{2, 13} { // 13: the buggy tally fails
		if _, err := s.w.Submit(ctx, kernel.Event{Schema: "t/Add@1", JSON: json.RawMessage(fmt.Sprintf(`{"key":"r","by":%d}`, by))}); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := s.w.FailedInstance(ctx, tallyWF, schemas.MustMarshal("r"))
	if err != nil || fi == nil {
		t.Fatalf("r not failed: %v", err)
	}
	if code, b := s.do(t, "POST", "/v1/failed/"+url.PathEscape(tallyWF)+"/recover", fmt.Sprintf(`{"key":"r","action":"reset","fault_seq":%d}`, fi.FaultSeq)); code != 200 {
		t.Fatalf("reset: %d %s", code, b)
	}
	if _, err := s.w.Submit(ctx, kernel.Event{Schema: "t/Add@1", JSON: json.RawMessage(`{"key":"r","by":3}`)}); err != nil {
		t.Fatal(err)
	}
	code, body := s.do(t, "GET", "/v1/timeline/"+url.PathEscape(tallyWF)+"/r", "")
	var tl timelineBody
	if code != 200 || json.Unmarshal([]byte(body), &tl) != nil {
		t.Fatalf("timeline: %d %s", code, body)
	}
	st := stepEntries(tl.Entries)
	last := st[len(st)-1]
	if last.StateSource != views.StateFromLive || !sameJSONSet(t, last.Diff, `[{"op":"add","path":"","value":{"n":3}}]`) {
		t.Fatalf("the step after the reset: source %q diff %s; want live and the whole state added", last.StateSource, last.Diff)
	}
}

// TestTimelineOfNothing: a key nothing reached has an empty page, no next.
func TestTimelineOfNothing(t *testing.T) {
	s, _ := tallyWorld(t)
	code, body := s.do(t, "GET", "/v1/timeline/"+url.PathEscape(tallyWF)+"/never", "")
	if code != 200 || strings.TrimSpace(body) != `{"entries":[]}` {
		t.Fatalf("timeline of a key nothing reached: %d %s", code, body)
	}
}
