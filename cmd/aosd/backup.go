package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
)

// cmdBackup is `aosd backup FILE`: a consistent copy of the world, taken
// through its daemon while it serves, or from its store when none does
// (docs/operations.md, "Backing up and restoring").
func cmdBackup(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "FILE"); err != nil {
			return err
		}
		path, err := filepath.Abs(pos[0])
		if err != nil {
			return err
		}
		info, err := host.Backup(a.ctx, host.Dir(a.world), host.ConnectOptions{Direct: a.direct}, path)
		if err != nil {
			return err
		}
		if a.json {
			return a.printJSON(info)
		}
		w := newTable(a.stdout)
		how := "from the store (no daemon served the world)"
		if info.Daemon {
			how = "through the daemon, while it served"
		}
		w.row("backup", fmt.Sprintf("%s (%d bytes), %s; read back and checked", info.File, info.Bytes, how))
		printBackupInfo(w, info)
		return w.flush()
	}
}

// cmdRestore is `aosd restore FILE [DIR]`: a new world directory (DIR,
// else --world) from a backup, opened once to show it opens.
func cmdRestore(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 2, "FILE [DIR]"); err != nil {
			return err
		}
		if len(pos) == 2 {
			if worldFlagGiven(fs) && filepath.Clean(a.world) != filepath.Clean(pos[1]) {
				return usagef("DIR %s and --world %s differ: name the new world once", pos[1], a.world)
			}
			a.world = pos[1]
		}
		info, err := host.Restore(pos[0], a.world)
		if err != nil {
			return err
		}
		// Open it once, directly, as any command would: it loads its
		// latest snapshot and replays the journal after it.
		var st *api.Status
		err = a.withConn(a.ctx, func(c *host.Conn) error {
			var err error
			st, err = c.Status(a.ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("restored %s, but it does not open: %w", a.world, err)
		}
		if a.json {
			return a.printJSON(info)
		}
		w := newTable(a.stdout)
		w.row("restored", fmt.Sprintf("%s from %s (%d bytes)", info.World, info.File, info.Bytes))
		printBackupInfo(w, info)
		manifest := "(none)"
		if st.ManifestHash != nil {
			manifest = st.ManifestHash.String()
		}
		w.row("opened", fmt.Sprintf("journal height %d, manifest %s", st.JournalHeight, manifest))
		if err := w.flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nThis is the same world as the one backed up (same journal, token and keys):\n"+
			"run only one of the two. Check it with\n  aosd replay --verify --world %s\n  aosd journal check --world %s\n", info.World, info.World)
		return nil
	}
}

func printBackupInfo(w *table, info *host.BackupInfo) {
	w.row("journal", fmt.Sprintf("seqs %d..%d", info.JournalFirst, info.JournalHeight))
	w.row("store", fmt.Sprintf("%d keys, %d bytes", info.StoreKeys, info.StoreBytes))
	w.row("files", strings.Join(info.Files, " "))
}

// worldFlagGiven says whether --world was on the command line.
func worldFlagGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "world" })
	return given
}
