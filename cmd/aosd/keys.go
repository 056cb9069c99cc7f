package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/aos-kernel/aos/host"
)

func cmdKeys(fs *flag.FlagSet, a *app) func([]string) error {
	effs := fs.String("effects", "", "with add: the effects the key may settle and send frames for, comma-separated: effect names (com.acme/charge@1) and namespaces (com.acme/*); required")
	return func(pos []string) error {
		if len(pos) == 0 {
			return usagef("keys: want ls | add NAME PUBLIC_KEY_FILE --effects E[,E...] | rm KEY_ID")
		}
		if *effs != "" && pos[0] != "add" {
			return usagef("keys %s: --effects goes with add", pos[0])
		}
		return a.withConnAs(a.ctx, pos[0] == "ls", func(c *host.Conn) error {
			switch pos[0] {
			case "ls":
				if err := wantArgs(pos[1:], 0, 0, "no arguments"); err != nil {
					return err
				}
				ks, err := c.Keys(a.ctx)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(ks)
				}
				w := newTable(a.stdout)
				w.row("NAME", "KEY ID", "EFFECTS")
				for _, k := range ks {
					e := strings.Join(k.Effects, ",")
					if e == "" {
						e = "(none: add it again with --effects)"
					}
					w.row(k.Name, k.ID, e)
				}
				return w.flush()
			case "add":
				if err := wantArgs(pos[1:], 2, 2, "NAME PUBLIC_KEY_FILE --effects E[,E...]"); err != nil {
					return err
				}
				effects := splitList(*effs)
				if len(effects) == 0 {
					return usagef("keys add: --effects is required: name the effects the key may settle (e.g. --effects com.acme/charge@1,com.acme/refunds/*); a key is never trusted for every effect")
				}
				pem, err := os.ReadFile(pos[2])
				if err != nil {
					return fmt.Errorf("read public key: %w", err)
				}
				kv, err := c.AddKey(a.ctx, pos[1], string(pem), effects)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(kv)
				}
				fmt.Fprintf(a.stdout, "trusted %s as executor %q for %s\n", kv.ID, kv.Name, strings.Join(kv.Effects, ", "))
				return nil
			case "rm":
				if err := wantArgs(pos[1:], 1, 1, "KEY_ID"); err != nil {
					return err
				}
				if err := c.RemoveKey(a.ctx, pos[1]); err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]bool{"removed": true})
				}
				fmt.Fprintf(a.stdout, "removed %s\n", pos[1])
				return nil
			}
			return usagef("keys: unknown subcommand %q (want ls, add or rm)", pos[0])
		})
	}
}

// splitList splits a comma-separated flag value, dropping blanks around
// and between items.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
