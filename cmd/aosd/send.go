package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
)

// readValue reads VALUE: JSON text, @file, or - for stdin.
func (a *app) readValue(arg string) (json.RawMessage, error) {
	var b []byte
	var err error
	src := "VALUE"
	switch {
	case arg == "-":
		src = "stdin"
		b, err = io.ReadAll(a.stdin)
	case strings.HasPrefix(arg, "@"):
		src = arg[1:]
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	if !json.Valid(b) {
		var v any
		jerr := json.Unmarshal(b, &v)
		return nil, fmt.Errorf("%s is not valid JSON: %v", src, jerr)
	}
	return json.RawMessage(strings.TrimSpace(string(b))), nil
}

func cmdSend(fs *flag.FlagSet, a *app) func([]string) error {
	wait := fs.Duration("wait", 0, "after the event is durable, wait up to this long for the world to be quiescent again")
	key := fs.String("idempotency-key", "", "send under this key: a resend with the same key (a retry after a timeout) is not journaled again and prints the original seq")
	return func(pos []string) error {
		if err := wantArgs(pos, 2, 2, "SCHEMA VALUE"); err != nil {
			return err
		}
		keySet := false
		fs.Visit(func(f *flag.Flag) { keySet = keySet || f.Name == "idempotency-key" })
		if keySet && *key == "" {
			return fmt.Errorf("--idempotency-key is empty; omit it, or give 1-%d visible ASCII characters", kernel.MaxIdempotencyKeyBytes)
		}
		val, err := a.readValue(pos[1])
		if err != nil {
			return err
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			res, err := c.Send(a.ctx, []api.Event{{Schema: pos[0], Value: val, IdempotencyKey: *key}})
			if err != nil {
				return err
			}
			sent := res[0]
			quiet := (*bool)(nil)
			if *wait > 0 {
				q, err := c.WaitQuiescent(a.ctx, *wait)
				if err != nil {
					return err
				}
				quiet = &q
			}
			if a.json {
				out := map[string]any{"seq": sent.Seq, "duplicate": sent.Duplicate}
				if len(sent.Parked) > 0 {
					var ps []api.ParkedTarget
					for _, t := range sent.Parked {
						ps = append(ps, api.ParkedTarget{Workflow: t.Workflow, Key: records.KeyJSON(t.Key)})
					}
					out["parked"] = ps
				}
				if quiet != nil {
					out["quiescent"] = *quiet
				}
				return a.printJSON(out)
			}
			if sent.Duplicate {
				fmt.Fprintf(a.stdout, "event %s already journaled at seq %d under idempotency key %s; nothing journaled\n", pos[0], sent.Seq, *key)
			} else {
				fmt.Fprintf(a.stdout, "event %s journaled at seq %d\n", pos[0], sent.Seq)
			}
			for _, t := range sent.Parked {
				k := records.KeyJSON(t.Key)
				fmt.Fprintf(a.stdout, "parked for workflow %s key %s: it cannot take events now (failed, or its module set aside); "+
					"it gets this one when it is recovered or resumed (aosd cells show %s %s)\n", t.Workflow, k, t.Workflow, k)
			}
			if quiet != nil && !*quiet {
				fmt.Fprintf(a.stdout, "world not quiescent after %s (instances running or waiting on effects)\n", *wait)
			}
			return nil
		})
	}
}
