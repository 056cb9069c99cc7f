package snapshot_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// loadWorld is a journal of checkpoints and snapshot records over a CAS,
// built one record at a time.
type loadWorld struct {
	t   *testing.T
	j   *journal.Memory
	cas *cas.Memory
}

func newLoadWorld(t *testing.T) *loadWorld {
	return &loadWorld{t: t, j: journal.NewMemory(), cas: cas.NewMemory()}
}

func (w *loadWorld) add(kind journal.Kind, body any) uint64 {
	w.t.Helper()
	seq := w.j.Height() + 1
	if err := w.j.Append([]journal.Record{{Seq: seq, Kind: kind, Body: schemas.MustMarshal(body)}}); err != nil {
		w.t.Fatal(err)
	}
	return seq
}

func (w *loadWorld) checkpoint() uint64 {
	return w.add(journal.KindCheckpoint, &records.CheckpointRec{Reason: "test"})
}

// object stores the state after height, logical time marking which.
func (w *loadWorld) object(height, logical uint64) schemas.Hash {
	w.t.Helper()
	b, err := snapshot.Encode(&snapshot.State{Version: snapshot.Version, Height: height, Logical: logical})
	if err != nil {
		w.t.Fatal(err)
	}
	h, err := w.cas.Put(b)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

func (w *loadWorld) snapshot(cp uint64, obj schemas.Hash) uint64 {
	return w.add(journal.KindSnapshot, &records.SnapshotRec{Checkpoint: cp, Object: obj, Bytes: 1})
}

// TestFindTakesTheUsableSnapshot: Find goes through the kind index newest
// first (or oldest first), passes over every snapshot that cannot be used
// with its reason, and takes the first usable one, checked.
func TestFindTakesTheUsableSnapshot(t *testing.T) {
	w := newLoadWorld(t)
	w.add(journal.KindEvent, map[string]any{"n": 1})
	cp1 := w.checkpoint()
	good1 := w.snapshot(cp1, w.object(cp1, 1)) // usable, oldest
	cp2 := w.checkpoint()
	good2 := w.snapshot(cp2, w.object(cp2, 2)) // usable, newest usable
	ev := w.add(journal.KindEvent, map[string]any{"n": 2})
	notCheckpoint := w.snapshot(ev, w.object(ev, 3)) // its checkpoint is an event
	cp3 := w.checkpoint()
	wrongHeight := w.snapshot(cp3, w.object(cp2, 4)) // the object is the state after cp2
	cp4 := w.checkpoint()
	missing := w.snapshot(cp4, schemas.HashBytes([]byte("gone"))) // no such object
	future := w.snapshot(w.j.Height()+5, w.object(cp4, 5))        // its checkpoint is not in the journal

	f, err := snapshot.Find(w.j, w.cas.Get, snapshot.Newest)
	if err != nil {
		t.Fatal(err)
	}
	if f.Seq != good2 || f.State == nil || f.State.Height != cp2 || f.State.Logical != 2 {
		t.Fatalf("newest: took record %d (%+v), want %d", f.Seq, f.State, good2)
	}
	wantWhy := map[uint64]string{
		future:        "its checkpoint",
		missing:       "object " + schemas.HashBytes([]byte("gone")).String(),
		wrongHeight:   "is the state after seq",
		notCheckpoint: "is a event record",
	}
	var skipped []uint64
	for _, why := range f.Skipped {
		for seq, want := range wantWhy {
			prefix := "snapshot record " + strconv.FormatUint(seq, 10) + ": "
			if strings.HasPrefix(why, prefix) {
				skipped = append(skipped, seq)
				if !strings.Contains(why, want) {
					t.Errorf("skipped %q, want it to say %q", why, want)
				}
			}
		}
	}
	if want := []uint64{future, missing, wrongHeight, notCheckpoint}; !slices.Equal(skipped, want) {
		t.Errorf("skipped records %v (%q), want %v, newest first", skipped, f.Skipped, want)
	}

	f, err = snapshot.Find(w.j, w.cas.Get, snapshot.Oldest)
	if err != nil || f.Seq != good1 || f.State.Height != cp1 || len(f.Skipped) != 0 {
		t.Fatalf("oldest: took record %d (%+v), skipped %q, %v; want %d", f.Seq, f.State, f.Skipped, err, good1)
	}

	// Once retention drops the oldest checkpoint, its snapshot is gone from
	// the index and the oldest usable one is the next.
	if _, err := w.j.DropBefore(cp2, nil); err != nil {
		t.Fatal(err)
	}
	f, err = snapshot.Find(w.j, w.cas.Get, snapshot.Oldest)
	if err != nil || f.Seq != good2 {
		t.Fatalf("oldest after retention: took record %d, skipped %q, %v; want %d", f.Seq, f.Skipped, err, good2)
	}
}

// TestFindNoneUsable: with no usable snapshot Find takes none and says why
// it passed over each; a journal with no snapshot says nothing.
func TestFindNoneUsable(t *testing.T) {
	w := newLoadWorld(t)
	f, err := snapshot.Find(w.j, w.cas.Get, snapshot.Newest)
	if err != nil || f.State != nil || f.Seq != 0 || len(f.Skipped) != 0 {
		t.Fatalf("empty journal: %+v, %v", f, err)
	}
	cp := w.checkpoint()
	w.snapshot(cp, schemas.HashBytes([]byte("gone")))
	for _, order := range []snapshot.Order{snapshot.Newest, snapshot.Oldest} {
		f, err := snapshot.Find(w.j, w.cas.Get, order)
		if err != nil || f.State != nil || f.Seq != 0 || len(f.Skipped) != 1 {
			t.Fatalf("order %d: %+v, %v; want no snapshot and one reason", order, f, err)
		}
	}
}
