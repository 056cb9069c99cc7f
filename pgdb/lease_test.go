package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
	"github.com/aos-kernel/aos/pgdb"
)

// TestLeaseLifecycle: each Acquire moves the epoch on; a held lease is
// refused to another owner (naming the holder) unless forced, taken back
// at once by its own owner; Renew and Release work only with the current
// epoch; Current says who holds it.
func TestLeaseLifecycle(t *testing.T) {
	ctx := context.Background()
	db := newWorld(t).open(t)
	cur, err := db.Current(ctx)
	if err != nil || cur.Epoch != 0 || cur.Held || cur.Owner != "" {
		t.Fatalf("a fresh world's lease: %+v, %v; want epoch 0, not held", cur, err)
	}
	a1 := acquire(t, db, "node-a", false)
	if a1.Epoch != 1 || a1.Owner != "node-a" || a1.Address != "node-a:7070" {
		t.Fatalf("first lease = %+v, want epoch 1 of node-a at node-a:7070", a1)
	}
	if cur, _ := db.Current(ctx); !cur.Held || cur.Epoch != 1 || cur.Owner != "node-a" || !cur.Until.Equal(a1.Until) {
		t.Fatalf("Current = %+v, want node-a's epoch 1 held until %s", cur, a1.Until)
	}
	_, err = db.Acquire(ctx, pgdb.Claim{Owner: "node-b", TTL: time.Minute})
	if !errors.Is(err, pgdb.ErrLeaseHeld) || !strings.Contains(err.Error(), "node-a") || !strings.Contains(err.Error(), "epoch 1") {
		t.Fatalf("node-b's Acquire of a held lease: %v, want ErrLeaseHeld naming node-a and epoch 1", err)
	}
	a2 := acquire(t, db, "node-a", false) // a restart takes its own lease back
	if a2.Epoch != 2 {
		t.Fatalf("node-a's second lease has epoch %d, want 2", a2.Epoch)
	}
	if _, err := db.Renew(ctx, a1, time.Minute); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("Renew of the superseded epoch 1: %v, want ErrFenced", err)
	}
	r, err := db.Renew(ctx, a2, time.Hour)
	if err != nil || r.Epoch != 2 || !r.Until.After(a2.Until) {
		t.Fatalf("Renew of epoch 2 by an hour = %+v, %v; want epoch 2 lasting past %s", r, err, a2.Until)
	}
	// Left is the time the lease has by the database's clock: a renewal
	// by an hour leaves close to an hour (not the minute acquired with).
	if cur, err := db.Current(ctx); err != nil || cur.Left <= 59*time.Minute || cur.Left > time.Hour {
		t.Fatalf("Current after a renewal by an hour = %+v, %v; want Left in (59m, 1h]", cur, err)
	}
	if err := db.Release(ctx, a1); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("Release of epoch 1: %v, want ErrFenced", err)
	}
	if err := db.Release(ctx, a2); err != nil {
		t.Fatal(err)
	}
	if cur, _ := db.Current(ctx); cur.Held || cur.Epoch != 3 || cur.Owner != "" {
		t.Fatalf("after Release: %+v; want epoch 3 (the released epoch fenced), not held", cur)
	} else if cur.Left != 0 {
		t.Fatalf("after Release Left = %s, want 0 (no lease to lapse)", cur.Left)
	}
	if _, err := db.Renew(ctx, a2, time.Minute); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("Renew of a released lease: %v, want ErrFenced", err)
	}
	b := acquire(t, db, "node-b", false)
	if b.Epoch != 4 {
		t.Fatalf("node-b's lease after the release has epoch %d, want 4", b.Epoch)
	}
	c := acquire(t, db, "node-c", true)
	if c.Epoch != 5 {
		t.Fatalf("node-c's forced lease has epoch %d, want 5", c.Epoch)
	}
	for _, bad := range []pgdb.Claim{{Owner: "", TTL: time.Minute}, {Owner: "x", TTL: 0}} {
		if _, err := db.Acquire(ctx, bad); err == nil {
			t.Fatalf("Acquire(%+v) succeeded", bad)
		}
	}
}

// TestLeaseLapses: a lease not renewed lapses by the database's clock, and
// then another owner takes it without force.
func TestLeaseLapses(t *testing.T) {
	ctx := context.Background()
	db := newWorld(t).open(t)
	a, err := db.Acquire(ctx, pgdb.Claim{Owner: "node-a", TTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the database's clock to pass the lease's end: the thing
	// under test is time passing, so this is a wait on it, bounded.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := db.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !cur.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a 1 ms lease still held after 30 s: %+v", cur)
		}
		time.Sleep(time.Millisecond)
	}
	b := acquire(t, db, "node-b", false)
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("node-b took epoch %d, want %d", b.Epoch, a.Epoch+1)
	}
}

// TestFencedAppend: once another owner took the lease, the first owner's
// append fails with ErrFenced naming the new owner, stores nothing, and
// every later append fails; its retention drops nothing. The new owner's
// journal has exactly the first owner's acknowledged records and goes on.
func TestFencedAppend(t *testing.T) {
	w := newWorld(t)
	dbA := w.open(t)
	ja := ownerJournal(t, dbA, acquire(t, dbA, "node-a", false))
	journaltest.AppendFrames(t, ja, 2, 1)

	dbB := w.open(t)
	lb := acquire(t, dbB, "node-b", true)
	jb := ownerJournal(t, dbB, lb)
	if h := jb.Height(); h != 3 {
		t.Fatalf("the new owner's journal opened at height %d, want 3", h)
	}
	err := ja.Append(journaltest.Recs(4, 2))
	if !errors.Is(err, pgdb.ErrFenced) || !strings.Contains(err.Error(), "node-b") || !strings.Contains(err.Error(), fmt.Sprintf("epoch %d", lb.Epoch)) {
		t.Fatalf("the fenced owner's append: %v, want ErrFenced naming node-b and epoch %d", err, lb.Epoch)
	}
	if err := ja.Append(journaltest.Recs(4, 1)); !errors.Is(err, journal.ErrFailed) {
		t.Fatalf("the next append: %v, want journal.ErrFailed", err)
	}
	if _, err := ja.DropBefore(3, nil); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("the fenced owner's DropBefore: %v, want ErrFenced", err)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, jb, 1), 1, 3)
	journaltest.AppendFrames(t, jb, 2)
	journaltest.CheckRun(t, journaltest.ReadAll(t, jb, 1), 1, 5)
	if _, err := dbA.Journal(context.Background(), pgdb.Lease{Epoch: lb.Epoch - 1}); !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("opening the journal with the fenced lease: %v, want ErrFenced", err)
	}
}

// TestTakeoverRacesAppends: an owner appends as fast as it can while
// another takes the lease. Whatever the interleaving, no append that began
// after the takeover committed succeeds, and the new owner's journal ends
// exactly at the last append the first owner was told succeeded, holding
// exactly its records: nothing acknowledged is lost, nothing refused is
// stored.
func TestTakeoverRacesAppends(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			w := newWorld(t)
			dbA := w.open(t)
			ja := ownerJournal(t, dbA, acquire(t, dbA, "node-a", false))
			var acked uint64
			var appendErr error
			started, taken := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 20 {
						close(started)
					}
					after := false
					select {
					case <-taken:
						after = true
					default:
					}
					if err := ja.Append(journaltest.Recs(ja.Height()+1, i%3+1)); err != nil {
						appendErr = err
						return
					}
					if after {
						appendErr = errors.New("an append that began after the takeover had committed succeeded")
						return
					}
					acked = ja.Height()
				}
			}()
			<-started
			dbB := w.open(t)
			lb := acquire(t, dbB, "node-b", true)
			close(taken)
			jb := ownerJournal(t, dbB, lb)
			wg.Wait()
			if !errors.Is(appendErr, pgdb.ErrFenced) {
				t.Fatalf("the first owner stopped on %v, want ErrFenced", appendErr)
			}
			if h := jb.Height(); h != acked {
				t.Fatalf("the new owner's journal ends at seq %d; the first owner's last acknowledged append ended at %d", h, acked)
			}
			journaltest.CheckRun(t, journaltest.ReadAll(t, jb, 1), 1, acked)
		})
	}
}

// TestAppendChecksExpectedHeight: two journal handles on one lease (a
// world reopened in-process while its old handle lingers): the stale one's
// append is refused with ErrConflict naming both heights, and stores
// nothing.
func TestAppendChecksExpectedHeight(t *testing.T) {
	db, l, j1 := owned(t)
	journaltest.AppendFrames(t, j1, 3)
	j2 := ownerJournal(t, db, l) // opens at height 3
	journaltest.AppendFrames(t, j1, 2)
	err := j2.Append(journaltest.Recs(4, 1))
	if !errors.Is(err, pgdb.ErrConflict) || !strings.Contains(err.Error(), "ends at seq 5") || !strings.Contains(err.Error(), "at seq 3") {
		t.Fatalf("the stale handle's append: %v, want ErrConflict naming seq 5 (the database's) and seq 3 (its own)", err)
	}
	journaltest.CheckRun(t, journaltest.ReadAll(t, j1, 1), 1, 5)
	journaltest.AppendFrames(t, j1, 1)
	journaltest.CheckRun(t, journaltest.ReadAll(t, j1, 1), 1, 6)
}
