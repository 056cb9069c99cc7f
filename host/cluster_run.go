package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aos-kernel/aos/api"
)

// RunNode is `aosd serve` on a world on PostgreSQL: it serves the HTTP API
// on opts.Listen for as long as ctx lasts, owning the world while it holds
// the lease and forwarding to the owner while another node does (Node).
// Several nodes, each with a world directory naming the same database
// (aosd init --postgres), serve one world this way; whichever finds the
// lease free takes it. When ctx ends, an owner closes its world and
// releases the lease, so a standby takes over at once.
func RunNode(ctx context.Context, dir string, opts Options, co ClusterOptions) error {
	co = co.WithDefaults()
	if err := co.Check(); err != nil {
		return err
	}
	if opts.Listen == "" {
		return errors.New("cluster: a node needs an address to listen on")
	}
	d := Dir(dir)
	pc, err := d.Postgres()
	if err != nil {
		return err
	}
	if pc == nil {
		return fmt.Errorf("%s: not a world on PostgreSQL (no %s): serve it alone", d, PostgresFile)
	}
	// One process per node directory, for the node's whole life: a second
	// one is refused here, not each time it would take the lease (it
	// would only find the directory locked then).
	lock, lerr := lockNode(d)
	if lerr != nil {
		return lerr
	}
	defer lock.Close()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The node's own connection: who holds the lease, and the token a
	// standby checks its own answers with.
	ps, err := openPostgresDB(pc, "", opts.Store, log)
	if err != nil {
		return err
	}
	defer ps.db.Close()
	n := &Node{dir: d, id: pc.Node, co: co, log: log, lease: ps.db, lim: opts.HTTP.WithDefaults(), metrics: api.NewClusterMetrics()}
	n.tokens = func() (*api.TokenSet, error) {
		ts, _, err := loadTokens(pgFiles{ps}, log)
		return ts, err
	}
	n.standbyMetrics = newNodeMetrics(n.metrics)
	n.proxy = newForwarder(n)
	n.metrics.SetRole(api.RoleStandby)
	if err := n.listen(opts.Listen); err != nil {
		return err
	}
	wopts := opts
	wopts.Listen, wopts.Create, wopts.Ready, wopts.Reload = "", false, nil, nil
	wopts.Store.Advertise, wopts.Store.LeaseTTL, wopts.Store.NodeLocked = n.co.Advertise, co.Lease, true
	n.open = func(ctx context.Context) (*Host, error) { return Open(ctx, dir, wopts) }
	// Before saying it serves, the node reads who owns the world (a node
	// joining a world that has an owner forwards from its first request)
	// and, when no one does, opens it (the first request finds the owner).
	h := n.first(ctx)
	var end context.CancelFunc
	if h != nil {
		end = n.become(h)
	}
	if opts.Ready != nil {
		opts.Ready(n.addr)
	}
	rctx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		n.run(rctx, h, end)
	}()
	var serr error
	select {
	case <-ran:
	case <-n.served:
		serr = fmt.Errorf("http api: %w", n.srvErr)
	}
	log.Info("shutting down")
	cancel()
	<-ran
	if err := n.close(); err != nil && serr == nil {
		serr = err
	}
	if serr == nil {
		log.Info("stopped")
	}
	return serr
}
