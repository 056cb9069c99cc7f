package pgdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aos-kernel/aos/journal"
)

// appendSQL is a whole group commit in one statement, so one round trip
// and one transaction: the fence moves the partition's height from the
// expected one to the frame's last seq, but only while the epoch is the
// owner's; the frame and its marks are inserted only if the fence did.
// Updating the partition's row takes its row lock, which an Acquire's
// update takes too, so an append and a takeover are ordered: an append
// that commits first is in the journal the new owner opens; one that comes
// after finds the new epoch (PostgreSQL re-checks the WHERE clause on the
// row's newest version once the lock is granted) and inserts nothing.
const appendSQL = `
WITH fence AS (
	UPDATE partitions SET height = $4
	WHERE part = $1 AND epoch = $2 AND height = $3
	RETURNING part
), marked AS (
	INSERT INTO marks (part, kind, seq)
	SELECT f.part, m.kind, m.seq FROM fence f, unnest($6::text[], $7::bigint[]) AS m(kind, seq)
)
INSERT INTO frames (part, first_seq, last_seq, frame)
SELECT part, $3 + 1, $4, $5 FROM fence`

// readSQL reads the frames from the one holding $2 on, through the height
// $3, in seq order, at most $4 of them: a range read takes them in chunks,
// each its own statement, so no snapshot stays open across a long read.
const readSQL = `
SELECT first_seq, frame FROM frames
WHERE part = $1 AND first_seq <= $3 AND first_seq >= coalesce(
	(SELECT max(first_seq) FROM frames WHERE part = $1 AND first_seq <= $2), $2)
ORDER BY first_seq LIMIT $4`

// Chunks of a range read: the first is small (a read of one record, as the
// kernel's lookups of a snapshot record are, fetches a few frames), each
// next one doubles, up to maxReadChunk frames.
const (
	firstReadChunk = 4
	maxReadChunk   = 256
)

// Journal is a partition's journal in the database. An owner's journal
// (DB.Journal) appends, fenced by its lease's epoch; a follower's
// (DB.Follow) only reads, and its height follows the owner's appends. Any
// number of goroutines may Read and Wait; Appends are serialized.
type Journal struct {
	db    *DB
	epoch uint64 // the owner's lease epoch; 0 for a follower
	tip   journal.Tip
	first atomic.Uint64 // the lowest seq held, as last seen

	appendMu sync.Mutex  // serializes Append
	failed   error       // sticky; guarded by appendMu
	onFenced func(error) // OnFenced's; guarded by appendMu

	dropMu sync.Mutex // serializes DropBefore; held while archive runs

	// The background goroutine: an owner's notifier, a follower's
	// listener (follow.go).
	wake      chan struct{} // an owner's appends nudge the notifier
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Journal opens the partition's journal for the holder of l: every Append
// is fenced by l's epoch. Its height and First are the database's at the
// call, which is after l was acquired, so they include every append of the
// owners before l. l no longer current is ErrFenced.
func (d *DB) Journal(ctx context.Context, l Lease) (*Journal, error) {
	if l.Epoch == 0 {
		return nil, fmt.Errorf("%w: a lease of epoch 0 was never acquired", ErrNotOwner)
	}
	j := &Journal{db: d, epoch: l.Epoch, wake: make(chan struct{}, 1)}
	epoch, err := j.load(ctx)
	if err != nil {
		return nil, err
	}
	if epoch != l.Epoch {
		return nil, fmt.Errorf("journal: open: %w", d.fencedError(ctx, "open the journal", l.Epoch))
	}
	if err := d.track(j); err != nil {
		return nil, err
	}
	j.start(j.notifier)
	return j, nil
}

// load reads the partition's height and First into the journal and
// returns its epoch.
func (j *Journal) load(ctx context.Context) (uint64, error) {
	var epoch, height, first int64
	err := j.db.pool.QueryRow(ctx, "SELECT epoch, height, first FROM partitions WHERE part = $1", part).Scan(&epoch, &height, &first)
	if err != nil {
		return 0, fmt.Errorf("journal: open: read partition %d: %w", part, err)
	}
	if h := uint64(height); h > j.tip.Height() {
		j.tip.Advance(h)
	}
	j.first.Store(uint64(first))
	return uint64(epoch), nil
}

// Height is the last durable sequence number, 0 when the journal is empty.
func (j *Journal) Height() uint64 { return j.tip.Height() }

// Wait blocks until Height() > after, returning the new height, or until ctx
// is done, returning ctx.Err().
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	return j.tip.Wait(ctx, after)
}

// First is the lowest seq the journal holds, as this handle last saw it: 1
// until DropBefore drops a frame, then the first seq of the oldest frame
// kept (Height()+1 once every frame was dropped).
func (j *Journal) First() uint64 { return j.first.Load() }

// Epoch is the lease epoch the journal's appends are fenced by; 0 for a
// follower.
func (j *Journal) Epoch() uint64 { return j.epoch }

// Append stores recs as one frame, with their marks, in one statement that
// commits only while this journal's epoch is the partition's and the
// partition's height is this journal's (appendSQL), and returns once the
// commit is durable (synchronous_commit). Only then do Height and waiters
// see it. recs[0].Seq must be Height()+1 and the seqs consecutive, or
// Append returns journal.ErrGap and stores nothing. A fenced append is
// ErrFenced; an append the database refuses or that may or may not have
// committed (a lost connection, a timeout) fails the journal: every later
// Append returns journal.ErrFailed, and the database holds whatever
// committed, which the next owner's journal reads. Appending no records is
// a no-op. recs is not retained.
func (j *Journal) Append(recs []journal.Record) error {
	if len(recs) == 0 {
		return nil
	}
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	if j.epoch == 0 {
		return fmt.Errorf("journal: append: %w", ErrNotOwner)
	}
	if j.failed != nil {
		return fmt.Errorf("%w (%v)", journal.ErrFailed, j.failed)
	}
	height := j.Height()
	if err := journal.CheckContinues(height, recs); err != nil {
		return err
	}
	first, last := recs[0].Seq, recs[len(recs)-1].Seq
	if last > math.MaxInt64 {
		return fmt.Errorf("journal: append %d..%d: seqs past %d do not fit the database", first, last, int64(math.MaxInt64))
	}
	var kinds []string
	var seqs []int64
	for _, r := range recs {
		if journal.Indexed(r.Kind) {
			kinds = append(kinds, string(r.Kind))
			seqs = append(seqs, int64(r.Seq))
		}
	}
	ctx, cancel := j.db.ctx()
	defer cancel()
	tag, err := j.db.pool.Exec(ctx, appendSQL, part, int64(j.epoch), int64(height), int64(last),
		journal.EncodeFrame(recs), kinds, seqs)
	if err == nil && tag.RowsAffected() != 1 {
		err = j.refusal(ctx, height)
	}
	if err != nil {
		j.failed = err
		if j.onFenced != nil && errors.Is(err, ErrFenced) {
			j.onFenced(err)
		}
		return fmt.Errorf("journal: append %d..%d: %w", first, last, err)
	}
	j.tip.Advance(last)
	select {
	case j.wake <- struct{}{}:
	default: // the notifier has a wake-up pending already
	}
	return nil
}

// OnFenced has fn called with the error when an append is fenced (another
// owner took the lease), before that Append returns: the owner's host
// learns it lost the world from the write that found out. fn runs while
// the journal's appends are held and must not call the journal.
func (j *Journal) OnFenced(fn func(error)) {
	j.appendMu.Lock()
	j.onFenced = fn
	j.appendMu.Unlock()
}

// Fail makes every later Append return journal.ErrFailed naming err, as
// after an append the fence refused: an owner that learns it lost its
// lease (a renewal refused) stops before its next append meets the fence.
// It waits for an append under way. A journal failed already keeps its
// first reason.
func (j *Journal) Fail(err error) {
	j.appendMu.Lock()
	defer j.appendMu.Unlock()
	if j.failed == nil {
		j.failed = err
	}
}

// refusal says why the fence refused an append expected at height: the
// epoch moved on (ErrFenced), or the journal in the database does not end
// at height (ErrConflict).
func (j *Journal) refusal(ctx context.Context, height uint64) error {
	var epoch, dbHeight int64
	err := j.db.pool.QueryRow(ctx, "SELECT epoch, height FROM partitions WHERE part = $1", part).Scan(&epoch, &dbHeight)
	if err != nil {
		return fmt.Errorf("the fence refused the append; reading why: %w", err)
	}
	if uint64(epoch) != j.epoch {
		return j.db.fencedError(ctx, "append", j.epoch)
	}
	return fmt.Errorf("%w: the database's journal ends at seq %d, this owner's (epoch %d) at seq %d", ErrConflict, dbHeight, j.epoch, height)
}

// Read calls fn for every durable record with seq >= from, in order, until
// fn returns false or an error (which Read returns). Records past the
// Height at the call are not seen. from 0 reads from the start. A from
// below First (the start included, once retention dropped it) is
// journal.ErrTruncated, and so is a read overtaken by a DropBefore while it
// ran: it hands fn every record from from on, or a prefix of them and then
// ErrTruncated, never a gap. fn runs while its chunk of frames is being
// received, on a connection of the pool; it may Read and Append.
func (j *Journal) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	height := j.Height()
	from = max(from, 1)
	if from > height {
		return nil
	}
	if first := j.First(); from < first {
		return journal.TruncatedError(first, from)
	}
	r := &reader{j: j, from: from, height: height, next: from, fn: fn}
	for chunk := firstReadChunk; ; chunk = min(2*chunk, maxReadChunk) {
		n, done, err := r.chunk(chunk)
		if done || err != nil {
			return err
		}
		if r.scan != nil && r.next > r.height {
			return nil // the last frame ended at the height
		}
		if n < chunk {
			// The frames ran out before the height: dropped meanwhile,
			// or the journal is corrupt.
			if err := r.truncated(); err != nil {
				return err
			}
			if r.scan == nil {
				return fmt.Errorf("%w: no frame holds seq %d", journal.ErrCorrupt, from)
			}
			return r.scan.End()
		}
	}
}

// reader is one range read, taken in chunks of frames.
type reader struct {
	j            *Journal
	from, height uint64
	next         uint64        // the seq the next frame must start at
	scan         *journal.Scan // made at the first frame
	fn           func(journal.Record) (bool, error)
}

// chunk reads up to n frames from the one holding r.next on and hands their
// records to the scan. It returns how many frames came; done is true once
// the read is over (fn stopped it or failed, the height was reached, or a
// frame was missing).
func (r *reader) chunk(n int) (got int, done bool, err error) {
	clock := r.j.db.waitClock()
	defer clock.stop()
	rows, err := r.j.db.pool.Query(clock.ctx, readSQL, part, int64(r.next), int64(r.height), n)
	if err != nil {
		return 0, true, fmt.Errorf("journal: read from seq %d: %w", r.from, err)
	}
	defer rows.Close()
	for rows.Next() {
		var fs int64
		var frame pgtype.DriverBytes // valid until the next row: DecodeFrame copies
		if err := rows.Scan(&fs, &frame); err != nil {
			return got, true, fmt.Errorf("journal: read from seq %d: %w", r.from, err)
		}
		recs, err := journal.DecodeFrame(uint64(fs), frame)
		if err != nil {
			return got, true, err
		}
		got++
		if start := recs[0].Seq; start > r.next || (r.scan == nil && start+uint64(len(recs)) <= r.from) {
			// The frame holding r.next is gone: dropped since the read
			// began, or never there.
			if err := r.truncated(); err != nil {
				return got, true, err
			}
			if r.scan == nil {
				return got, true, fmt.Errorf("%w: no frame holds seq %d (the next starts at seq %d)", journal.ErrCorrupt, r.next, start)
			}
		}
		if r.scan == nil {
			r.scan = journal.NewScan(r.from, r.height, recs[0].Seq, r.fn)
		}
		clock.pause() // fn's time is not the database's
		done, err := r.scan.Frame(recs)
		clock.resume()
		if done {
			return got, true, err
		}
		r.next = recs[len(recs)-1].Seq + 1
	}
	if err := rows.Err(); err != nil {
		return got, true, fmt.Errorf("journal: read from seq %d: %w", r.from, err)
	}
	return got, false, nil
}

// truncated is journal.ErrTruncated when retention has dropped r.next
// since the read began (the database's First is past it), nil otherwise.
func (r *reader) truncated() error {
	first, err := r.j.loadFirst()
	if err != nil {
		return fmt.Errorf("journal: read from seq %d: %w", r.from, err)
	}
	if r.next < first {
		return journal.TruncatedError(first, r.from)
	}
	return nil
}

// loadFirst reads the partition's First from the database and keeps it.
func (j *Journal) loadFirst() (uint64, error) {
	ctx, cancel := j.db.ctx()
	defer cancel()
	var first int64
	if err := j.db.pool.QueryRow(ctx, "SELECT first FROM partitions WHERE part = $1", part).Scan(&first); err != nil {
		return 0, fmt.Errorf("read the first seq: %w", err)
	}
	j.raiseFirst(uint64(first))
	return uint64(first), nil
}

// raiseFirst moves First up to first; it never moves down.
func (j *Journal) raiseFirst(first uint64) {
	for {
		old := j.first.Load()
		if first <= old || j.first.CompareAndSwap(old, first) {
			return
		}
	}
}

// ReadKind is Read restricted to records of the given kinds.
func (j *Journal) ReadKind(from uint64, kinds []journal.Kind, fn func(journal.Record) (bool, error)) error {
	return j.Read(from, journal.OnlyKinds(kinds, fn))
}

// Marks calls fn with the seq of every record of kind k, newest first,
// until fn returns false or an error (which Marks returns). k must be an
// indexed kind (journal.Indexed); others have no marks. The seqs are read
// first, so fn runs holding no connection; it may read the journal.
func (j *Journal) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	if !journal.Indexed(k) {
		return nil
	}
	height := j.Height()
	ctx, cancel := j.db.ctx()
	defer cancel()
	rows, err := j.db.pool.Query(ctx, "SELECT seq FROM marks WHERE part = $1 AND kind = $2 AND seq <= $3 ORDER BY seq DESC",
		part, string(k), int64(height))
	if err != nil {
		return fmt.Errorf("journal: marks of %s: %w", k, err)
	}
	var seqs []uint64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			rows.Close()
			return fmt.Errorf("journal: marks of %s: %w", k, err)
		}
		seqs = append(seqs, uint64(s))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("journal: marks of %s: %w", k, err)
	}
	for _, s := range seqs {
		if more, err := fn(s); err != nil || !more {
			return err
		}
	}
	return nil
}

// Close stops the journal's background goroutine (an owner's notifier, a
// follower's listener). Appends after it still work; a follower's height
// stops following.
func (j *Journal) Close() {
	j.closeOnce.Do(func() {
		if j.stop != nil {
			j.stop()
			<-j.done
		}
		j.db.untrack(j)
	})
}
