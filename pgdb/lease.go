package pgdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// part is the partition this package serves: a world without partitions
// has one, number 0. The tables are keyed by partition already, so
// partitions (DESIGN §13) add rows, not a migration.
const part = 0

// Lease is one owner's hold on a partition. Its epoch fences every write:
// the journal's appends and retention, and the CAS's deletes, succeed only
// while the partition's epoch is still this one.
type Lease struct {
	Epoch   uint64
	Owner   string    // who holds it: a node's identity
	Address string    // where the owner serves (for forwarding)
	Until   time.Time // when it lapses, by the database's clock
}

// Claim asks for the lease.
type Claim struct {
	Owner   string        // required: the claiming node's identity
	Address string        // where it serves; may be empty
	TTL     time.Duration // how long the lease lasts unless renewed; > 0
	// Force takes the lease even while another owner holds it: an
	// operator's failover. The old owner is fenced at once.
	Force bool
}

// Current is the partition's lease as the database holds it.
type Current struct {
	Lease
	// Held is false once the lease was released, or lapsed (by the
	// database's clock), or was never taken.
	Held bool
	// Left is how long the lease had left when it was read, by the
	// database's clock (0 unless Held): a standby reading it can look
	// again just after the lapse, whatever its own clock says.
	Left time.Duration
}

// Acquire takes the lease with the next epoch (the old epoch + 1), which
// fences every earlier owner: from the moment it commits, their appends
// fail. It succeeds when the lease is free (never taken, released, or
// lapsed by the database's clock), when c.Owner already holds it (a node
// that restarted takes its lease back at once, fencing its former
// incarnation), or with c.Force. Otherwise it is ErrLeaseHeld, naming the
// holder and when its lease lapses.
//
// Lapsing is liveness only: an owner whose lease lapsed keeps appending
// until someone acquires, and then is fenced by the epoch, not by time.
func (d *DB) Acquire(ctx context.Context, c Claim) (Lease, error) {
	if c.Owner == "" {
		return Lease{}, errors.New("pgdb: acquire: the claim names no owner")
	}
	if c.TTL <= 0 {
		return Lease{}, fmt.Errorf("pgdb: acquire for %s: ttl %s must be positive", c.Owner, c.TTL)
	}
	row := d.pool.QueryRow(ctx, `
UPDATE partitions SET epoch = epoch + 1, owner = $2, address = $3,
	lease_until = now() + $4 * interval '1 microsecond'
WHERE part = $1 AND (owner = '' OR owner = $2 OR lease_until <= now() OR $5)
RETURNING epoch, owner, address, lease_until`,
		part, c.Owner, c.Address, c.TTL.Microseconds(), c.Force)
	l, err := scanLease(row)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, cerr := d.Current(ctx)
		if cerr != nil {
			return Lease{}, fmt.Errorf("pgdb: acquire for %s: %w", c.Owner, cerr)
		}
		return Lease{}, fmt.Errorf("%w: %s (address %q) holds epoch %d until %s; %s may take it once it lapses, or with Force",
			ErrLeaseHeld, cur.Owner, cur.Address, cur.Epoch, cur.Until.UTC().Format(time.RFC3339Nano), c.Owner)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("pgdb: acquire for %s: %w", c.Owner, err)
	}
	return l, nil
}

// Renew extends l by ttl from now (the database's clock) while its epoch is
// current, even if it had lapsed: no one took it. Once another owner took
// it, Renew is ErrFenced and l is lost for good.
func (d *DB) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("pgdb: renew epoch %d: ttl %s must be positive", l.Epoch, ttl)
	}
	row := d.pool.QueryRow(ctx, `
UPDATE partitions SET lease_until = now() + $3 * interval '1 microsecond'
WHERE part = $1 AND epoch = $2
RETURNING epoch, owner, address, lease_until`, part, int64(l.Epoch), ttl.Microseconds())
	nl, err := scanLease(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, d.fencedError(ctx, "renew", l.Epoch)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("pgdb: renew epoch %d: %w", l.Epoch, err)
	}
	return nl, nil
}

// Release gives l up and fences its epoch at once (the epoch moves on), so
// nothing written through l's handles after it can land; the next Acquire
// finds the lease free. Releasing a lease another owner took already is
// ErrFenced.
func (d *DB) Release(ctx context.Context, l Lease) error {
	tag, err := d.pool.Exec(ctx, `
UPDATE partitions SET epoch = epoch + 1, owner = '', address = '', lease_until = NULL
WHERE part = $1 AND epoch = $2`, part, int64(l.Epoch))
	if err != nil {
		return fmt.Errorf("pgdb: release epoch %d: %w", l.Epoch, err)
	}
	if tag.RowsAffected() != 1 {
		return d.fencedError(ctx, "release", l.Epoch)
	}
	return nil
}

// Current reads the partition's lease: its epoch, owner and address, and
// whether it is held now by the database's clock.
func (d *DB) Current(ctx context.Context) (Current, error) {
	var c Current
	var until *time.Time
	var epoch int64
	var leftUs *int64
	err := d.pool.QueryRow(ctx, `
SELECT epoch, owner, address, lease_until, owner <> '' AND lease_until > now(),
	CASE WHEN owner <> '' AND lease_until > now()
		THEN (extract(epoch FROM lease_until - now()) * 1000000)::bigint END
FROM partitions WHERE part = $1`, part).Scan(&epoch, &c.Owner, &c.Address, &until, &c.Held, &leftUs)
	if err != nil {
		return Current{}, fmt.Errorf("pgdb: read the lease of partition %d: %w", part, err)
	}
	c.Epoch = uint64(epoch)
	if leftUs != nil {
		c.Left = time.Duration(*leftUs) * time.Microsecond
	}
	if until != nil {
		c.Until = *until
	}
	return c, nil
}

// fencedError says that epoch is no longer the partition's, and whose it
// is now. It wraps ErrFenced.
func (d *DB) fencedError(ctx context.Context, what string, epoch uint64) error {
	cur, err := d.Current(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s with epoch %d refused (%v)", ErrFenced, what, epoch, err)
	}
	if cur.Owner == "" {
		return fmt.Errorf("%w: %s with epoch %d refused: the partition is at epoch %d, released", ErrFenced, what, epoch, cur.Epoch)
	}
	return fmt.Errorf("%w: %s with epoch %d refused: the partition is at epoch %d, held by %s (address %q)", ErrFenced, what, epoch, cur.Epoch, cur.Owner, cur.Address)
}

func scanLease(row pgx.Row) (Lease, error) {
	var l Lease
	var epoch int64
	var until *time.Time
	if err := row.Scan(&epoch, &l.Owner, &l.Address, &until); err != nil {
		return Lease{}, err
	}
	l.Epoch = uint64(epoch)
	if until != nil {
		l.Until = *until
	}
	return l, nil
}
