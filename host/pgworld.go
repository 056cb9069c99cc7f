package host

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/pgdb"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// PostgresFile names the database of a world on PostgreSQL: the one file
// of its directory that is about the world rather than the node (the
// others are daemon.json and the wasm cache). Its journal, CAS, snapshots,
// token, executor key and trusted keys are in the database.
const PostgresFile = "postgres.json"

// DefaultLeaseTTL is how long a node's lease on a Postgres world lasts
// unless renewed (StoreOptions.LeaseTTL). The owner renews it every third
// of it; another node may take a lease that lapsed.
const DefaultLeaseTTL = 10 * time.Second

// ErrOwnedElsewhere reports a Postgres world whose lease another node
// holds: this node may read it, and writes go to the owner.
var ErrOwnedElsewhere = errors.New("host: the world is owned by another node")

// ErrSteppedDown reports a node that owned a Postgres world and lost its
// lease to another: it writes nothing more (pgdb fences every write), and
// says so.
var ErrSteppedDown = errors.New("host: this node stepped down: another node took the world's lease")

// PostgresConfig is postgres.json: which database and schema hold the
// world, and who this node is. The URL holds no password: aos never writes
// one (it comes from PGPASSWORD, PGPASSFILE or ~/.pgpass, as for psql).
type PostgresConfig struct {
	URL    string `json:"url"`
	Schema string `json:"schema"`
	// Node is this node's identity, made by init: the owner its lease
	// names. A node that restarts takes its own lease back at once; copy
	// no world directory to make a second node (run init --postgres in
	// another directory: it joins the world).
	Node string `json:"node"`
}

// Postgres reads postgres.json: nil (and no error) for a world that is not
// on PostgreSQL.
func (d Dir) Postgres() (*PostgresConfig, error) {
	b, err := os.ReadFile(d.Path(PostgresFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pc PostgresConfig
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pc); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(PostgresFile), err)
	}
	switch {
	case pc.URL == "":
		return nil, fmt.Errorf("%s: no \"url\"", d.Path(PostgresFile))
	case pc.Node == "":
		return nil, fmt.Errorf("%s: no \"node\"", d.Path(PostgresFile))
	}
	return &pc, nil
}

// where names the database in messages (no password: the URL has none).
func (pc *PostgresConfig) where() string {
	return fmt.Sprintf("schema %s of %s", pc.schema(), pc.URL)
}

func (pc *PostgresConfig) schema() string {
	if pc.Schema == "" {
		return pgdb.DefaultSchema
	}
	return pc.Schema
}

// StripPassword returns the connection URL without its password (in the
// user info or a password parameter), and whether it had one. Only URLs
// (postgres:// or postgresql://) are accepted: a keyword/value string is
// refused, so what aos writes is always a URL it has checked.
func StripPassword(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", false, fmt.Errorf("--postgres %q: want a URL such as postgres://user@host:5432/db (keyword=value strings are not accepted)", redact(raw))
	}
	had := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			had = true
			u.User = url.User(u.User.Username())
		}
	}
	q := u.Query()
	if q.Has("password") {
		had = true
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), had, nil
}

// redact hides what may be a password in a connection string for a
// message: everything after "://" up to "@", and password=... values.
func redact(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.LastIndex(s, "@"); j > i {
			s = s[:i+3] + "***" + s[j:]
		}
	}
	if i := strings.Index(s, "password="); i >= 0 {
		j := strings.IndexAny(s[i:], " &")
		if j < 0 {
			j = len(s) - i
		}
		s = s[:i] + "password=***" + s[i+j:]
	}
	return s
}

// newNodeID is a node's identity: the host's name, for people, and random
// bits, so that two nodes on one machine differ.
func newNodeID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("node identity: %w", err)
	}
	name, _ := os.Hostname()
	if name == "" {
		name = "node"
	}
	return name + "/" + hex.EncodeToString(b), nil
}

// role is how a process opens a Postgres world's store.
type role int

const (
	// roleOwner takes the lease (claimWorld) and writes.
	roleOwner role = iota
	// roleReader takes no lease: it reads the journal as the owner left it
	// when it opened, and writes nothing (pgdb refuses).
	roleReader
)

// pgStore is a Postgres world's database as this node holds it: as owner,
// its lease, kept by a goroutine that renews it, or as a reader, none.
type pgStore struct {
	dir  Dir      // the node's directory ("" while init makes it)
	lock *os.File // its lock, held by an owner (lockNode)
	cfg  PostgresConfig
	db   *pgdb.DB
	j    *pgdb.Journal
	ttl  time.Duration
	log  *slog.Logger

	mu    sync.Mutex
	lease *pgdb.Lease // nil for a reader
	down  error       // why it stepped down; nil while it owns
	// onDown is called once, with the reason, when it steps down (the
	// host's metric and status).
	onDown []func(error)

	stop context.CancelFunc
	done chan struct{}

	// renewFailures counts renewals that failed for a reason other than
	// another owner (the database away, slow or refusing); renewedAt is
	// when the last renewal succeeded, by this node's clock (unix ns; 0
	// before the first). Both are for the metrics: an operator alerts
	// before the lease lapses, not after.
	renewFailures atomic.Uint64
	renewedAt     atomic.Int64
}

// pgOpenTimeout bounds opening the database and taking the lease.
const pgOpenTimeout = time.Minute

// openPostgres connects to the world's database and opens its journal: as
// owner (taking the lease, renewed in the background until close) or as a
// reader. url overrides pc.URL (init's, which may carry a password).
func openPostgres(d Dir, pc *PostgresConfig, url string, so StoreOptions, r role, log *slog.Logger) (*pgStore, error) {
	s, err := openPostgresDB(pc, url, so, log)
	if err != nil {
		return nil, err
	}
	s.dir = d
	return s, s.open(so, r)
}

// NodeLockFile is the lock an owning process holds on its node's
// directory (flock, released when the process ends however it ends).
const NodeLockFile = "node.lock"

// ErrNodeLocked reports a node directory another process of this machine
// owns the world through (aosd serve, or a command that writes).
var ErrNodeLocked = errors.New("host: another process owns the world through this node directory")

// lockNode takes the node directory's lock: two processes on one node
// directory would hold one lease (the node's identity is the owner), so
// the second would fence the first behind its back. Badger's directory
// lock keeps the same rule for a Badger world.
func lockNode(d Dir) (*os.File, error) {
	f, err := os.OpenFile(d.Path(NodeLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", d.Path(NodeLockFile), err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s is locked)", ErrNodeLocked, d.Path(NodeLockFile))
		}
		return nil, fmt.Errorf("lock %s: %w", d.Path(NodeLockFile), err)
	}
	return f, nil
}

// open opens the journal of s, as a reader or as owner (taking the lease).
// On error s is closed.
func (s *pgStore) open(so StoreOptions, r role) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgOpenTimeout)
	defer cancel()
	db, pc, log, ttl := s.db, &s.cfg, s.log, s.ttl
	if r == roleOwner && s.dir != "" && !so.NodeLocked {
		if s.lock, err = lockNode(s.dir); err != nil {
			db.Close()
			return err
		}
		defer func() {
			if err != nil {
				s.lock.Close()
				s.lock = nil
			}
		}()
	}
	if r == roleReader {
		if s.j, err = db.Follow(ctx); err != nil {
			db.Close()
			return err
		}
		return nil
	}
	l, cur, err := claimWorld(ctx, db, pgdb.Claim{Owner: pc.Node, Address: so.Advertise, TTL: ttl})
	if err != nil {
		db.Close()
		if cur != nil {
			return &OwnedError{Current: *cur, Where: pc.where()}
		}
		return err
	}
	if s.j, err = db.Journal(ctx, l); err != nil {
		// Give the lease back, so another node need not wait for it to
		// lapse: this one never wrote with it.
		if rerr := db.Release(ctx, l); rerr != nil && !errors.Is(rerr, pgdb.ErrFenced) {
			err = errors.Join(err, fmt.Errorf("release the lease taken: %w", rerr))
		}
		db.Close()
		return err
	}
	s.lease = &l
	s.renewedAt.Store(time.Now().UnixNano())
	s.j.OnFenced(func(err error) { s.stepDown(err, false) })
	log.Info("took the world's lease", "node", pc.Node, "epoch", l.Epoch, "address", l.Address, "until", l.Until)
	kctx, kcancel := context.WithCancel(context.Background())
	s.stop, s.done = kcancel, make(chan struct{})
	go s.keep(kctx)
	return nil
}

// OwnedError is ErrOwnedElsewhere with the lease that another node holds.
type OwnedError struct {
	Current pgdb.Current
	Where   string // the database
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("%v: %s (address %q) holds the lease of %s at epoch %d until %s",
		ErrOwnedElsewhere, e.Current.Owner, e.Current.Address, e.Where, e.Current.Epoch, e.Current.Until.UTC().Format(time.RFC3339))
}

func (e *OwnedError) Unwrap() error { return ErrOwnedElsewhere }

// openPostgresDB connects to the world's database (url overrides pc.URL)
// without opening its journal or taking its lease: enough to read and list
// its files.
func openPostgresDB(pc *PostgresConfig, url string, so StoreOptions, log *slog.Logger) (*pgStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if url == "" {
		url = pc.URL
	}
	ttl := so.LeaseTTL
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgOpenTimeout)
	defer cancel()
	db, err := pgdb.Open(ctx, pgdb.Config{URL: url, Schema: pc.schema(), Logger: log})
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "28P01" || pe.Code == "28000") {
			return nil, fmt.Errorf("%s: %w (aos keeps no password: give it through PGPASSWORD, PGPASSFILE or ~/.pgpass)", pc.where(), err)
		}
		return nil, fmt.Errorf("%s: %w", pc.where(), err)
	}
	return &pgStore{cfg: *pc, db: db, ttl: ttl, log: log}, nil
}

// claimWorld is the one place a node decides whether it owns a Postgres
// world: it takes the lease (pgdb.DB.Acquire, the next epoch) when it is
// free, lapsed, or this node's own (a node that restarted), and otherwise
// returns the holder (cur) with ErrOwnedElsewhere. A standby calls it
// until it owns.
func claimWorld(ctx context.Context, db *pgdb.DB, c pgdb.Claim) (l pgdb.Lease, cur *pgdb.Current, err error) {
	l, err = db.Acquire(ctx, c)
	if err == nil {
		return l, nil, nil
	}
	if !errors.Is(err, pgdb.ErrLeaseHeld) {
		return pgdb.Lease{}, nil, err
	}
	now, cerr := db.Current(ctx)
	if cerr != nil {
		return pgdb.Lease{}, nil, errors.Join(err, cerr)
	}
	return pgdb.Lease{}, &now, fmt.Errorf("%w: %w", ErrOwnedElsewhere, err)
}

// keep renews the lease every third of its TTL until ctx ends. A renewal
// the database refuses because another node took the lease steps the node
// down; any other failure is logged and retried: the lease may lapse
// meanwhile, and then another node may take it, which the next renewal
// (or append) finds. Safety never rests on this loop: pgdb fences every
// write by the lease's epoch.
func (s *pgStore) keep(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		l, down := *s.lease, s.down
		s.mu.Unlock()
		if down != nil {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, s.ttl/3)
		nl, err := s.db.Renew(rctx, l, s.ttl)
		cancel()
		switch {
		case err == nil:
			s.mu.Lock()
			s.lease = &nl
			s.mu.Unlock()
			s.renewedAt.Store(time.Now().UnixNano())
		case errors.Is(err, pgdb.ErrFenced):
			s.stepDown(err, true)
			return
		case ctx.Err() != nil:
			return
		default:
			s.renewFailures.Add(1)
			s.log.Warn("could not renew the world's lease; retrying (the lease may lapse, and another node take it)", "epoch", l.Epoch, "err", err)
		}
	}
}

// stepDown makes this node stop writing the world: its journal refuses
// every append from now on (the kernel then fails stop, as on every storage
// failure; failJournal false: the journal failed already, on a fenced
// append), and the step is logged and reported to onDown.
func (s *pgStore) stepDown(why error, failJournal bool) {
	s.mu.Lock()
	if s.down != nil || s.lease == nil {
		s.mu.Unlock()
		return
	}
	s.down = fmt.Errorf("%w (epoch %d): %w", ErrSteppedDown, s.lease.Epoch, why)
	hooks, down := s.onDown, s.down
	s.mu.Unlock()
	if failJournal {
		s.j.Fail(down)
	}
	s.log.Error("stepped down: another node owns the world now; this node writes nothing more", "node", s.cfg.Node, "err", why)
	for _, f := range hooks {
		f(down)
	}
}

// fenced is called with an error a write met: a fenced one steps the node
// down at once rather than at the next renewal.
func (s *pgStore) fenced(err error) {
	if errors.Is(err, pgdb.ErrFenced) {
		s.stepDown(err, true)
	}
}

// status is the lease as this node holds it: nil for a reader.
func (s *pgStore) status() (l *pgdb.Lease, down error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil {
		return nil, nil
	}
	cp := *s.lease
	return &cp, s.down
}

// view is the node's hold on the lease as GET /v1/status shows it.
func (s *pgStore) view() *api.LeaseView {
	l, down := s.status()
	v := &api.LeaseView{Node: s.cfg.Node}
	if l != nil {
		v.Epoch, v.Owner = l.Epoch, down == nil
	}
	if down != nil {
		v.SteppedDown = down.Error()
	}
	return v
}

// close stops renewing and, if this node still owns the world, releases
// the lease (its epoch is fenced, and another node may take it at once);
// then it closes the database.
func (s *pgStore) close() error {
	var err error
	if s.stop != nil {
		s.stop()
		<-s.done
		l, down := s.status()
		if l != nil && down == nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.ttl)
			if rerr := s.db.Release(ctx, *l); rerr != nil && !errors.Is(rerr, pgdb.ErrFenced) {
				err = fmt.Errorf("release the lease: %w", rerr)
			}
			cancel()
		}
	}
	if s.j != nil {
		s.j.Close()
	}
	err = errors.Join(err, s.db.Close())
	if s.lock != nil {
		s.lock.Close() // after the lease was released
	}
	return err
}

// pgFiles are a Postgres world's files, in its database.
type pgFiles struct{ s *pgStore }

func (f pgFiles) read(name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgOpenTimeout)
	defer cancel()
	return f.s.db.ReadFile(ctx, name)
}

func (f pgFiles) write(name string, data []byte) error {
	return f.s.writeFiles(map[string][]byte{name: data})
}

func (f pgFiles) where(name string) string {
	return fmt.Sprintf("%s (world file in %s)", name, f.s.cfg.where())
}

// connectPostgres is Connect for a world on PostgreSQL that no daemon of
// this directory answers for. It goes through the node that owns the world
// when one does and answers (its address is in the lease, the token in the
// database), unless opt.Direct; otherwise it opens the world here: as a
// reader for opt.ReadOnly, else as owner, taking the lease, which another
// live owner's lease refuses (naming it).
func connectPostgres(ctx context.Context, d Dir, pc *PostgresConfig, opt ConnectOptions, found daemonFound) (*Conn, error) {
	if found.info != nil && !opt.ReadOnly {
		// This directory's daemon is alive but does not answer: taking
		// the lease (this node's own) would fence it behind its back.
		return nil, &api.Error{Code: api.CodeLocked, Where: string(d), Message: fmt.Sprintf(
			"world is served by aosd serve (pid %d, %s) which does not answer (%v); stop it or wait: this node's lease is its", found.info.PID, found.info.Addr, found.probeErr)}
	}
	pg, err := openPostgresDB(pc, "", opt.Store, opt.Config.Logger)
	if err != nil {
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	pg.dir = d
	if !opt.Direct {
		if c, ok := ownerClient(ctx, pg); ok {
			return &Conn{Backend: c, Remote: true, Addr: strings.TrimPrefix(c.Base, "http://")}, pg.close()
		}
	}
	r := roleOwner
	if opt.ReadOnly {
		r = roleReader
	}
	if err := pg.open(opt.Store, r); err != nil {
		var owned *OwnedError
		if errors.As(err, &owned) {
			return nil, api.Wrap(err, 0, api.CodeLocked, string(d), fmt.Sprintf(
				"world is owned by node %s (address %q) until %s and it does not answer here; run read-only commands, or wait for it (or its lease to lapse)",
				owned.Current.Owner, owned.Current.Address, owned.Current.Until.UTC().Format(time.RFC3339)))
		}
		if isLocked(err) {
			return nil, found.openError(d, opt, err)
		}
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	st := pgStoreOf(pg)
	w, cfg, err := st.openKernel(opt.Config, opt.Store.wasmCache(d))
	if err != nil {
		st.close()
		return nil, fmt.Errorf("open world %s: %w", d, err)
	}
	return localConn(w, st, cfg), nil
}

// ownerClient is a client of the node that holds the world's lease, if
// another node holds it, names an address, and answers with the world's
// token.
func ownerClient(ctx context.Context, pg *pgStore) (*api.Client, bool) {
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cur, err := pg.db.Current(cctx)
	if err != nil || !cur.Held || cur.Owner == pg.cfg.Node || cur.Address == "" {
		return nil, false
	}
	tok, err := readToken(pgFiles{pg})
	if err != nil {
		return nil, false
	}
	c := &api.Client{Base: "http://" + cur.Address, Token: tok}
	if c.Ping(cctx) != nil {
		return nil, false
	}
	return c, true
}

// watchLease reports the node's hold on the world's lease in its metrics:
// the epoch it holds, and whether it still owns the world (0 once it
// stepped down).
func watchLease(pg *pgStore, m *api.Metrics) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aos_lease_epoch",
			Help: "The epoch of the lease this node holds on its world on PostgreSQL."},
			func() float64 {
				if l, _ := pg.status(); l != nil {
					return float64(l.Epoch)
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aos_lease_owned",
			Help: "1 while this node owns its world on PostgreSQL; 0 once it stepped down (another node took the lease)."},
			func() float64 {
				if l, down := pg.status(); l != nil && down == nil {
					return 1
				}
				return 0
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "aos_lease_renewal_failures_total",
			Help: "Renewals of this node's lease that failed for a reason other than another node owning the world (the database away, slow or refusing); the lease lapses if they go on for its term."},
			func() float64 { return float64(pg.renewFailures.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "aos_lease_renewed_timestamp_seconds",
			Help: "When this node last took or renewed its lease, by its own clock (unix seconds; 0 before the first renewal): alert when time() minus this nears the lease's term."},
			func() float64 { return float64(pg.renewedAt.Load()) / 1e9 }),
	)
}

// identityFile is the world file holding the world's identity, written by
// InitPostgres once the kernel journaled it, for the nodes that join.
const identityFile = "identity"

// PostgresInit names the database of a new world on PostgreSQL (aosd init
// --postgres URL --schema NAME).
type PostgresInit struct {
	// URL is a postgres:// URL. A password in it is used to connect and
	// not written; later commands take it from PGPASSWORD, PGPASSFILE or
	// ~/.pgpass.
	URL string
	// Schema is the PostgreSQL schema holding the world (default "aos").
	Schema string
}

// InitPostgres makes d a node of a world on PostgreSQL: it writes
// postgres.json (the database's URL without a password, the schema, and
// this node's identity), and, when the schema holds no world yet, creates
// one there: the token, the executor key and the identity, written under
// the world's lease (taken and released). When the schema holds a world
// already, d joins it (Created.Joined) and nothing is written to the
// database. It refuses a directory that holds a world.
func InitPostgres(d Dir, p PostgresInit, cfg kernel.Config, so StoreOptions) (Created, error) {
	if err := d.checkNew(); err != nil {
		return Created{}, err
	}
	clean, had, err := StripPassword(p.URL)
	if err != nil {
		return Created{}, err
	}
	node, err := newNodeID()
	if err != nil {
		return Created{}, err
	}
	pc := &PostgresConfig{URL: clean, Schema: p.Schema, Node: node}
	pc.Schema = pc.schema()
	pg, err := openPostgresDB(pc, p.URL, so, cfg.Logger)
	if err != nil {
		return Created{}, err
	}
	c, err := createIn(d, pg, so, cfg)
	if err = errors.Join(err, pg.close()); err != nil {
		return Created{}, err
	}
	c.Postgres, c.PasswordNotWritten = pc, had
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return Created{}, fmt.Errorf("create world directory: %w", err)
	}
	b, _ := json.MarshalIndent(pc, "", "  ")
	if err := writeNew(d.Path(PostgresFile), append(b, '\n')); err != nil {
		return Created{}, err
	}
	return c, syncDir(string(d))
}

// createIn creates the world in pg's schema unless one is there (then it
// reports it joined). The check is made again under the lease, so two
// inits racing on one schema create one world.
func createIn(d Dir, pg *pgStore, so StoreOptions, cfg kernel.Config) (Created, error) {
	if c, ok, err := existing(pg); ok || err != nil {
		return c, err
	}
	if err := pg.open(so, roleOwner); err != nil {
		return Created{}, err
	}
	if c, ok, err := existing(pg); ok || err != nil {
		return c, err
	}
	tok, key, pub, err := newSecrets()
	if err != nil {
		return Created{}, err
	}
	if err := pg.writeFiles(map[string][]byte{TokenFile: tok, ExecutorKey: key}); err != nil {
		return Created{}, err
	}
	st := &store{pg: pg, log: pg.j, raw: pg.db.CAS(pg.lease), files: pgFiles{pg}}
	st.guard = cas.NewGuard(st.raw)
	w, _, err := st.openKernel(cfg, so.wasmCache(d))
	if err != nil {
		return Created{}, fmt.Errorf("create the world in %s: %w", pg.cfg.where(), err)
	}
	id := w.Identity()
	err = w.Close()
	if st.engine != nil {
		err = errors.Join(err, st.engine.Close(context.Background()))
	}
	if err == nil {
		err = pg.writeFiles(map[string][]byte{identityFile: []byte(id)})
	}
	if err != nil {
		return Created{}, err
	}
	return Created{World: id, ExecutorPublicKey: hex.EncodeToString(pub)}, nil
}

// existing reports the world pg's schema holds, if it holds one (its
// token and executor key are written together, in one transaction).
func existing(pg *pgStore) (Created, bool, error) {
	f := pgFiles{pg}
	key, err := loadExecutorKey(f)
	if errors.Is(err, fs.ErrNotExist) {
		return Created{}, false, nil
	}
	if err != nil {
		return Created{}, false, err
	}
	c := Created{Joined: true, ExecutorPublicKey: hex.EncodeToString(key.Public().(ed25519.PublicKey))}
	id, err := f.read(identityFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Created{}, false, err
	}
	c.World = string(id)
	return c, true, nil
}

// writeFiles writes world files under the lease this node holds.
func (s *pgStore) writeFiles(files map[string][]byte) error {
	l, down := s.status()
	if down != nil {
		return down
	}
	if l == nil {
		return fmt.Errorf("write world files: %w", pgdb.ErrNotOwner)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgOpenTimeout)
	defer cancel()
	err := s.db.WriteFiles(ctx, *l, files)
	s.fenced(err)
	return err
}
