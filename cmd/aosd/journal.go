package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"

	"github.com/aos-kernel/aos/daemon"
)

func cmdJournal(fs *flag.FlagSet, a *app) func([]string) error {
	from := fs.Uint64("from", 1, "first sequence number")
	limit := fs.Int("limit", 0, "at most this many records (0: all)")
	kind := fs.String("kind", "", "only records of these kinds, comma-separated (event, step, intent, receipt, drop, frame, manifest, snapshot, fault)")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		q, err := daemon.ParseJournalQuery(func(k string) []string {
			switch k {
			case "from":
				return []string{strconv.FormatUint(*from, 10)}
			case "limit":
				return []string{strconv.Itoa(*limit)}
			case "kind":
				return []string{*kind}
			case "follow":
				return []string{strconv.FormatBool(*follow)}
			}
			return nil
		})
		if err != nil {
			return usagef("%v", err)
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			var tw *table
			if !a.json {
				tw = newTable(a.stdout)
				tw.row("SEQ", "KIND", "DETAIL")
				if q.Follow {
					tw.flush()
				}
			}
			err := c.Journal(a.ctx, q, func(line json.RawMessage) error {
				if a.json {
					_, err := fmt.Fprintf(a.stdout, "%s\n", line)
					return err
				}
				var r struct {
					Seq  uint64          `json:"seq"`
					Kind string          `json:"kind"`
					Body json.RawMessage `json:"body"`
				}
				if err := json.Unmarshal(line, &r); err != nil {
					return err
				}
				tw.row(r.Seq, r.Kind, journalDetail(r.Kind, r.Body))
				if q.Follow {
					return tw.flush()
				}
				return nil
			})
			if tw != nil {
				if ferr := tw.flush(); err == nil {
					err = ferr
				}
			}
			if a.ctx.Err() != nil {
				return nil // interrupted --follow
			}
			return err
		})
	}
}

func journalDetail(kind string, body json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return compact(body, 120)
	}
	str := func(k string) string {
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			return s
		}
		return string(m[k])
	}
	switch kind {
	case "event":
		return fmt.Sprintf("%s %s -> %s", str("schema"), compact(m["value"], 80), compact(m["targets"], 80))
	case "step":
		return fmt.Sprintf("%s key %s input %s -> %s", str("workflow"), m["key"], m["input"], str("state_hash"))
	case "intent":
		return fmt.Sprintf("%s from %s key %s %s", str("effect"), str("origin_workflow"), m["origin_key"], str("hash"))
	case "manifest":
		return fmt.Sprintf("%s %s", str("name"), str("hash"))
	case "fault":
		return fmt.Sprintf("%s key %s: %s", str("workflow"), m["key"], str("reason"))
	case "recover":
		return fmt.Sprintf("%s %s key %s: fault %s (input %s, %s skipped)", str("action"), str("workflow"), m["key"], m["fault"], m["input"], m["skipped"])
	}
	return compact(body, 120)
}
