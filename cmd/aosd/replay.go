package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// cmdReplay replays the journal into scratch worlds and compares the state
// each reaches with the live one (api.Local.Replay). A direct run draws
// each replay's bar; through a daemon the replays run there, and a
// terminal gets a spinner until the report comes.
func cmdReplay(fs *flag.FlagSet, a *app) func([]string) error {
	verify := fs.Bool("verify", false, "also replay from genesis, recomputing every journaled snapshot byte for byte")
	man := fs.String("manifest", "", "instead: replay every cell's history under the manifest at PATH (built, as apply takes it) and report "+
		"which cells could move to it and which diverge (exit 1 when any diverges); changes nothing")
	export := fs.String("export", "", "with --manifest: read this world export (aosd journal --json output; - for stdin) instead of a world")
	artifacts := fs.String("artifacts", "", "with --export: a directory of wasm artifacts the exported journal's manifests run (the export holds no code); PATH's own are always used")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		switch {
		case *man == "" && (*export != "" || *artifacts != ""):
			return usagef("--export and --artifacts go with --manifest PATH")
		case *man != "" && *verify:
			return usagef("give --verify or --manifest, not both")
		case *export == "" && *artifacts != "":
			return usagef("--artifacts goes with --export")
		case *man != "":
			return a.replayManifest(*man, *export, *artifacts)
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

// replayManifest is `aosd replay --manifest PATH [--export FILE]`.
func (a *app) replayManifest(path, export, artifacts string) error {
	// Validate locally first: problems name the user's own files.
	m, err := manifest.Load(path)
	if err != nil {
		return api.AsError(err, path)
	}
	var out *api.UpgradeOutput
	if export != "" {
		cfg, err := a.kernelConfig()
		if err != nil {
			return err
		}
		in, closeIn, err := a.openInput(export)
		if err != nil {
			return err
		}
		defer closeIn()
		rep, err := host.ReplayExport(a.ctx, in, export, artifacts, m, cfg)
		if err != nil {
			return err
		}
		out = api.UpgradeOutputOf(rep)
	} else if err := a.withReadConn(a.ctx, func(c *host.Conn) error {
		var req api.ReplayManifestRequest
		var err error
		if req.Path, req.Files, err = manifestSource(c, path); err != nil {
			return err
		}
		out, err = c.ReplayManifest(a.ctx, req)
		return err
	}); err != nil {
		return err
	}
	var derr error
	if out.Counts.Diverged > 0 {
		derr = fmt.Errorf("%d of %d cells diverge under manifest %s (see the report)", out.Counts.Diverged, len(out.Cells), m.Name)
	}
	return a.report(out, func(w io.Writer) { printUpgrade(w, out) }, derr)
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

// openInput opens a file argument, or stdin for "-".
func (a *app) openInput(name string) (io.Reader, func(), error) {
	if name == "-" {
		return a.stdin, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	return f, func() { f.Close() }, nil
}
