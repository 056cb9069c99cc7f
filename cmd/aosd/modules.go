package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
)

// modulesSummary is the `modules` command's help.
const modulesSummary = "list the world's modules and those set aside (a wasm module whose steps kept timing out: " +
	"its workflows' inputs are parked, not stepped), or resume one: its parked inputs are delivered again, in order " +
	"(journaled; applying a manifest that replaces the module resumes it too)"

func cmdModules(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if len(pos) > 0 && pos[0] == "resume" {
			if err := wantArgs(pos, 2, 2, "resume MODULE"); err != nil {
				return err
			}
			return a.withConn(a.ctx, func(c *host.Conn) error {
				res, err := c.ResumeModule(a.ctx, pos[1])
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.stdout, "module %s resumed at seq %d: %d parked input(s) delivered again to %d instance(s)\n",
					pos[1], res.Seq, res.Delivered, res.Instances)
				return nil
			})
		}
		if len(pos) > 0 && pos[0] == "ls" {
			pos = pos[1:]
		}
		if err := wantArgs(pos, 0, 0, "[ls] | resume MODULE"); err != nil {
			return err
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			ms, err := c.Modules(a.ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(api.ModulePage{Modules: ms})
			}
			t := newTable(a.stdout)
			t.row("MODULE", "KIND", "STATUS", "WAITING", "INSTANCES", "TIMEOUTS", "WORKFLOWS", "REASON")
			aside := 0
			for _, m := range ms {
				status := m.Status
				if m.Status == "aside" {
					aside++
					status = fmt.Sprintf("aside (seq %d)", m.AsideSeq)
				}
				kind := m.Kind
				if !m.InManifest {
					kind = "(gone)"
				}
				t.row(m.Name, kind, status, m.Waiting, m.Instances, m.TimeoutsInARow, strings.Join(m.Workflows, ", "), compactText(m.Reason, 100))
			}
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d module(s), %d set aside\n", len(ms), aside)
			return nil
		})
	}
}
