package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// failedSummary is the `failed` command's help: what recovering does with
// the failed input and with the events parked since.
const failedSummary = "list failed instances, or recover one: retry delivers the input that failed again " +
	"(to the current manifest's code), reset deletes the cell's state and drops that input, skip keeps the state and drops it. " +
	"Each then delivers the events parked for the instance while it was failed, in order, unless --drop-parked drops them " +
	"(the answer says how many). Without --fault the current fault is looked up"

func cmdFailed(fs *flag.FlagSet, a *app) func([]string) error {
	limit := fs.Int("limit", 0, fmt.Sprintf("ls: rows per page (0: %d, at most %d)", kernel.DefaultFailedLimit, kernel.MaxFailedLimit))
	after := fs.String("after", "", "ls: start after this cursor (the \"next\" of the previous page)")
	all := fs.Bool("all", false, "ls: list every page")
	fault := fs.Uint64("fault", 0, "retry/reset/skip: the fault seq being answered; refused if the instance's current fault is another (0: look it up)")
	dropParked := fs.Bool("drop-parked", false, "retry/reset/skip: drop the events parked for the instance instead of delivering them after the action (journaled, counted)")
	return func(pos []string) error {
		if len(pos) == 0 || pos[0] != kernel.RecoverRetry && pos[0] != kernel.RecoverReset && pos[0] != kernel.RecoverSkip {
			if len(pos) > 0 && pos[0] == "ls" {
				pos = pos[1:]
			}
			if err := wantArgs(pos, 0, 1, "ls [WORKFLOW]"); err != nil {
				return err
			}
			if *limit < 0 {
				return usagef("--limit %d is negative", *limit)
			}
			if *dropParked {
				return usagef("--drop-parked goes with retry, reset or skip, not ls")
			}
			wf := ""
			if len(pos) == 1 {
				wf = pos[0]
			}
			return a.withReadConn(a.ctx, func(c *host.Conn) error {
				return a.failedList(c, fs, api.FailedQuery{Workflow: wf, Limit: *limit, After: *after}, *all)
			})
		}
		if err := wantArgs(pos, 2, 3, pos[0]+" WORKFLOW [KEY]"); err != nil {
			return err
		}
		key := ""
		if len(pos) == 3 {
			key = pos[2]
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			return a.failedRecover(c, pos[0], pos[1], key, *fault, *dropParked)
		})
	}
}

// failedList prints one page (or, with all, every page) of failed instances
// and, when more follow, the command that lists the next page (with the
// flags set on fs).
func (a *app) failedList(c *host.Conn, fs *flag.FlagSet, q api.FailedQuery, all bool) error {
	page, err := c.Failed(a.ctx, q)
	if err != nil {
		return err
	}
	for all && page.Next != "" {
		q.After = page.Next
		more, err := c.Failed(a.ctx, q)
		if err != nil {
			return err
		}
		page.Failed, page.Next = append(page.Failed, more.Failed...), more.Next
	}
	if a.json {
		return a.printJSON(page)
	}
	printFailed(a.stdout, page.Failed)
	if page.Next != "" {
		words := []string{"failed", "ls"}
		if q.Workflow != "" {
			words = append(words, q.Workflow)
		}
		fmt.Fprintf(a.stdout, "more: %s (or --all)\n", nextPageCommand(fs, words, page.Next))
	}
	return nil
}

func printFailed(w io.Writer, rows []api.FailedInfo) {
	t := newTable(w)
	t.row("WORKFLOW", "KEY", "INPUT", "FAULT", "CLASS", "PARKED", "SKIPPED", "RETRY", "REASON")
	for _, f := range rows {
		retry := "yes"
		if !f.Retryable {
			retry = "no: " + f.RetryBlocked
		}
		parked := fmt.Sprint(f.Parked)
		if f.ParkedBlocked != "" {
			parked += " (undeliverable: " + compactText(f.ParkedBlocked, 60) + ")"
		}
		t.row(f.Workflow, string(f.Key), f.Input, f.FaultSeq, f.Class, parked, f.Skipped, compactText(retry, 60), compactText(f.Reason, 100))
	}
	t.flush()
	fmt.Fprintf(w, "%d failed instance(s)\n", len(rows))
}

// compactText puts s on one line, cut to max runes.
func compactText(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// failedRecover answers one failed instance's fault with action. A retry
// that fails again is reported and exits 1: the recover is journaled, the
// instance is failed by a new fault.
func (a *app) failedRecover(c *host.Conn, action, wf, key string, fault uint64, dropParked bool) error {
	if fault == 0 {
		page, err := c.Failed(a.ctx, api.FailedQuery{Workflow: wf, Key: &key})
		if err != nil {
			return err
		}
		if len(page.Failed) == 0 {
			return fmt.Errorf("workflow %s key %s is not failed; nothing to %s", wf, keyOrNone(key), action)
		}
		fault = page.Failed[0].FaultSeq
	}
	req := api.RecoverRequest{Action: action, FaultSeq: fault, DropParked: dropParked}
	if key != "" {
		req.Key = keyJSON(key)
	}
	res, err := c.Recover(a.ctx, wf, req)
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "%s of workflow %s key %s (fault %d) journaled at seq %d; %s; status %s\n",
			action, wf, keyOrNone(key), fault, res.Seq, parkedOutcome(res), res.Status)
	}
	if res.FaultSeq != 0 {
		fmt.Fprintf(a.stderr, "aosd failed %s: the instance failed again (fault seq %d): %s\n", action, res.FaultSeq, res.Reason)
		return &exitCodeError{exitError}
	}
	return nil
}

// parkedOutcome says what a recover did with the parked events.
func parkedOutcome(res *api.RecoverResult) string {
	switch {
	case res.Dropped > 0:
		return fmt.Sprintf("%d parked event(s) dropped", res.Dropped)
	case res.Delivered > 0:
		return fmt.Sprintf("%d parked event(s) delivered after it", res.Delivered)
	}
	return "no parked events"
}

// keyJSON is a key as the user typed it, as the JSON the recover body
// carries: JSON text as is, anything else as a JSON string (as ParseKey
// reads a typed key).
func keyJSON(key string) json.RawMessage {
	if json.Valid([]byte(key)) {
		return json.RawMessage(key)
	}
	b, _ := json.Marshal(key)
	return b
}

func keyOrNone(key string) string {
	if key == "" {
		return "(none)"
	}
	return key
}
