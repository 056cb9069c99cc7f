package main

import (
	"flag"
	"fmt"
	"path/filepath"

	"github.com/aos-kernel/aos/host"
)

func cmdInit(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
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
		c, err := host.InitWith(host.Dir(a.world), cfg, so)
		if err != nil {
			return err
		}
		abs, _ := filepath.Abs(a.world)
		if a.json {
			return a.printJSON(map[string]string{"world": abs, "identity": c.World, "executor_public_key": c.ExecutorPublicKey})
		}
		fmt.Fprintf(a.stdout, "created world %s\n  identity      %s\n  store         %s\n  api token     %s (0600)\n  executor key  %s (ed25519, PKCS#8 PEM, 0600)\n  executor pub  %s\n",
			abs, c.World, filepath.Join(abs, host.StoreDir), filepath.Join(abs, host.TokenFile), filepath.Join(abs, host.ExecutorKey), c.ExecutorPublicKey)
		return nil
	}
}
