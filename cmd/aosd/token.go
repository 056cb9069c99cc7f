package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
)

// cmdToken is `aosd token rotate [--grace DUR]`: a fresh API token in the
// world's token file, accepted at once by a daemon serving the world, which
// goes on accepting the old one for the grace (docs/operations.md).
func cmdToken(fs *flag.FlagSet, a *app) func([]string) error {
	grace := fs.Duration("grace", 0, "how long a running daemon still accepts the old token (at most 24h; 0: refused at once)")
	return func(pos []string) error {
		if len(pos) != 1 || pos[0] != "rotate" {
			return usagef("want rotate, got: %v", pos)
		}
		if *grace < 0 || *grace > api.MaxTokenGrace {
			return usagef("--grace %s: want 0 to 24h", *grace)
		}
		if *grace%time.Millisecond != 0 {
			return usagef("--grace %s: whole milliseconds", *grace)
		}
		out, err := host.RotateToken(a.ctx, host.Dir(a.world), host.ConnectOptions{Direct: a.direct}, *grace)
		if err != nil {
			return err
		}
		out.Token = "" // it is in the file; the output may end up in logs
		if a.json {
			return a.printJSON(out)
		}
		switch {
		case !out.Daemon:
			fmt.Fprintf(a.stdout, "token rotated: the new token is in %s (no daemon serves the world; the next one reads it)\n", out.File)
		case out.OldValidUntil != nil:
			fmt.Fprintf(a.stdout, "token rotated: the new token is in %s and the daemon accepts it; it accepts the old one until %s (grace %s, kept across restarts)\n",
				out.File, out.OldValidUntil.UTC().Format(time.RFC3339), *grace)
		default:
			fmt.Fprintf(a.stdout, "token rotated: the new token is in %s and the daemon accepts it; the old one is refused from now on\n", out.File)
		}
		return nil
	}
}
