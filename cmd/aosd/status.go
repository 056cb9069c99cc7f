package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
)

func cmdStatus(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
			st, err := c.Status(a.ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(st)
			}
			w := newTable(a.stdout)
			mh := "(none: run aosd apply)"
			if st.ManifestHash != nil {
				mh = st.ManifestHash.String()
			}
			via := "direct (no daemon)"
			if c.Remote {
				via = "daemon at http://" + c.Addr
			}
			w.row("world", a.world)
			w.row("world identity", st.World)
			w.row("via", via)
			if l := st.Lease; l != nil {
				switch {
				case l.SteppedDown != "":
					w.row("lease", fmt.Sprintf("node %s STEPPED DOWN (epoch %d): %s", l.Node, l.Epoch, l.SteppedDown))
				case l.Owner:
					w.row("lease", fmt.Sprintf("node %s owns the world (epoch %d)", l.Node, l.Epoch))
				default:
					w.row("lease", fmt.Sprintf("node %s reads without the lease (another node, or none, owns the world)", l.Node))
				}
			}
			if cl := st.Cluster; cl != nil {
				w.row("answered by", clusterLine(cl))
			}
			if st.ManifestName != "" {
				w.row("manifest", st.ManifestName)
			}
			w.row("manifest hash", mh)
			for _, p := range st.Pinned {
				w.row("pinned manifest "+p.Name, fmt.Sprintf("%s, %d instance(s) pinned (aosd manifests)", p.Hash, p.Instances))
			}
			w.row("journal height", st.JournalHeight)
			if st.JournalFirst > 1 {
				w.row("journal first", fmt.Sprintf("%d (retention dropped the records before it)", st.JournalFirst))
			}
			snap := "(none yet)"
			if ls := st.LastSnapshot; ls != nil {
				snap = fmt.Sprintf("seq %d (checkpoint %d) %s", ls.Seq, ls.Checkpoint, ls.Object)
			}
			w.row("last snapshot", snap)
			w.row("records since snapshot", st.RecordsSinceSnapshot)
			w.row("quiescent", st.Quiescent)
			w.row("instances", fmt.Sprintf("running %d, waiting %d, completed %d, failed %d, parked %d",
				st.Instances.Running, st.Instances.Waiting, st.Instances.Completed, st.Instances.Failed, st.Instances.Parked))
			w.row("parked events", st.Parked)
			for _, m := range st.Aside {
				w.row("set aside "+m.Name, fmt.Sprintf("since seq %d, %d input(s) waiting in %d instance(s) of %s: aosd modules resume %s",
					m.AsideSeq, m.Waiting, m.Instances, strings.Join(m.Workflows, ", "), m.Name))
			}
			w.row("in-flight intents", st.Inflight)
			w.row("queued effects", st.QueuedEffects)
			for _, name := range slices.Sorted(maps.Keys(st.Cells)) {
				w.row("cells "+name, st.Cells[name])
			}
			return w.flush()
		})
	}
}

// clusterLine says which node answered a status on a world served by
// nodes, and who owns the world as it last read the lease: the lease row
// beside it is the owner's own hold, so a status through a standby names
// both nodes.
func clusterLine(cl *api.ClusterStatus) string {
	switch {
	case cl.Role == api.RoleOwner:
		return fmt.Sprintf("node %s, the owner (epoch %d, serving at %s)", cl.Node, cl.Epoch, cl.Address)
	case cl.Owner == "":
		return fmt.Sprintf("node %s, a standby; no node holds the lease (epoch %d was the last)", cl.Node, cl.Epoch)
	default:
		return fmt.Sprintf("node %s, a standby forwarding to the owner %s at %s (epoch %d)", cl.Node, cl.Owner, cl.OwnerAddress, cl.Epoch)
	}
}
