package pgdb

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// How a follower learns of the owner's appends. The owner's appends do not
// NOTIFY in their own transaction: PostgreSQL serializes every notifying
// commit of a cluster behind one lock held through the commit's WAL flush,
// which would serialize the group commits of all partitions. Instead the
// owner's notifier goroutine, woken after each durable append, sends the
// height it has reached (coalescing whatever was appended meanwhile) with
// pg_notify on the asynchronous pool: no WAL flush is waited for, and an
// append never waits for the notifier. A follower LISTENs on a connection
// of its own, moves its height to what a notification says, and reads the
// partition's row every FollowPoll when none comes, so an owner that died
// between an append and its notification delays a follower by at most that.

// channel is the notification channel of the partition's journal.
func (d *DB) channel() string { return fmt.Sprintf("aos.%s.journal.%d", d.cfg.Schema, part) }

// start runs fn as the journal's background goroutine until Close.
func (j *Journal) start(fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	j.stop, j.done = cancel, make(chan struct{})
	go func() {
		defer close(j.done)
		fn(ctx)
	}()
}

// notifier tells followers the height after appends (an owner's journal).
func (j *Journal) notifier(ctx context.Context) {
	var sent uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
		}
		h := j.Height()
		if h <= sent {
			continue
		}
		nctx, cancel := context.WithTimeout(ctx, j.db.cfg.Timeout)
		_, err := j.db.async.Exec(nctx, "SELECT pg_notify($1, $2)", j.db.channel(), strconv.FormatUint(h, 10))
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				j.db.cfg.Logger.Warn("pgdb: notify followers of the journal's height", "height", h, "err", err)
			}
			continue // the followers' poll catches up
		}
		sent = h
	}
}

// Follow opens the partition's journal for reading only, the way a standby
// follows its owner: Append and DropBefore are ErrNotOwner, and Height and
// Wait move as the owner's appends become durable (notifications, and a
// read of the partition's row every FollowPoll).
func (d *DB) Follow(ctx context.Context) (*Journal, error) {
	j := &Journal{db: d}
	if _, err := j.load(ctx); err != nil {
		return nil, err
	}
	if err := d.track(j); err != nil {
		return nil, err
	}
	j.start(j.follow)
	return j, nil
}

// follow keeps a follower's height up with the owner's, reconnecting after
// a lost connection.
func (j *Journal) follow(ctx context.Context) {
	for {
		err := j.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		j.db.cfg.Logger.Warn("pgdb: following the journal: reconnecting", "err", err)
		t := time.NewTimer(j.db.cfg.FollowPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listen LISTENs on one connection, then moves the height on every
// notification and re-reads it when none came for FollowPoll.
func (j *Journal) listen(ctx context.Context) error {
	cc := j.db.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{j.db.channel()}.Sanitize()); err != nil {
		return err
	}
	// Listening first, then reading: an append after the read is notified.
	if err := j.refresh(ctx, conn); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, j.db.cfg.FollowPoll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			if h, perr := strconv.ParseUint(n.Payload, 10, 64); perr == nil && h > j.tip.Height() {
				j.tip.Advance(h)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case wctx.Err() != nil && !conn.IsClosed(): // no notification for FollowPoll
			if err := j.refresh(ctx, conn); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// refresh reads the partition's height and First.
func (j *Journal) refresh(ctx context.Context, conn *pgx.Conn) error {
	var height, first int64
	if err := conn.QueryRow(ctx, "SELECT height, first FROM partitions WHERE part = $1", part).Scan(&height, &first); err != nil {
		return err
	}
	if h := uint64(height); h > j.tip.Height() {
		j.tip.Advance(h)
	}
	j.raiseFirst(uint64(first))
	return nil
}
