package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

const shadowSummary = "run a proposed manifest against a copy of the world (the live world is untouched, no effect runs) " +
	"and report the intents opened and pending, instance statuses, effect allowlist changes and cell changes"

func cmdShadow(fs *flag.FlagSet, a *app) func([]string) error {
	events := fs.String("events", "", "submit these events after the apply instead of re-feeding a window: a JSON array of {\"schema\", \"value\", \"idempotency_key\"?} or one such object per line; - for stdin")
	window := fs.Int("window", 0, fmt.Sprintf("re-feed the journal's last N ingress events, from the world as it stood just before them (default %d when --events is not given)", kernel.DefaultShadowWindow))
	list := fs.Int("list", 0, fmt.Sprintf("show at most N of each list (intents, instances, refusals, cells per workflow; default %d); totals are always whole", kernel.DefaultShadowList))
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "PATH (the proposed manifest: a file or directory)"); err != nil {
			return err
		}
		switch {
		case *events != "" && *window != 0:
			return usagef("give --events or --window, not both")
		case *window < 0:
			return usagef("--window %d: want a positive number of ingress events", *window)
		case *list < 0:
			return usagef("--list %d: want a positive number", *list)
		}
		path := pos[0]
		// Validate locally first: problems name the user's own files.
		if _, err := manifest.Load(path); err != nil {
			return api.AsError(err, path)
		}
		req := api.ShadowRequest{Window: *window, List: *list}
		if *events != "" {
			evs, err := a.readEvents(*events)
			if err != nil {
				return err
			}
			req.Events = evs
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			var err error
			if req.Path, req.Files, err = manifestSource(c, path); err != nil {
				return err
			}
			out, err := c.Shadow(a.ctx, req)
			if out == nil {
				return err
			}
			return a.report(out, func(w io.Writer) { printShadow(w, out) }, err)
		})
	}
}

// readEvents reads --events: a file, or - for stdin.
func (a *app) readEvents(arg string) ([]api.Event, error) {
	name := arg
	var b []byte
	var err error
	if arg == "-" {
		name = "stdin"
		b, err = io.ReadAll(a.stdin)
	} else {
		b, err = os.ReadFile(arg)
	}
	if err != nil {
		return nil, fmt.Errorf("read --events %s: %w", name, err)
	}
	evs, err := api.ParseEvents(name, b)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("--events %s holds no events", name)
	}
	return evs, nil
}

func printShadow(w io.Writer, o *api.ShadowOutput) {
	if ap := o.Apply; ap != nil {
		fmt.Fprintf(w, "manifest %s %s\n", ap.ManifestName, ap.ManifestHash)
		if ap.PreviousHash != nil {
			fmt.Fprintf(w, "previous %s\n", *ap.PreviousHash)
		}
	}
	from := "an empty world"
	if o.Start > 0 {
		from = fmt.Sprintf("the live world as of seq %d", o.Start)
	}
	fmt.Fprintf(w, "copy of %s (live height %d)", from, o.Height)
	if o.Opened.Snapshot > 0 {
		fmt.Fprintf(w, ", opened from the snapshot at seq %d and %d records replayed", o.Opened.Snapshot, o.Opened.Replayed)
	} else if o.Start > 0 {
		fmt.Fprintf(w, ", %d records replayed", o.Opened.Replayed)
	}
	fmt.Fprintln(w)
	in := o.Inputs
	switch in.Source {
	case "window":
		fmt.Fprintf(w, "window: the last %d ingress events asked, %d found", in.Window, in.Events)
		if in.Events > 0 {
			fmt.Fprintf(w, " (live seqs %d..%d)", in.From, in.To)
		}
		fmt.Fprintln(w, ", re-fed with their original stamps and idempotency keys")
		for _, k := range slices.Sorted(maps.Keys(in.NotReplayed)) {
			fmt.Fprintf(w, "  not re-fed: %d %s record(s)\n", in.NotReplayed[k], k)
		}
	default:
		fmt.Fprintf(w, "events: %d given\n", in.Events)
	}
	if ap := o.Apply; ap != nil && len(ap.BlockedBy) > 0 {
		fmt.Fprintf(w, "not run: the copy is not quiescent where the manifest would be applied; blocked by %d:\n", len(ap.BlockedBy))
		for _, b := range ap.BlockedBy {
			if b.Kind == "intent" {
				fmt.Fprintf(w, "  intent %s %s from %s key %s\n", b.Intent, b.Effect, b.Workflow, b.Key)
			} else {
				fmt.Fprintf(w, "  %s %s %s key %s\n", b.Kind, b.Status, b.Workflow, b.Key)
			}
		}
		return
	}
	if ap := o.Apply; ap != nil && ap.Unchanged {
		fmt.Fprintln(w, "apply: unchanged (the copy already runs this manifest)")
	} else if ap != nil {
		fmt.Fprintf(w, "apply: applied in the copy at seq %d\n", ap.Seq)
	}
	fmt.Fprintf(w, "submitted %d, duplicates %d, refused %d\n", in.Submitted, in.Duplicates, in.RefusedTotal)
	for _, r := range in.Refused {
		at := fmt.Sprintf("event %d", r.Index)
		if r.Seq > 0 {
			at = fmt.Sprintf("live seq %d", r.Seq)
		}
		fmt.Fprintf(w, "  refused %s %s: %s\n", at, r.Schema, r.Reason)
	}
	more(w, len(in.Refused), in.RefusedTotal)

	if len(o.Allowlist) == 0 {
		fmt.Fprintln(w, "effect allowlists: unchanged")
	} else {
		fmt.Fprintln(w, "effect allowlists:")
		for _, c := range o.Allowlist {
			var parts []string
			for _, e := range c.Added {
				parts = append(parts, "+ "+e)
			}
			for _, e := range c.Removed {
				parts = append(parts, "- "+e)
			}
			note := ""
			switch {
			case c.Old == nil:
				note = " (new workflow)"
			case c.New == nil:
				note = " (workflow removed)"
			}
			fmt.Fprintf(w, "  %s%s: %s\n", c.Workflow, note, strings.Join(parts, ", "))
		}
	}

	fmt.Fprintf(w, "effects opened: %d", o.Effects.Total)
	if len(o.Effects.ByEffect) > 0 {
		var parts []string
		for _, e := range slices.Sorted(maps.Keys(o.Effects.ByEffect)) {
			parts = append(parts, fmt.Sprintf("%s %d", e, o.Effects.ByEffect[e]))
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	t := newTable(w)
	for _, it := range o.Effects.Intents {
		t.row("", "seq "+fmt.Sprint(it.Seq), it.Effect, it.Workflow, "key "+compact(it.Key, 40), it.Intent.Short())
	}
	_ = t.flush()
	more(w, len(o.Effects.Intents), o.Effects.Total)

	fmt.Fprintf(w, "pending at the end: %d\n", o.Pending.Total)
	t = newTable(w)
	for _, it := range o.Pending.Intents {
		t.row("", it.Effect, it.Workflow, "key "+compact(it.Key, 40), it.Intent.Short())
	}
	_ = t.flush()
	more(w, len(o.Pending.Intents), o.Pending.Total)

	c := o.Instances.Counts
	fmt.Fprintf(w, "instances: running %d, waiting %d, completed %d, failed %d\n", c.Running, c.Waiting, c.Completed, c.Failed)
	t = newTable(w)
	for _, si := range o.Instances.NotCompleted {
		age := "before the run"
		if si.New {
			age = "new"
		}
		reason := ""
		if si.Reason != "" {
			reason = fmt.Sprintf("fault at seq %d: %s", si.FaultSeq, si.Reason)
		}
		t.row("", si.Status, si.Workflow, "key "+compact(si.Key, 40), age, reason)
	}
	_ = t.flush()
	more(w, len(o.Instances.NotCompleted), o.Instances.NotCompletedTotal)

	if len(o.Deltas) == 0 {
		fmt.Fprintln(w, "cells: none stepped")
	} else {
		fmt.Fprintln(w, "cells:")
	}
	for _, d := range o.Deltas {
		fmt.Fprintf(w, "  %s: stepped %d, created %d, changed %d, deleted %d, unchanged %d\n",
			d.Workflow, d.Stepped, d.Created, d.Changed, d.Deleted, d.Unchanged)
		t = newTable(w)
		for _, k := range d.Keys {
			t.row("   ", k.Change, "key "+compact(k.Key, 40), hashOrNone(k.Before)+" -> "+hashOrNone(k.After))
		}
		_ = t.flush()
		more(w, len(d.Keys), d.Created+d.Changed+d.Deleted)
	}
	fmt.Fprintln(w, "effects were observed, never executed; the live world is unchanged")
}

// more says how many of a list were not shown.
func more(w io.Writer, shown, total int) {
	if total > shown {
		fmt.Fprintf(w, "  ... and %d more (--list N shows more)\n", total-shown)
	}
}

func hashOrNone(h *schemas.Hash) string {
	if h == nil {
		return "(none)"
	}
	return h.Short()
}
