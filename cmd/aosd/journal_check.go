package main

import (
	"flag"
	"fmt"

	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/views"
)

// journalCheck is `aosd journal check`: the journal's invariants
// (docs/journal-check.md). It goes through the daemon when one serves the
// world, else it reads the store without opening the world (opening
// replays, and a broken journal may not replay). Exit 1 when a rule is
// broken, after printing the violations.
func cmdJournalCheck(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error { return a.journalCheck(fs, pos) }
}

func (a *app) journalCheck(fs *flag.FlagSet, pos []string) error {
	if err := wantArgs(pos, 0, 0, "no arguments after check"); err != nil {
		return err
	}
	// It reads the whole journal: only --world, --json and --direct apply.
	if err := onlyFlags(fs, "journal check (it reads the whole journal)"); err != nil {
		return err
	}
	cfg, err := a.kernelConfig()
	if err != nil {
		return err
	}
	so, err := envStore()
	if err != nil {
		return err
	}
	rep, err := host.CheckJournal(a.ctx, host.Dir(a.world), host.ConnectOptions{Direct: a.direct, Config: cfg, Store: so})
	if err != nil {
		return err
	}
	if a.json {
		err = a.printJSON(rep)
	} else {
		err = printJournalCheck(a, rep)
	}
	if err != nil || rep.OK {
		return err
	}
	return fmt.Errorf("the journal breaks %d rule(s) (see docs/journal-check.md)", len(rep.Violations)+rep.Omitted)
}

func printJournalCheck(a *app, rep *views.JournalCheck) error {
	from := "from genesis"
	if rep.Snapshot != 0 {
		from = fmt.Sprintf("from the snapshot at seq %d (retention dropped the records before seq %d)", rep.Snapshot, rep.First)
	}
	if rep.Records == 0 {
		fmt.Fprintf(a.stdout, "checked no records %s", from)
	} else {
		fmt.Fprintf(a.stdout, "checked records %d..%d (%d) %s", rep.From, rep.To, rep.Records, from)
	}
	if rep.OK {
		fmt.Fprintln(a.stdout, ": ok")
		return nil
	}
	fmt.Fprintf(a.stdout, ": %d violation(s)\n\n", len(rep.Violations)+rep.Omitted)
	w := newTable(a.stdout)
	w.row("SEQ", "RULE", "WORKFLOW", "KEY", "DETAIL")
	for _, v := range rep.Violations {
		wf, key := v.Workflow, compact(v.Key, 40)
		if wf == "" {
			wf, key = "-", "-"
		}
		w.row(v.Seq, v.Rule, wf, key, v.Detail)
	}
	if err := w.flush(); err != nil {
		return err
	}
	if rep.Omitted > 0 {
		fmt.Fprintf(a.stdout, "... and %d more not listed\n", rep.Omitted)
	}
	return nil
}
