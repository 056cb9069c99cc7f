package pgdb_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// TestAcknowledgedSurvivesServerCrash: every append that returned, and
// every object written before it (CAS writes commit without waiting for the
// WAL flush), is there after the database server crashed (an immediate
// shutdown: the WAL still in its buffers is lost) and recovered. The WAL
// writer is held to its slowest (10 s), so objects are not flushed by it in
// time: only the appends' synchronous commits make them durable.
func TestAcknowledgedSurvivesServerCrash(t *testing.T) {
	c := pgtest.Start(t, "wal_writer_delay = '10s'", "wal_writer_flush_after = '1GB'")
	w := world{url: c.URL(""), schema: "crash"}
	db := w.open(t)
	l := acquire(t, db, "node-a", false)
	j := ownerJournal(t, db, l)
	s := db.CAS(&l)
	const appends, perAppend = 200, 5
	for i := range appends {
		objs := make([][]byte, perAppend)
		for k := range objs {
			objs[k] = object(uint64(i*perAppend + k))
		}
		var hs []schemas.Hash
		var err error
		if i%2 == 0 {
			hs, err = s.PutBatch(objs)
		} else {
			for _, o := range objs {
				h, perr := s.Put(o)
				hs, err = append(hs, h), perr
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		var body []byte
		for _, h := range hs {
			body = append(body, h[:]...)
		}
		if err := j.Append([]journal.Record{{Seq: j.Height() + 1, Kind: journal.KindStep, Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := c.Restart(); err != nil {
		t.Fatal(err)
	}
	db = w.open(t)
	j = ownerJournal(t, db, acquire(t, db, "node-a", false))
	if h := j.Height(); h != appends {
		t.Fatalf("after the crash the journal ends at seq %d, %d appends were acknowledged", h, appends)
	}
	s = db.CAS(nil)
	n := 0
	err := j.Read(1, func(r journal.Record) (bool, error) {
		for k := range perAppend {
			h := schemas.Hash(r.Body[32*k : 32*k+32])
			got, err := s.Get(h)
			if err != nil {
				return false, fmt.Errorf("record %d names %s: %w", r.Seq, h, err)
			}
			if want := object((r.Seq-1)*perAppend + uint64(k)); !bytes.Equal(got, want) {
				return false, fmt.Errorf("record %d names %s, which holds other bytes", r.Seq, h)
			}
			n++
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != appends*perAppend {
		t.Fatalf("checked %d objects, want %d", n, appends*perAppend)
	}
}
