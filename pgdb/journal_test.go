package pgdb_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
	"github.com/aos-kernel/aos/pgdb"
)

// TestJournal holds the Postgres journal to the contract every backend
// keeps.
func TestJournal(t *testing.T) {
	journaltest.Run(t, func(t *testing.T) journaltest.Journal {
		_, _, j := owned(t)
		return j
	})
}

// TestHeightAfterReopen: a journal opened again (a new DB, the lease taken
// again) has the height, First and records the database holds.
func TestHeightAfterReopen(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	journaltest.AppendMixed(t, j, 1, 100, 1000, 1)
	journaltest.DropBefore(t, j, 102, nil, journal.DropStats{Frames: 2, Records: 101, Bytes: journaltest.FrameBytes(1, 1, 100), First: 102})
	db.Close()

	db = w.open(t)
	j = ownerJournal(t, db, acquire(t, db, "node-a", false))
	journaltest.CheckTruncated(t, j, 102, 1102)
	journaltest.AppendMixed(t, j, 3)
	journaltest.CheckTruncated(t, j, 102, 1105)
}

// TestRefusedAppendsWriteNothing: appends refused with ErrGap leave the
// database as it was, as a reopen shows.
func TestRefusedAppendsWriteNothing(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	journaltest.AppendFrames(t, j, 3)
	journaltest.RefuseGaps(t, j)
	db.Close()
	db = w.open(t)
	j = ownerJournal(t, db, acquire(t, db, "node-a", false))
	if h := j.Height(); h != 3 {
		t.Fatalf("height after reopen = %d, want 3", h)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, 3)
}

// TestReadDetectsCorruptFrame: a frame whose bytes were changed behind the
// journal's back is ErrCorrupt, not records.
func TestReadDetectsCorruptFrame(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	journaltest.AppendFrames(t, j, 2, 2)
	w.sql(t, `UPDATE frames SET frame = '\xff' WHERE first_seq = 3`)
	err := j.Read(1, func(journal.Record) (bool, error) { return true, nil })
	if !errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "seq 3") {
		t.Fatalf("Read over a corrupt frame: %v, want ErrCorrupt naming seq 3", err)
	}
	w.sql(t, `DELETE FROM frames WHERE first_seq = 3`)
	err = j.Read(2, func(journal.Record) (bool, error) { return true, nil })
	if !errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrTruncated) {
		t.Fatalf("Read over a missing frame above First: %v, want ErrCorrupt", err)
	}
}

// TestReadStopsEarlyFetchingLittle: a read that stops after one record
// (how the kernel looks up one record) goes through; a long read crosses
// many chunks.
func TestReadAcrossChunks(t *testing.T) {
	_, _, j := owned(t)
	sizes := make([]int, 700)
	for i := range sizes {
		sizes[i] = i%3 + 1
	}
	journaltest.AppendFrames(t, j, sizes...)
	h := j.Height()
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, h)
	journaltest.CheckRun(t, journaltest.ReadAll(t, j, h/2), h/2, h)
	var got []journal.Record
	if err := j.Read(h-5, func(r journal.Record) (bool, error) { got = append(got, r); return false, nil }); err != nil {
		t.Fatal(err)
	}
	journaltest.CheckRun(t, got, h-5, h-5)
}

// TestSlowCallbacksOutliveTimeout: Config.Timeout bounds how long the
// database keeps a read waiting, not how long its callback works: a Read
// whose fn, and a DropBefore whose archive, each take longer than the
// timeout on the first frame still read every record and archive every
// frame. The frames are big (2 MiB each), so most of a chunk is still on
// its way from the server while the callback works.
func TestSlowCallbacksOutliveTimeout(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	big := func(seq uint64) journal.Record {
		body := bytes.Repeat([]byte{byte(seq)}, 512<<10)
		return journal.Record{Seq: seq, Kind: journal.KindEvent, Body: body}
	}
	for range 6 {
		next := j.Height() + 1
		if err := j.Append([]journal.Record{big(next), big(next + 1), big(next + 2), big(next + 3)}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	const timeout = 500 * time.Millisecond
	db2, err := pgdb.Open(context.Background(), pgdb.Config{URL: w.url, Schema: w.schema, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db2.Close() })
	j = ownerJournal(t, db2, acquire(t, db2, "node-a", false))
	var n uint64
	err = j.Read(1, func(r journal.Record) (bool, error) {
		if r.Seq == 1 {
			time.Sleep(2 * timeout) // the slowness under test, not a wait for anything
		}
		if n++; r.Seq != n || !bytes.Equal(r.Body, big(n).Body) {
			return false, fmt.Errorf("record %d: seq %d, %d bytes", n, r.Seq, len(r.Body))
		}
		return true, nil
	})
	if err != nil || n != 24 {
		t.Fatalf("Read with an fn slower than the timeout: %d records, %v; want 24", n, err)
	}
	archived := 0
	_, err = j.DropBefore(21, func(uint64, []byte) error {
		if archived == 0 {
			time.Sleep(2 * timeout)
		}
		archived++
		return nil
	})
	if err != nil || archived != 5 {
		t.Fatalf("DropBefore with an archive slower than the timeout: archived %d frames, %v; want 5", archived, err)
	}
	if f := j.First(); f != 21 {
		t.Fatalf("First after the drop = %d, want 21", f)
	}
}
