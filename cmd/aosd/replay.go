package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/schemas"
)

// cmdReplay replays the journal into scratch worlds and compares the state
// each reaches with the live one (api.Local.Replay). A direct run draws
// each replay's bar; through a daemon the replays run there, and a
// terminal gets a spinner until the report comes.
func cmdReplay(fs *flag.FlagSet, a *app) func([]string) error {
	verify := fs.Bool("verify", false, "also replay from genesis, recomputing every journaled snapshot byte for byte")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		a.everyBar = true
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			r, _ := a.bars()
			var wait interface{ Finish() } = quietBar{}
			if c.Remote {
				wait = r.Start("replay (daemon at "+c.Addr+")", 0)
			}
			rep, err := c.Replay(a.ctx, *verify)
			wait.Finish()
			if err != nil {
				return err
			}
			if a.json {
				err = a.printJSON(rep)
			} else {
				err = printReplay(a, rep)
			}
			if err != nil || rep.OK {
				return err
			}
			var failed []string
			for _, run := range rep.Runs {
				if !run.OK {
					failed = append(failed, "from "+run.From)
				}
			}
			return fmt.Errorf("the replay %s did not reach the live state at height %d (see the report)", strings.Join(failed, " and "), rep.Height)
		})
	}
}

func printReplay(a *app, rep *api.ReplayReport) error {
	fmt.Fprintf(a.stdout, "live state %s at height %d\n\n", rep.LiveState, rep.Height)
	w := newTable(a.stdout)
	w.row("RUN", "STARTED", "REPLAYED", "VERIFIED", "STATE", "RESULT")
	for _, run := range rep.Runs {
		started := "genesis"
		if s := run.Snapshot; s != nil {
			started = fmt.Sprintf("snapshot %d (checkpoint %d)", s.Seq, s.Checkpoint)
		}
		verified := "-"
		if run.From == "genesis" {
			verified = fmt.Sprintf("%d snapshot(s)", run.Verified)
		}
		state := "-"
		if run.State != nil {
			state = shortHash(*run.State)
		}
		result := "ok"
		switch {
		case run.Error != "":
			result = "stopped"
		case run.Diff != "":
			result = "differs"
		}
		w.row("from "+run.From, started, run.Replayed, verified, state, result)
	}
	if err := w.flush(); err != nil {
		return err
	}
	for _, run := range rep.Runs {
		for _, s := range run.Skipped {
			fmt.Fprintf(a.stdout, "from %s: skipped %s\n", run.From, s)
		}
		if run.Error != "" {
			fmt.Fprintf(a.stdout, "from %s: %s\n", run.From, run.Error)
		}
		if run.Diff != "" {
			fmt.Fprintf(a.stdout, "from %s: %s\n", run.From, run.Diff)
		}
	}
	return nil
}

// shortHash is a hash as a table shows it: its algorithm and first bytes.
func shortHash(h schemas.Hash) string { return "sha256:" + h.Short() + "…" }
