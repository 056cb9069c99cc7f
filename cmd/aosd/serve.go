package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/aos-kernel/aos"
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

func serve(a *app, listen string) error {
	dir := daemon.Dir(a.world)
	if err := dir.Check(); err != nil {
		return err
	}
	log := logger(a.stderr, slog.LevelInfo)
	w, err := aos.Open(a.ctx, a.world, aos.Options{Listen: listen, Logger: log, WasmCacheDir: os.Getenv(envWasmCache)})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "listening on http://%s\n", w.Addr())
	if f, ok := a.stdout.(*os.File); ok {
		f.Sync()
	}
	serr := w.Wait(a.ctx)
	log.Info("shutting down")
	cerr := w.Close()
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return cerr
	}
	log.Info("stopped")
	return nil
}
