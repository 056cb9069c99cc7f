package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/aos-kernel/aos/daemon"
)

func cmdServe(fs *flag.FlagSet, a *app) func([]string) error {
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback by default; port 0 picks a free port)")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		return serve(a, *listen)
	}
}

// serve is daemon.Run with the CLI's edges: the logger, the configuration
// read from the environment, and the line that tells scripts where the API
// is, flushed before the first request can arrive.
func serve(a *app, listen string) error {
	cfg, err := envConfig()
	if err != nil {
		return err
	}
	return daemon.Run(a.ctx, a.world, daemon.Options{
		Listen: listen, Logger: logger(a.stderr, slog.LevelInfo), Kernel: cfg,
		Ready: func(addr string) {
			fmt.Fprintf(a.stdout, "listening on http://%s\n", addr)
			if f, ok := a.stdout.(*os.File); ok {
				f.Sync()
			}
		},
	})
}
