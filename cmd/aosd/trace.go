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
			w := newTable(a.stdout)
			w.row("SEQ", "KIND", "DETAIL")
			for _, e := range tr {
				w.row(e.Seq, string(e.Kind), traceDetail(e))
			}
			if err := w.flush(); err != nil {
				return err
			}
			if c.Remote {
				link := "http://" + c.Addr + "/intents/" + url.PathEscape(*intent)
				if *intent == "" {
					link = inspectorCellURL(c.Addr, pos[0], key, len(pos) == 2)
				}
				_, err = fmt.Fprintf(a.stdout, "inspector: %s\n", link)
			}
			return err
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

func traceDetail(e views.TraceEntry) string {
	switch e.Kind {
	case "event":
		return fmt.Sprintf("%s %s", e.Schema, compact(e.Value, 100))
	case "step":
		s := fmt.Sprintf("input %d -> ", e.Input)
		if e.Deleted || e.StateHash == nil {
			s += "deleted"
		} else {
			s += "state " + e.StateHash.String()
		}
		if len(e.Emitted) > 0 {
			s += fmt.Sprintf(", emitted %v", e.Emitted)
		}
		if len(e.Intents) > 0 {
			s += fmt.Sprintf(", %d intent(s)", len(e.Intents))
		}
		return s
	case "intent":
		h := ""
		if len(e.Intents) > 0 {
			h = e.Intents[0].String()
		}
		return fmt.Sprintf("%s %s (emitted at %d)", e.Effect, h, e.Input)
	case "fault":
		return fmt.Sprintf("input %d: %s", e.Input, e.Reason)
	case "recover":
		return fmt.Sprintf("%s of fault %d (input %d, %s)", e.Action, e.Fault, e.Input, recoverCounts(e.Skipped, e.Parked, e.Dropped))
	case "receipt", "drop":
		s := fmt.Sprintf("%s %s from %s", e.Effect, e.Status, e.Executor)
		if e.Attempt > 0 {
			s += fmt.Sprintf(" (attempt %d)", e.Attempt)
		}
		if len(e.Intents) > 0 {
			s += " for " + e.Intents[0].String()
		}
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		return s
	case "frame":
		return fmt.Sprintf("frame %d from %s: %s", e.FrameSeq, e.Executor, compact(e.Value, 100))
	case "cancel":
		s := e.Effect
		if len(e.Intents) > 0 {
			s += " " + e.Intents[0].String()
		}
		s += " cancelled by " + e.By
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		return s
	}
	b, _ := json.Marshal(e)
	return string(b)
}
