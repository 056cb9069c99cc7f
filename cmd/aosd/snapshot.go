package main

import (
	"flag"
	"fmt"

	"github.com/aos-kernel/aos/host"
)

// cmdSnapshot takes a snapshot now. The kernel reports no progress while
// it writes one, so a terminal gets a spinner with the elapsed time.
func cmdSnapshot(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		a.everyBar = true
		return a.withConn(a.ctx, func(c *host.Conn) error {
			r, _ := a.bars()
			label := "snapshot"
			if c.Remote {
				label = "snapshot (daemon at " + c.Addr + ")"
			}
			bar := r.Start(label, 0)
			res, err := c.Snapshot(a.ctx)
			bar.Finish()
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			w := newTable(a.stdout)
			w.row("snapshot", fmt.Sprintf("seq %d (the state after checkpoint %d)", res.Seq, res.Checkpoint))
			w.row("object", res.Object)
			w.row("bytes", res.Bytes)
			w.row("cells", fmt.Sprintf("%d (%d dirty written)", res.Cells, res.Dirty))
			w.row("loop pause", fmt.Sprintf("%.3f ms", res.PauseMs))
			w.row("duration", fmt.Sprintf("%.3f ms", res.DurationMs))
			return w.flush()
		})
	}
}
