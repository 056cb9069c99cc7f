package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

type cellsPage struct {
	Cells []struct {
		Key    json.RawMessage `json:"key"`
		Status string          `json:"status"`
	} `json:"cells"`
	Next *string `json:"next"`
}

func (p cellsPage) keys() []string {
	var out []string
	for _, c := range p.Cells {
		out = append(out, string(c.Key))
	}
	return out
}

// TestCellsLsPaging: `cells ls --limit N` prints one page and the command
// for the next one, which continues strictly after it; `--after` takes a
// cursor; `--all` pages through everything (from the cursor, if given) and
// prints no cursor. --json prints the page object.
func TestCellsLsPaging(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			ok(t, w, "send", countEv, fmt.Sprintf(`{"key":%q,"by":1}`, k))
		}
		var pages []cellsPage
		args := []string{"cells", "ls", counterWF, "--limit", "2"}
		for {
			var p cellsPage
			jsonOut(t, w, &p, args...)
			pages = append(pages, p)
			if p.Next == nil {
				break
			}
			if len(pages) > 3 {
				t.Fatalf("more than 3 pages of 2 for 5 cells: %+v", pages)
			}
			args = []string{"cells", "ls", counterWF, "--limit", "2", "--after", *p.Next}
		}
		var paged []string
		for _, p := range pages {
			paged = append(paged, p.keys()...)
		}
		if len(pages) != 3 || len(pages[2].Cells) != 1 || len(paged) != 5 {
			t.Fatalf("pages of 2: %+v", pages)
		}
		seen := map[string]bool{}
		for _, k := range paged {
			if seen[k] {
				t.Fatalf("%s on two pages: %v", k, paged)
			}
			seen[k] = true
		}

		// The table says how to go on, with the page size and the world
		// given, and saying it again gives page 2 (of 2 rows).
		out := ok(t, w, "cells", "ls", counterWF, "--limit", "2")
		hint := "next page: aosd cells ls " + counterWF + " --limit 2 --world " + w + " --after " + *pages[0].Next
		if !strings.Contains(out, "2 cell(s)\n"+hint+"\n") {
			t.Fatalf("cells ls --limit 2 printed:\n%s\nwant the line %q", out, hint)
		}
		var again cellsPage
		jsonOut(t, w, &again, strings.Fields(strings.TrimPrefix(hint, "next page: aosd "))...)
		if strings.Join(again.keys(), ",") != strings.Join(pages[1].keys(), ",") {
			t.Fatalf("following the hint: %v, want %v", again.keys(), pages[1].keys())
		}

		// --all: everything, in the same order, with no cursor; from a
		// cursor, the rest.
		var all cellsPage
		jsonOut(t, w, &all, "cells", "ls", counterWF, "--all", "--limit", "2")
		if strings.Join(all.keys(), ",") != strings.Join(paged, ",") || all.Next != nil {
			t.Fatalf("--all: %+v, want %v", all, paged)
		}
		jsonOut(t, w, &all, "cells", "ls", counterWF, "--all", "--after", *pages[0].Next)
		if strings.Join(all.keys(), ",") != strings.Join(paged[2:], ",") {
			t.Fatalf("--all --after: %v, want %v", all.keys(), paged[2:])
		}
		out = ok(t, w, "cells", "ls", counterWF, "--all", "--limit", "2")
		if !strings.Contains(out, "5 cell(s)\n") || strings.Contains(out, "next page") {
			t.Fatalf("cells ls --all printed:\n%s", out)
		}
	})
}

// TestCellsLsFilters: `cells ls --status` keeps the rows of those statuses
// (and its next-page hint keeps the filter), `--key` prints the one row of
// a key or none, and an unknown status is refused, naming it.
func TestCellsLsFilters(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			ok(t, w, "send", countEv, fmt.Sprintf(`{"key":%q,"by":1}`, k))
		}
		var p cellsPage
		jsonOut(t, w, &p, "cells", "ls", counterWF, "--status", "failed")
		if len(p.Cells) != 0 || p.Next != nil {
			t.Fatalf("--status failed: %+v", p)
		}
		jsonOut(t, w, &p, "cells", "ls", counterWF, "--status", "running,completed", "--all")
		if len(p.Cells) != 5 {
			t.Fatalf("--status running,completed: %+v", p)
		}
		out := ok(t, w, "cells", "ls", counterWF, "--status", "completed", "--limit", "2")
		if !strings.Contains(out, "next page: aosd cells ls "+counterWF+" --limit 2 --status completed --world "+w+" --after ") {
			t.Fatalf("--status --limit 2 printed:\n%s", out)
		}
		jsonOut(t, w, &p, "cells", "ls", counterWF, "--key", "b")
		if strings.Join(p.keys(), ",") != `"b"` || p.Cells[0].Status != "completed" {
			t.Fatalf("--key b: %+v", p)
		}
		jsonOut(t, w, &p, "cells", "ls", counterWF, "--key", "zz")
		if len(p.Cells) != 0 {
			t.Fatalf("--key zz: %+v", p)
		}
		r := aosd(t, w, "cells", "ls", counterWF, "--status", "done")
		if r.code == 0 || !strings.Contains(r.stderr, `unknown status "done"`) {
			t.Fatalf("--status done: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
