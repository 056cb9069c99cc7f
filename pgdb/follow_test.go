package pgdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aos-kernel/aos/journal/journaltest"
	"github.com/aos-kernel/aos/pgdb"
)

// follower opens a follower's journal with the given poll interval.
func follower(t *testing.T, w world, poll time.Duration) *pgdb.Journal {
	t.Helper()
	db, err := pgdb.Open(context.Background(), pgdb.Config{URL: w.url, Schema: w.schema, FollowPoll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f, err := db.Follow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// waitFor waits (bounded) until f's height reaches h.
func waitFor(t *testing.T, f *pgdb.Journal, h uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for f.Height() < h {
		if _, err := f.Wait(ctx, f.Height()); err != nil {
			t.Fatalf("follower at height %d, waiting for %d: %v", f.Height(), h, err)
		}
	}
}

// TestFollowerWakesOnNotification: a follower's Wait wakes when the owner
// appends, by notification alone (its poll is an hour), and it reads what
// was appended; it may not write.
func TestFollowerWakesOnNotification(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	journaltest.AppendFrames(t, j, 2)
	f := follower(t, w, time.Hour)
	if h := f.Height(); h != 2 {
		t.Fatalf("follower opened at height %d, want 2", h)
	}
	for _, n := range []int{1, 5, 3} {
		want := j.Height() + uint64(n)
		journaltest.AppendFrames(t, j, n)
		waitFor(t, f, want)
		journaltest.CheckRun(t, journaltest.ReadAll(t, f, 1), 1, want)
	}
	if err := f.Append(journaltest.Recs(f.Height()+1, 1)); !errors.Is(err, pgdb.ErrNotOwner) {
		t.Fatalf("a follower's Append: %v, want ErrNotOwner", err)
	}
	if _, err := f.DropBefore(2, nil); !errors.Is(err, pgdb.ErrNotOwner) {
		t.Fatalf("a follower's DropBefore: %v, want ErrNotOwner", err)
	}
}

// TestFollowerPolls: with the owner's notifier stopped (as if it died
// between an append and its notification), a follower still catches up,
// by reading the partition's row every FollowPoll.
func TestFollowerPolls(t *testing.T) {
	w := newWorld(t)
	db := w.open(t)
	j := ownerJournal(t, db, acquire(t, db, "node-a", false))
	f := follower(t, w, 20*time.Millisecond)
	j.Close() // stops the notifier; appends still work
	journaltest.AppendFrames(t, j, 4)
	waitFor(t, f, 4)
	journaltest.CheckRun(t, journaltest.ReadAll(t, f, 1), 1, 4)
}
