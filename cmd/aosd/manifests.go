package main

import (
	"flag"
	"fmt"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
)

// manifestsSummary is the `manifests` command's help.
const manifestsSummary = "list the live manifests: the current one, and those an apply --pin kept for the instances " +
	"pinned to them (by status), their intents in flight and whether they are drained; or retire a drained one " +
	"(journaled; refused, exit 3, while anything is pinned to it; the current one cannot be retired)"

func cmdManifests(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if len(pos) > 0 && pos[0] == "retire" {
			if err := wantArgs(pos, 2, 2, "retire HASH"); err != nil {
				return err
			}
			return a.withConn(a.ctx, func(c *host.Conn) error {
				res, err := c.RetireManifest(a.ctx, pos[1])
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.stdout, "manifest %s %s retired at seq %d\n", res.Name, res.Hash, res.Seq)
				return nil
			})
		}
		if len(pos) > 0 && pos[0] == "ls" {
			pos = pos[1:]
		}
		if err := wantArgs(pos, 0, 0, "[ls] | retire HASH"); err != nil {
			return err
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			ms, err := c.Manifests(a.ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(api.ManifestsPage{Manifests: ms})
			}
			t := newTable(a.stdout)
			t.row("MANIFEST", "HASH", "SEQ", "STATE", "RUNNING", "WAITING", "AT REST", "FAILED", "PARKED", "INTENTS")
			for _, m := range ms {
				state := "pinned"
				switch {
				case m.Current:
					state = "current"
				case m.Drained:
					state = "drained"
				}
				t.row(m.Name, m.Hash, m.Seq, state, m.Pinned.Running, m.Pinned.Waiting, m.PinnedAtRest, m.Pinned.Failed, m.Pinned.Parked, m.Intents)
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d live manifest(s)\n", len(ms))
			return nil
		})
	}
}
