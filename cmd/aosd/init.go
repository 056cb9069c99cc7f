package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/aos-kernel/aos/host"
)

func cmdInit(fs *flag.FlagSet, a *app) func([]string) error {
	pgURL := fs.String("postgres", "", "keep the world in PostgreSQL at this postgres:// URL (its password, if any, is used and not written: give it later through PGPASSWORD or PGPASSFILE); a schema holding a world already is joined")
	schema := fs.String("schema", "", "with --postgres: the PostgreSQL schema holding the world (default aos)")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		if *schema != "" && *pgURL == "" {
			return usagef("--schema %s: only with --postgres", *schema)
		}
		cfg, err := a.kernelConfig()
		if err != nil {
			return err
		}
		so, err := envStore()
		if err != nil {
			return err
		}
		var c host.Created
		if *pgURL != "" {
			c, err = host.InitPostgres(host.Dir(a.world), host.PostgresInit{URL: *pgURL, Schema: *schema}, cfg, so)
		} else {
			c, err = host.InitWith(host.Dir(a.world), cfg, so)
		}
		if err != nil {
			return err
		}
		abs, _ := filepath.Abs(a.world)
		if c.Postgres != nil {
			return a.printInitPostgres(abs, c)
		}
		if a.json {
			return a.printJSON(map[string]string{"world": abs, "identity": c.World, "executor_public_key": c.ExecutorPublicKey})
		}
		fmt.Fprintf(a.stdout, "created world %s\n  identity      %s\n  store         %s\n  api token     %s (0600)\n  executor key  %s (ed25519, PKCS#8 PEM, 0600)\n  executor pub  %s\n",
			abs, c.World, filepath.Join(abs, host.StoreDir), filepath.Join(abs, host.TokenFile), filepath.Join(abs, host.ExecutorKey), c.ExecutorPublicKey)
		return nil
	}
}

// printInitPostgres says what init --postgres made: a world in the
// database, or this directory joined to the one there.
func (a *app) printInitPostgres(abs string, c host.Created) error {
	pc := c.Postgres
	if a.json {
		return a.printJSON(map[string]any{"world": abs, "identity": c.World, "executor_public_key": c.ExecutorPublicKey,
			"postgres": map[string]string{"url": pc.URL, "schema": pc.Schema}, "node": pc.Node, "joined": c.Joined,
			"password_written": false, "password_given": c.PasswordNotWritten})
	}
	what := "created world"
	if c.Joined {
		what = "joined world"
	}
	fmt.Fprintf(a.stdout, "%s %s\n  identity      %s\n  database      %s, schema %s (journal, objects, token, keys)\n  node          %s\n  names it      %s (0600)\n  executor pub  %s\n",
		what, abs, c.World, pc.URL, pc.Schema, pc.Node, filepath.Join(abs, host.PostgresFile), c.ExecutorPublicKey)
	if c.PasswordNotWritten {
		fmt.Fprintf(a.stdout, "  password      used to connect, NOT written: give it to later commands through PGPASSWORD, PGPASSFILE or ~/.pgpass\n")
	}
	return nil
}
