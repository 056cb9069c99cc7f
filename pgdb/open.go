package pgdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors callers branch on.
var (
	// ErrSchemaNewer reports a database whose aos schema a newer aos
	// wrote: this one does not know its tables and must not touch them.
	ErrSchemaNewer = errors.New("pgdb: the database's aos schema is newer than this aos")
	// ErrNotDurable reports a server or session on which a commit that
	// returned may still be lost (synchronous_commit or fsync off).
	ErrNotDurable = errors.New("pgdb: the server does not make commits durable")
	// ErrTooOld reports a server older than PostgreSQL 15.
	ErrTooOld = errors.New("pgdb: PostgreSQL 15 or later is required")
	// ErrFenced reports a write by an owner whose lease epoch is no longer
	// the partition's: another owner took the lease. Nothing of the write
	// was stored, and the journal refuses every later append.
	ErrFenced = errors.New("pgdb: fenced: the lease passed to another owner")
	// ErrConflict reports an append whose expected height is not the
	// journal's in the database: something else appended under the same
	// epoch (a second handle on one lease). Nothing was stored.
	ErrConflict = errors.New("pgdb: the journal in the database does not end where this owner expected")
	// ErrNotOwner reports a write through a handle that holds no lease (a
	// follower's journal, a CAS opened without a lease).
	ErrNotOwner = errors.New("pgdb: this handle holds no lease; only the owner writes")
	// ErrLeaseHeld reports an Acquire while another owner holds the lease.
	ErrLeaseHeld = errors.New("pgdb: the lease is held by another owner")
	// ErrClosed reports use of a closed DB.
	ErrClosed = errors.New("pgdb: closed")
)

// Defaults of Config.
const (
	DefaultSchema     = "aos"
	DefaultMaxConns   = 16
	DefaultTimeout    = time.Minute
	DefaultFollowPoll = time.Second
)

// minServerVersion is PostgreSQL 15 (server_version_num).
const minServerVersion = 150000

// schemaName is what Config.Schema may be: an unquoted PostgreSQL
// identifier, so it reads the same in SQL, logs and error messages.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Config says where a world's tables live and how to reach them.
type Config struct {
	// URL is a libpq connection string or postgres:// URL. Its options may
	// set anything but synchronous_commit off (refused: ErrNotDurable).
	URL string
	// Schema is the PostgreSQL schema holding the world's tables, created
	// if missing (default "aos"). One world per schema: two worlds in one
	// database use two schemas.
	Schema string
	// MaxConns bounds each of the two connection pools (default 16).
	MaxConns int32
	// Timeout bounds every operation on the database (default 1 minute).
	// An append that times out may or may not have committed: the journal
	// then fails (journal.ErrFailed) until it is opened again.
	Timeout time.Duration
	// FollowPoll is how often a follower reads the journal's height when
	// no notification came (default 1 second): a safety net, since
	// notifications reach a connected listener reliably.
	FollowPoll time.Duration
	// Logger receives the background goroutines' errors (default
	// slog.Default()).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.FollowPoll <= 0 {
		c.FollowPoll = DefaultFollowPoll
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// DB is a world's tables in one PostgreSQL schema, reached through two
// connection pools: one whose commits wait for the WAL flush (journal,
// leases, migrations) and one whose commits do not (CAS writes and
// notifications; doc.go, "Durability").
type DB struct {
	cfg    Config
	schema string // quoted for SQL
	pool   *pgxpool.Pool
	async  *pgxpool.Pool

	mu       sync.Mutex
	journals map[*Journal]struct{}
	closed   bool
}

// Open connects to the database, checks the server (version 15 or later,
// fsync and synchronous_commit on), creates or migrates the schema's
// tables, and returns the world's DB. It writes nothing but the schema:
// the lease and the journal are taken with Acquire and Journal.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	cfg = cfg.withDefaults()
	if !schemaName.MatchString(cfg.Schema) {
		return nil, fmt.Errorf("pgdb: schema name %q: want lower-case letters, digits and _ (not first a digit), at most 63", cfg.Schema)
	}
	d := &DB{cfg: cfg, schema: pgx.Identifier{cfg.Schema}.Sanitize(), journals: map[*Journal]struct{}{}}
	var err error
	if d.pool, err = d.newPool(ctx, false); err != nil {
		return nil, err
	}
	if d.async, err = d.newPool(ctx, true); err != nil {
		d.pool.Close()
		return nil, err
	}
	if err := d.migrate(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// newPool makes one of the two pools. Every connection's search_path is
// the world's schema. The synchronous pool checks each new connection
// commits durably; the asynchronous one sets synchronous_commit off.
func (d *DB) newPool(ctx context.Context, async bool) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(d.cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("pgdb: connection string: %w", err)
	}
	pc.MaxConns = d.cfg.MaxConns
	rp := pc.ConnConfig.RuntimeParams
	rp["search_path"] = d.schema
	if rp["application_name"] == "" {
		rp["application_name"] = "aos"
	}
	if async {
		rp["synchronous_commit"] = "off"
	} else {
		pc.AfterConnect = checkDurable
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgdb: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgdb: connect to %s:%d/%s: %w", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database, err)
	}
	return pool, nil
}

// checkDurable refuses a connection on which a commit that returned could
// be lost: an older server than 15, fsync off, or synchronous_commit off
// (set by the server, the database, the role or the connection string).
// Every other synchronous_commit level waits at least for the local WAL
// flush; which one a synchronous standby needs is the operator's choice.
func checkDurable(ctx context.Context, c *pgx.Conn) error {
	v, err := strconv.Atoi(c.PgConn().ParameterStatus("server_version_num"))
	if err != nil {
		var s string
		if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')").Scan(&s); err != nil {
			return fmt.Errorf("pgdb: server version: %w", err)
		}
		v, _ = strconv.Atoi(s)
	}
	if v < minServerVersion {
		return fmt.Errorf("%w: the server is %s", ErrTooOld, c.PgConn().ParameterStatus("server_version"))
	}
	var fsync, sc string
	if err := c.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sc); err != nil {
		return fmt.Errorf("pgdb: read fsync and synchronous_commit: %w", err)
	}
	if fsync != "on" {
		return fmt.Errorf("%w: fsync is %s on the server (postgresql.conf): a crash can lose what was committed", ErrNotDurable, fsync)
	}
	if sc == "off" {
		return fmt.Errorf("%w: synchronous_commit is off for this session (server, database, role or connection string): a commit can be lost after it returned; set it to on", ErrNotDurable)
	}
	return nil
}

// Schema is the PostgreSQL schema holding the world's tables.
func (d *DB) Schema() string { return d.cfg.Schema }

// ctx bounds one operation by Config.Timeout.
func (d *DB) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d.cfg.Timeout)
}

// waitClock bounds how long a streaming query keeps its caller waiting for
// the database, not how long the caller spends on the rows: a range read
// hands each frame to fn as it arrives, and fn (a replay stepping a frame's
// records, an archive writing a file) may take longer than Config.Timeout
// without anything being wrong. The clock runs only while the caller waits
// for rows: pause it before handing a row over, resume it after.
type waitClock struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
	limit  time.Duration
}

func (d *DB) waitClock() *waitClock {
	ctx, cancel := context.WithCancel(context.Background())
	return &waitClock{ctx: ctx, cancel: cancel, timer: time.AfterFunc(d.cfg.Timeout, cancel), limit: d.cfg.Timeout}
}

// pause stops the clock (if it ran out meanwhile, ctx is done and the next
// read from the database fails).
func (c *waitClock) pause() { c.timer.Stop() }

// resume restarts the clock for the next wait.
func (c *waitClock) resume() { c.timer.Reset(c.limit) }

// stop ends the clock and its context.
func (c *waitClock) stop() {
	c.timer.Stop()
	c.cancel()
}

// Close stops every journal's background work and closes the pools.
// Whatever runs on the ports (a world) must be closed first.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	js := make([]*Journal, 0, len(d.journals))
	for j := range d.journals {
		js = append(js, j)
	}
	d.mu.Unlock()
	for _, j := range js {
		j.Close()
	}
	d.async.Close()
	d.pool.Close()
	return nil
}

// track registers a journal so Close stops it.
func (d *DB) track(j *Journal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.journals[j] = struct{}{}
	return nil
}

func (d *DB) untrack(j *Journal) {
	d.mu.Lock()
	delete(d.journals, j)
	d.mu.Unlock()
}
