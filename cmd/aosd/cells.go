package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// listCells fetches one page of a workflow's cells or, with all, every page
// from q.After on, one request per page (q.Limit rows each, the maximum when
// 0), so the world is never held for more than a page.
func listCells(ctx context.Context, c *host.Conn, workflow string, q api.CellsQuery, all bool) (*api.CellPage, error) {
	if !all {
		return c.Cells(ctx, workflow, q)
	}
	if q.Limit == 0 {
		q.Limit = kernel.MaxCellPage
	}
	out := &api.CellPage{Cells: []api.CellInfo{}}
	for {
		p, err := c.Cells(ctx, workflow, q)
		if err != nil {
			return nil, err
		}
		out.Cells = append(out.Cells, p.Cells...)
		if p.Next == "" {
			return out, nil
		}
		q.After = p.Next
	}
}

// printCells prints a page as a table, then how many rows it held and, when
// more follow, the command that lists the next page (nextPageCommand on fs,
// the flags of this command, and words, its positional arguments).
func (a *app) printCells(fs *flag.FlagSet, words []string, p *api.CellPage) error {
	w := newTable(a.stdout)
	w.row("KEY", "STATE_HASH", "SIZE", "STATUS", "LAST_ACTIVE")
	for _, ci := range p.Cells {
		last := "-"
		if ci.LastActive > 0 {
			last = time.Unix(0, int64(ci.LastActive)).UTC().Format(time.RFC3339)
		}
		st := ci.Status
		if ci.Reason != "" {
			st += " (" + ci.Reason + ")"
		}
		if ci.Pin != "" {
			st += ", pinned to " + ci.Pin
		}
		w.row(string(ci.Key), ci.StateHash.String(), ci.Size, st, last)
	}
	if err := w.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%d cell(s)\n", len(p.Cells))
	if p.Next != "" {
		fmt.Fprintf(a.stdout, "next page: %s\n", nextPageCommand(fs, append([]string{"cells"}, words...), p.Next))
	}
	return nil
}

func cmdCells(fs *flag.FlagSet, a *app) func([]string) error {
	limit := fs.Int("limit", 0, fmt.Sprintf("ls: cells per page (0: %d; at most %d; with --all, 0 means %d)",
		kernel.DefaultCellPage, kernel.MaxCellPage, kernel.MaxCellPage))
	after := fs.String("after", "", "ls: start after this cursor (the next of an earlier page)")
	all := fs.Bool("all", false, "ls: every cell from the cursor on, fetched a page at a time")
	status := fs.String("status", "", "ls: only rows with these statuses (comma-separated: running, waiting, completed, failed)")
	key := fs.String("key", "", "ls: only the row of this key (JSON, or a string)")
	return func(pos []string) error {
		if len(pos) == 0 {
			return usagef("want ls WORKFLOW or show WORKFLOW [KEY]")
		}
		switch pos[0] {
		case "ls":
			if err := wantArgs(pos, 2, 2, "ls WORKFLOW"); err != nil {
				return err
			}
			return a.withReadConn(a.ctx, func(c *host.Conn) error {
				q := api.CellsQuery{Limit: *limit, After: *after, Status: api.ParseStatuses([]string{*status})}
				fs.Visit(func(f *flag.Flag) {
					if f.Name == "key" {
						q.Key, q.HasKey = *key, true
					}
				})
				p, err := listCells(a.ctx, c, pos[1], q, *all)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(p)
				}
				return a.printCells(fs, pos, p)
			})
		case "show":
			if err := wantArgs(pos, 2, 3, "show WORKFLOW [KEY]"); err != nil {
				return err
			}
			key := ""
			if len(pos) == 3 {
				key = pos[2]
			}
			return a.withReadConn(a.ctx, func(c *host.Conn) error {
				v, err := c.Cell(a.ctx, pos[1], key)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(v)
				}
				w := newTable(a.stdout)
				w.row("workflow", v.Workflow)
				w.row("key", string(v.Key))
				st := v.Status
				if v.Reason != "" {
					st += " (" + v.Reason + ")"
				}
				w.row("status", st)
				if v.StateHash != nil {
					w.row("state hash", v.StateHash.String())
					w.row("size", v.Size)
				}
				w.row("in-flight", len(v.Inflight))
				for _, h := range v.Inflight {
					w.row("  intent", h)
				}
				w.row("parked", v.Parked)
				if v.AsideModule != "" {
					w.row("module set aside", v.AsideModule+" (its inputs are parked until aosd modules resume "+v.AsideModule+")")
				}
				if v.Pin != "" {
					pin := v.Pin + " (an older live manifest: it steps under it; aosd manifests)"
					if v.PinReason != "" {
						pin = v.Pin + " (stays: " + v.PinReason + ")"
					}
					w.row("pinned to", pin)
				}
				if err := w.flush(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "state:\n%s\n", indentJSON(v.State))
				return nil
			})
		default:
			return usagef("unknown cells subcommand %q (want ls or show)", pos[0])
		}
	}
}
