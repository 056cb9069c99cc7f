package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// cancelSummary is the `cancel` command's help.
const cancelSummary = "cancel an intent in flight (a durable timer or any effect), journaled: the executor side withdraws it " +
	"(a timer never fires, no claim hands it out) and refuses its later receipts and frames; its workflow is delivered " +
	"sys/EffectCancelled@1 if its event schema takes it, and otherwise the instance fails (as for a rejected receipt). " +
	"Nothing else ever cancels an intent"

func cmdCancel(fs *flag.FlagSet, a *app) func([]string) error {
	reason := fs.String("reason", "", fmt.Sprintf("why (at most %d bytes): journaled and delivered to the workflow", kernel.MaxCancelReasonBytes))
	by := fs.String("by", defaultCancelBy(), fmt.Sprintf("who asks (at most %d bytes), journaled as given", kernel.MaxCancelByBytes))
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "INTENT"); err != nil {
			return err
		}
		return a.withConn(a.ctx, func(c *host.Conn) error {
			res, err := c.Cancel(a.ctx, pos[0], api.CancelRequest{Reason: *reason, By: *by})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			fmt.Fprintf(a.stdout, "intent %s (%s of %s key %s) cancelled at seq %d by %s\n",
				res.Intent, res.Effect, res.Workflow, res.Key, res.Seq, *by)
			if res.Delivered {
				fmt.Fprintf(a.stdout, "the workflow took %s; the instance is %s\n", kernel.SchemaEffectCancelled, res.Status)
			} else {
				fmt.Fprintf(a.stdout, "the instance failed (fault seq %d): %s\n", res.FaultSeq, res.Reason)
			}
			return nil
		})
	}
}

// defaultCancelBy names the canceller when --by is not given: the user
// running the command ($USER), else kernel.DefaultCancelBy.
func defaultCancelBy() string {
	if u := os.Getenv("USER"); u != "" && len(u) <= kernel.MaxCancelByBytes {
		return u
	}
	return kernel.DefaultCancelBy
}
