package pgdb

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aos-kernel/aos/journal"
)

// dropChunk is how many frames one DropBefore transaction deletes: it
// bounds the frames listed in memory and how long one transaction holds
// its locks while archive runs before it.
const dropChunk = 4096

// dropSQL deletes the frames and marks below $3 and moves First to $3 in
// one statement, only while $2 is the partition's epoch: retention is a
// write, fenced like an append. It answers whether the fence held (a
// data-modifying WITH runs whether or not the query reads it).
const dropSQL = `
WITH fence AS (
	UPDATE partitions SET first = $3 WHERE part = $1 AND epoch = $2 RETURNING part
), unmarked AS (
	DELETE FROM marks WHERE part = $1 AND seq < $3 AND EXISTS (SELECT 1 FROM fence)
), dropped AS (
	DELETE FROM frames WHERE part = $1 AND first_seq < $3 AND EXISTS (SELECT 1 FROM fence)
)
SELECT count(*) FROM fence`

// DropBefore removes, oldest first, every whole frame whose last record's
// seq is below before, and the marks of their records; a frame holding
// before (or straddling it) is kept, so First() may stay below before.
// When archive is not nil it is called with each frame's first seq and its
// stored bytes (checked with journal.DecodeFrame first) before the frame is
// deleted; frame is valid only during the call. An error from archive stops
// the drop: that frame and the later ones stay, the earlier ones (already
// archived) are deleted, and the error is returned with the stats of what
// was deleted. before past Height()+1 is an error and deletes nothing;
// before <= First() deletes nothing. The height is never touched. archive
// may read the journal and Append to it, but must not call DropBefore.
//
// Frames go in chunks of up to 4096; each chunk's frames and marks are
// deleted and First moved in one transaction (dropSQL), fenced by the
// journal's epoch: a follower's journal, or one whose lease passed on,
// drops nothing (ErrNotOwner, ErrFenced). A reader sees every frame of a
// chunk or none, and First moves with them.
func (j *Journal) DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error) {
	j.dropMu.Lock()
	defer j.dropMu.Unlock()
	if j.epoch == 0 {
		return journal.DropStats{First: j.First()}, fmt.Errorf("journal: drop before seq %d: %w", before, ErrNotOwner)
	}
	height := j.Height()
	if err := journal.CheckDropBefore(before, height); err != nil {
		return journal.DropStats{First: j.First()}, err
	}
	var st journal.DropStats
	for {
		c, done, err := j.scanDroppable(before, height, archive)
		if c.frames > 0 {
			if derr := j.deleteChunk(c.newFirst); derr != nil {
				err, done = fmt.Errorf("journal: drop before seq %d: %w", before, derr), true
			} else {
				st.Frames += c.frames
				st.Records += c.records
				st.Bytes += c.bytes
			}
		}
		if err != nil || done {
			st.First = j.First()
			return st, err
		}
	}
}

// droppable is one chunk of frames DropBefore deletes.
type droppable struct {
	frames   int
	records  int
	bytes    int64
	newFirst uint64 // the first seq kept once they are gone
}

// scanDroppable finds, from First on, up to dropChunk frames whose last
// record is below before (frames past height, appended since the drop
// began, are never considered) and archives them. done is true when no
// droppable frame follows the chunk; err is an archive or read failure,
// which stops the chunk before the frame it hit.
func (j *Journal) scanDroppable(before, height uint64, archive func(uint64, []byte) error) (c droppable, done bool, err error) {
	clock := j.db.waitClock()
	defer clock.stop()
	cols := "first_seq, last_seq, octet_length(frame), NULL::bytea"
	if archive != nil {
		cols = "first_seq, last_seq, octet_length(frame), frame"
	}
	rows, err := j.db.pool.Query(clock.ctx, "SELECT "+cols+` FROM frames
WHERE part = $1 AND first_seq >= $2 AND last_seq < $3 AND first_seq <= $4
ORDER BY first_seq LIMIT $5`, part, int64(j.First()), int64(before), int64(height), dropChunk)
	if err != nil {
		return c, true, fmt.Errorf("journal: drop before seq %d: %w", before, err)
	}
	defer rows.Close()
	for rows.Next() {
		var first, last int64
		var size int64
		var frame pgtype.DriverBytes
		if err := rows.Scan(&first, &last, &size, &frame); err != nil {
			return c, true, fmt.Errorf("journal: drop before seq %d: %w", before, err)
		}
		if archive != nil {
			clock.pause() // archive's time is not the database's
			err := archiveFrame(uint64(first), uint64(last), frame, archive)
			clock.resume()
			if err != nil {
				return c, true, fmt.Errorf("journal: drop before seq %d: archive the frame at seq %d: %w", before, first, err)
			}
		}
		c.frames++
		c.records += int(last - first + 1)
		c.bytes += size
		c.newFirst = uint64(last) + 1
	}
	if err := rows.Err(); err != nil {
		return c, true, fmt.Errorf("journal: drop before seq %d: %w", before, err)
	}
	return c, c.frames < dropChunk, nil
}

// archiveFrame checks the frame first..last decodes to exactly those
// records and hands it to archive.
func archiveFrame(first, last uint64, frame []byte, archive func(uint64, []byte) error) error {
	recs, err := journal.DecodeFrame(first, frame)
	if err != nil {
		return err
	}
	if got := recs[len(recs)-1].Seq; got != last {
		return fmt.Errorf("%w: frame at seq %d ends at seq %d, its row says %d", journal.ErrCorrupt, first, got, last)
	}
	return archive(first, frame)
}

// deleteChunk deletes the frames and marks below newFirst and moves First
// there, in one fenced statement; then this handle's First moves.
func (j *Journal) deleteChunk(newFirst uint64) error {
	ctx, cancel := j.db.ctx()
	defer cancel()
	var fenced int64
	if err := j.db.pool.QueryRow(ctx, dropSQL, part, int64(j.epoch), int64(newFirst)).Scan(&fenced); err != nil {
		return fmt.Errorf("delete the frames before seq %d: %w", newFirst, err)
	}
	if fenced != 1 {
		return j.db.fencedError(context.Background(), "drop", j.epoch)
	}
	j.raiseFirst(newFirst)
	return nil
}
