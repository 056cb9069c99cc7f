package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

const upgradeSummary = "move cells pinned to an older manifest onto the current one, each only after the current code, replayed over " +
	"its inputs, reproduced every step (same state hashes, same intents); one journaled move per cell; a report per cell " +
	"(exit 1 when any diverged, changed meanwhile, was refused or not found)"

// cmdUpgrade is `aosd upgrade WORKFLOW [KEY...] [--all] [--status S] [--dry-run]`.
func cmdUpgrade(fs *flag.FlagSet, a *app) func([]string) error {
	all := fs.Bool("all", false, "every cell of WORKFLOW pinned to an older manifest (instead of KEYs)")
	status := fs.String("status", "", "only the cells with this status: waiting, completed (pinned at rest), running, parked or failed")
	dry := fs.Bool("dry-run", false, "check and report; move nothing, journal nothing")
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1<<20, "WORKFLOW [KEY...]"); err != nil {
			return err
		}
		if *all && len(pos) > 1 {
			return usagef("give KEYs or --all, not both")
		}
		req := api.UpgradeRequest{Workflow: pos[0], All: *all, Status: *status, DryRun: *dry}
		for _, k := range pos[1:] {
			req.Keys = append(req.Keys, keyJSON(k))
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			out, err := c.Upgrade(a.ctx, req)
			if err != nil {
				return err
			}
			return a.report(out, func(w io.Writer) { printUpgrade(w, out) }, upgradeExit(out))
		})
	}
}

// upgradeExit is the error (exit 1) an upgrade's report ends with when a
// cell did not move that should have; nil when every cell selected moved
// (or would), or was not pinned or skipped by --status.
func upgradeExit(o *api.UpgradeOutput) error {
	var bad []string
	for _, c := range o.Cells {
		switch c.Outcome {
		case kernel.UpgradeMoved, kernel.UpgradeWouldMove, kernel.UpgradeNotPinned, kernel.UpgradeSkipped:
		default:
			bad = append(bad, fmt.Sprintf("%s (%s)", c.Key, c.Outcome))
		}
	}
	n := len(bad)
	if n == 0 {
		return nil
	}
	if n > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", n-5))
	}
	return fmt.Errorf("%d of %d cells did not move: %s (see the report)", n, len(o.Cells), strings.Join(bad, ", "))
}

func printUpgrade(w io.Writer, o *api.UpgradeOutput) {
	what := "upgrade"
	if o.Workflow == "" {
		what = "replay under"
	}
	fmt.Fprintf(w, "%s manifest %s %s", what, o.ManifestName, o.ManifestHash)
	if o.DryRun && o.Workflow != "" {
		fmt.Fprint(w, " (dry run: nothing moved)")
	}
	start := "genesis"
	if o.Start > 0 {
		start = fmt.Sprintf("seq %d", o.Start)
	}
	fmt.Fprintf(w, "\nchecked %d steps, replaying %d records from %s to height %d\n", o.Steps, o.Replayed, start, o.Height)
	fmt.Fprintf(w, "moved %d, would move %d, diverged %d, other %d\n\n", o.Counts.Moved, o.Counts.WouldMove, o.Counts.Diverged, o.Counts.Other)
	t := newTable(w)
	t.row("WORKFLOW", "KEY", "OUTCOME", "STATUS", "FROM", "SINCE", "INPUTS", "DETAIL")
	for _, c := range o.Cells {
		from, status, since := "-", "-", "-"
		if c.From != nil {
			from = shortHash(*c.From)
		}
		if c.Status != "" {
			status = c.Status
		}
		if c.Since != "" {
			since = c.Since
		}
		detail := c.Reason
		switch {
		case c.Divergence != nil:
			detail = divergenceText(c.Divergence)
		case c.Seq > 0:
			detail = fmt.Sprintf("move record %d", c.Seq)
		}
		if c.Migrated != nil && c.Divergence == nil {
			// The state the workflow's migration takes, and what it gives.
			m := fmt.Sprintf("state migrated %s -> %s", shortHash(*c.Migrated), shortHash(*c.StateHash))
			if detail != "" {
				m = detail + "; " + m
			}
			detail = m
		}
		if detail == "" {
			detail = "-"
		}
		t.row(c.Workflow, string(c.Key), c.Outcome, status, from, since, len(c.Inputs), detail)
	}
	_ = t.flush()
}

// divergenceText says where a cell's check diverged, in one line.
func divergenceText(d *api.UpgradeDivergence) string {
	s := fmt.Sprintf("%s record %d (input %d): ", d.Kind, d.Seq, d.Input)
	if d.Seq == 0 {
		s = ""
	}
	return s + d.Message
}
