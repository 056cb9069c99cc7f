package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/manifest"
)

func cmdApply(fs *flag.FlagSet, a *app) func([]string) error {
	wait := fs.Duration("wait", 0, "wait up to this long for quiescence before applying (e.g. 30s)")
	dry := fs.Bool("dry-run", false, "validate and report what would change; change nothing")
	pin := fs.Bool("pin", false, "make the manifest current now, whatever is in flight: instances in flight stay pinned to the manifest they are on (see aosd manifests)")
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "PATH (a manifest file or directory)"); err != nil {
			return err
		}
		path := pos[0]
		// Validate locally first: problems name the user's own files.
		if _, err := manifest.Load(path); err != nil {
			return api.AsError(err, path)
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			req := api.ApplyRequest{DryRun: *dry, Pin: *pin}
			if *wait > 0 {
				req.Wait = wait.String()
			}
			var err error
			if req.Path, req.Files, err = manifestSource(c, path); err != nil {
				return err
			}
			out, err := c.Apply(a.ctx, req)
			if out == nil {
				return err
			}
			return a.report(out, func(w io.Writer) { printApply(w, out) }, err)
		})
	}
}

// manifestSource says how the world reads the manifest at path: directly,
// by its path; through a daemon (which may not see this directory), by its
// files.
func manifestSource(c *host.Conn, path string) (string, []api.File, error) {
	if !c.Remote {
		return path, nil, nil
	}
	files, err := api.ReadManifestFiles(path)
	return "", files, err
}

// report prints an answer that may come with an error (apply and shadow
// answer a refusal with their report): as JSON or as the table, then
// returns the error.
func (a *app) report(v any, table func(io.Writer), err error) error {
	if a.json {
		if perr := a.printJSON(v); perr != nil {
			return perr
		}
	} else {
		table(a.stdout)
	}
	return err
}

func printApply(w io.Writer, o *api.ApplyOutput) {
	fmt.Fprintf(w, "manifest %s %s\n", o.ManifestName, o.ManifestHash)
	if o.PreviousHash != nil {
		fmt.Fprintf(w, "previous %s\n", *o.PreviousHash)
	}
	ch := o.Changes
	for _, n := range ch.Added {
		fmt.Fprintf(w, "  + def %s\n", n)
	}
	for _, n := range ch.Removed {
		fmt.Fprintf(w, "  - def %s\n", n)
	}
	for _, n := range ch.Changed {
		fmt.Fprintf(w, "  ~ def %s\n", n)
	}
	sub := func(s manifest.Subscription) string {
		if s.KeyField != "" {
			return fmt.Sprintf("%s -> %s (key %s)", s.Event, s.Workflow, s.KeyField)
		}
		return fmt.Sprintf("%s -> %s", s.Event, s.Workflow)
	}
	for _, s := range ch.SubscriptionsAdded {
		fmt.Fprintf(w, "  + subscription %s\n", sub(s))
	}
	for _, s := range ch.SubscriptionsRemoved {
		fmt.Fprintf(w, "  - subscription %s\n", sub(s))
	}
	if len(o.BlockedBy) > 0 {
		fmt.Fprintf(w, "blocked by %d:\n", len(o.BlockedBy))
		for _, b := range o.BlockedBy {
			switch b.Kind {
			case "intent":
				fmt.Fprintf(w, "  intent %s %s from %s key %s\n", b.Intent, b.Effect, b.Workflow, b.Key)
			case "pinned":
				fmt.Fprintf(w, "  pinned %s %s key %s: %s\n", b.Status, b.Workflow, b.Key, b.Reason)
			default:
				fmt.Fprintf(w, "  %s %s %s key %s\n", b.Kind, b.Status, b.Workflow, b.Key)
			}
		}
	}
	switch {
	case o.Applied && o.Pinned:
		fmt.Fprintf(w, "applied at journal seq %d, pinned: %d instance(s) in flight stay on the previous manifest (aosd manifests)\n", o.Seq, o.PinnedNow)
	case o.Applied:
		fmt.Fprintf(w, "applied at journal seq %d\n", o.Seq)
	case o.Unchanged:
		fmt.Fprintln(w, "unchanged: this manifest is already the world's manifest")
	case len(o.BlockedBy) > 0:
		fmt.Fprintln(w, "not applied: the world is not quiescent")
	case o.DryRun:
		fmt.Fprintln(w, "dry run: would apply; nothing changed")
	}
}
