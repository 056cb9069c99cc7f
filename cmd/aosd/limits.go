package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/views"
)

// cmdLimits shows or changes the world's limits. They are part of the world
// (journaled), so a change survives restarts and replays the same.
func cmdLimits(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		sub := "show"
		if len(pos) > 0 {
			sub, pos = pos[0], pos[1:]
		}
		switch sub {
		case "show":
			if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
				return err
			}
			return a.withReadConn(a.ctx, func(c *host.Conn) error {
				lim, err := c.Limits(a.ctx)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]any{"limits": lim})
				}
				return printLimits(a, lim)
			})
		case "set":
			if len(pos) == 0 {
				return usagef("limits set: want NAME=VALUE ... (names: %s)", strings.Join(records.LimitNames(), ", "))
			}
			lim, err := parseLimitArgs(pos)
			if err != nil {
				return err
			}
			return a.withConn(a.ctx, func(c *host.Conn) error {
				res, err := c.SetLimits(a.ctx, lim)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(res)
				}
				if res.Changed {
					fmt.Fprintf(a.stdout, "limits changed (journaled at seq %d)\n", res.Seq)
				} else {
					fmt.Fprintln(a.stdout, "limits unchanged")
				}
				return printLimits(a, res.Limits)
			})
		}
		return usagef("limits: unknown subcommand %q (want show or set)", sub)
	}
}

// parseLimitArgs reads NAME=VALUE pairs into limits, through the same JSON
// check the HTTP API uses, so an unknown name is refused the same way.
func parseLimitArgs(args []string) (kernel.Limits, error) {
	obj := map[string]int{}
	for _, arg := range args {
		name, val, ok := strings.Cut(arg, "=")
		if !ok {
			return kernel.Limits{}, usagef("limits set: %q is not NAME=VALUE", arg)
		}
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 {
			return kernel.Limits{}, usagef("limits set: %s=%q: want a positive integer", name, val)
		}
		obj[name] = n
	}
	b, _ := json.Marshal(obj)
	lim, err := api.ParseLimits(b)
	if err != nil {
		return kernel.Limits{}, usagef("limits set: %v", err)
	}
	return lim, nil
}

func printLimits(a *app, lim views.Limits) error {
	w := newTable(a.stdout)
	names := records.LimitNames()
	vals := kernel.Limits(lim).NonZero()
	for _, n := range names {
		w.row(n, vals[n])
	}
	return w.flush()
}
