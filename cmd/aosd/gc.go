package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// cmdGC collects the CAS objects nothing reaches (docs/snapshots.md), and
// with --drop-journal applies journal retention first.
func cmdGC(fs *flag.FlagSet, a *app) func([]string) error {
	keep := fs.Int("keep-snapshots", kernel.DefaultKeepSnapshots, "how many of the newest snapshots stay usable")
	drop := fs.Bool("drop-journal", false, "drop the journal before the oldest kept snapshot's checkpoint (replay from genesis becomes impossible)")
	archive := fs.String("archive", "", "with --drop-journal: write the dropped frames to this new file first")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		if *keep < 1 {
			return usagef("gc: --keep-snapshots %d: keep at least 1", *keep)
		}
		if *archive != "" && !*drop {
			return usagef("gc: --archive is written only with --drop-journal")
		}
		req := api.GCRequest{KeepSnapshots: *keep, DropJournal: *drop}
		if *archive != "" {
			abs, err := filepath.Abs(*archive)
			if err != nil {
				return err
			}
			req.Archive = abs
		}
		if r, on := a.bars(); on {
			// Unlike kernelBars, an unknown total (marking) is drawn too.
			req.Progress = func(label string, total uint64) kernel.ProgressBar { return r.Start(label, total) }
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			res, err := c.GC(a.ctx, req)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			w := newTable(a.stdout)
			w.row("marked", res.Marked)
			w.row("kept", fmt.Sprintf("%d objects, %d bytes (%d written during the collection)", res.KeptObjects, res.KeptBytes, res.KeptWritten))
			w.row("freed", fmt.Sprintf("%d objects, %d bytes", res.FreedObjects, res.FreedBytes))
			w.row("snapshots kept", fmt.Sprint(res.SnapshotsKept))
			w.row("blobs kept", res.BlobsKept)
			if j := res.Journal; j != nil {
				w.row("journal dropped", fmt.Sprintf("%d records in %d frames, %d bytes; it now starts at seq %d", j.Records, j.Frames, j.Bytes, j.First))
				if j.Archive != "" {
					w.row("archive", j.Archive)
				}
			}
			w.row("took", fmt.Sprintf("%.1f ms", res.DurationMs))
			return w.flush()
		})
	}
}
