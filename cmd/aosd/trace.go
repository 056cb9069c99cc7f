package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"

	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/views"
)

func cmdTrace(fs *flag.FlagSet, a *app) func([]string) error {
	intent := fs.String("intent", "", "trace one intent by hash (sha256:...) instead of a cell")
	return func(pos []string) error {
		if *intent != "" {
			if err := wantArgs(pos, 0, 0, "no arguments with --intent"); err != nil {
				return err
			}
		} else if err := wantArgs(pos, 1, 2, "WORKFLOW [KEY]"); err != nil {
			return err
		}
		key := ""
		if len(pos) == 2 {
			key = pos[1]
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			var lines []traceLine
			if *intent != "" || a.json {
				var tr []views.TraceEntry
				var err error
				if *intent != "" {
					tr, err = c.TraceIntent(a.ctx, *intent)
				} else {
					tr, err = c.Trace(a.ctx, pos[0], key)
				}
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(tr)
				}
				for _, e := range tr {
					lines = append(lines, traceLine{TimelineEntry: views.TimelineEntry{TraceEntry: e}})
				}
			} else {
				var err error
				if lines, err = cellStory(a.ctx, c, pos[0], key, len(pos) == 2); err != nil {
					return err
				}
			}
			w := newTable(a.stdout)
			w.row("SEQ", "KIND", "DETAIL")
			story := newTraceStory(lines)
			for _, l := range lines {
				for i, d := range story.detail(l) {
					if i == 0 {
						w.row(l.Seq, string(l.Kind), d)
					} else {
						w.row("", "", d)
					}
				}
			}
			if err := w.flush(); err != nil {
				return err
			}
			if c.Remote {
				link := "http://" + c.Addr + "/intents/" + url.PathEscape(*intent)
				if *intent == "" {
					link = inspectorCellURL(c.Addr, pos[0], key, len(pos) == 2)
				}
				_, err := fmt.Fprintf(a.stdout, "inspector: %s\n", link)
				return err
			}
			return nil
		})
	}
}

// inspectorCellURL is the web inspector's deep link of a cell
// (docs/inspector.md): the workflow and the key's JSON, each one escaped
// path segment. A key given as JSON is that JSON; any other text is that
// string, as the API reads it; no key is an unkeyed workflow's null.
func inspectorCellURL(addr, workflow, key string, keyed bool) string {
	k := "null"
	if keyed {
		var buf bytes.Buffer
		if json.Valid([]byte(key)) && json.Compact(&buf, []byte(key)) == nil {
			k = buf.String()
		} else {
			b, _ := json.Marshal(key)
			k = string(b)
		}
	}
	return "http://" + addr + "/cells/" + url.PathEscape(workflow) + "/" + url.PathEscape(k)
}
