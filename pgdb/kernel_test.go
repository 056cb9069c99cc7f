package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/pgdb"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/storefault"
)

// The kernel over the Postgres stores: a keyed counter world.
const counterManifest = `[
 {"$kind":"defschema","name":"com.test/CountEvent@1","schema":{"type":"object","properties":{"key":{"type":"string"},"by":{"type":"integer"}},"required":["key","by"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/CountState@1","schema":{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"],"additionalProperties":false}},
 {"$kind":"defschema","name":"com.test/Key@1","schema":{"type":"string","minLength":1}},
 {"$kind":"defmodule","name":"com.test/counter_mod@1","runtime":{"kind":"builtin","builtin":"test/counter","identity":"test/counter@1"}},
 {"$kind":"defworkflow","name":"com.test/counter@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[
   {"event":"com.test/CountEvent@1","workflow":"com.test/counter@1","key_field":"key"}]}}
]`

const counterWorkflow = "com.test/counter@1"

type count struct {
	Key   string `cbor:"key"`
	By    int64  `cbor:"by"`
	Count int64  `cbor:"count"`
}

func counterBuiltins() *modules.Builtins {
	b := modules.NewBuiltins()
	b.MustRegister("test/counter", "test/counter@1", "step", func(in *modules.Input) (*modules.Output, error) {
		var ev, st count
		if err := schemas.UnmarshalTrusted(in.Event.Value, &ev); err != nil {
			return nil, err
		}
		if in.State != nil {
			if err := schemas.UnmarshalTrusted(in.State, &st); err != nil {
				return nil, err
			}
		}
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": st.Count + ev.By})}, nil
	})
	return b
}

// node is one aos process's hold on the world: its DB, lease, journal and
// kernel.
type node struct {
	db *pgdb.DB
	l  pgdb.Lease
	j  *pgdb.Journal
	w  *kernel.World
}

// start opens the world as owner, taking the lease (forced or not).
func start(t *testing.T, wd world, owner string, force bool) *node {
	t.Helper()
	return startWith(t, wd, owner, force, nil)
}

// startWith is start with the stores wrapped by storefault's injector inj
// (nil: not wrapped).
func startWith(t *testing.T, wd world, owner string, force bool, inj *storefault.Injector) *node {
	t.Helper()
	n := &node{db: wd.open(t)}
	n.l = acquire(t, n.db, owner, force)
	n.j = ownerJournal(t, n.db, n.l)
	stores := kernel.Stores{CAS: n.db.CAS(&n.l), Journal: n.j}
	if inj != nil {
		stores = kernel.Stores{CAS: &storefault.CAS{Store: stores.CAS, Faults: inj}, Journal: &storefault.Journal{Log: n.j, Faults: inj}}
	}
	w, err := kernel.Open(stores, kernel.Config{
		Builtins: counterBuiltins(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("%s: open the world: %v", owner, err)
	}
	n.w = w
	t.Cleanup(func() { w.Close() })
	return n
}

func (n *node) send(key string, by int) error {
	_, err := n.w.Submit(context.Background(), kernel.Event{Schema: "com.test/CountEvent@1", JSON: fmt.Appendf(nil, `{"key":%q,"by":%d}`, key, by)})
	return err
}

// checkCounts fails unless every key's cell holds its count.
func (n *node) checkCounts(t *testing.T, want map[string]int64) {
	t.Helper()
	for k, c := range want {
		v, err := n.w.Cell(context.Background(), counterWorkflow, schemas.MustMarshal(k))
		if err != nil {
			t.Fatalf("cell %s: %v", k, err)
		}
		var st count
		if err := schemas.UnmarshalTrusted(v.State, &st); err != nil {
			t.Fatal(err)
		}
		if st.Count != c {
			t.Fatalf("cell %s counts %d, want %d", k, st.Count, c)
		}
	}
}

// sendMany sends n events over 7 keys and adds them to want.
func (n *node) sendMany(t *testing.T, count int, want map[string]int64) {
	t.Helper()
	for i := range count {
		k := fmt.Sprintf("k%d", i%7)
		if err := n.send(k, i%5+1); err != nil {
			t.Fatal(err)
		}
		want[k] += int64(i%5 + 1)
	}
}

// TestWorldOnPostgres: a kernel runs a world on the Postgres stores, takes
// a snapshot, and a restarted node (the lease taken again) opens it from
// that snapshot plus the journal's tail, with the same cells, and goes on.
func TestWorldOnPostgres(t *testing.T) {
	wd := newWorld(t)
	a := start(t, wd, "node-a", false)
	m, err := manifest.LoadBytes("counter.json", []byte(counterManifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	a.sendMany(t, 40, want)
	snap, err := a.w.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.sendMany(t, 25, want)
	a.checkCounts(t, want)
	height := a.j.Height()
	if err := a.w.Close(); err != nil {
		t.Fatal(err)
	}
	a.db.Close()

	b := start(t, wd, "node-a", false) // the same node, restarted
	info := b.w.OpenInfo()
	if info.Snapshot != snap.Seq || info.Checkpoint != snap.Checkpoint || info.Replayed != height-snap.Checkpoint {
		t.Fatalf("reopened from %+v; want the snapshot at seq %d and the %d records after its checkpoint at %d", info, snap.Seq, height-snap.Checkpoint, snap.Checkpoint)
	}
	b.checkCounts(t, want)
	b.sendMany(t, 10, want)
	b.checkCounts(t, want)
}

// TestFencedWorldFailsStop: a second node takes the lease (epoch+1) from a
// running world. The first node's next commit fails as a storage failure:
// its caller gets kernel.ErrBroken wrapping pgdb.ErrFenced, nothing of it
// is journaled, and the world refuses all later work. The second node
// opens the world with every acknowledged event and goes on.
func TestFencedWorldFailsStop(t *testing.T) {
	wd := newWorld(t)
	a := start(t, wd, "node-a", false)
	m, err := manifest.LoadBytes("counter.json", []byte(counterManifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.w.Apply(context.Background(), m, false); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	a.sendMany(t, 30, want)
	height := a.j.Height()

	b := start(t, wd, "node-b", true)
	err = a.send("k1", 100)
	if !errors.Is(err, kernel.ErrBroken) || !errors.Is(err, kernel.ErrStorage) || !errors.Is(err, pgdb.ErrFenced) {
		t.Fatalf("the fenced node's submit: %v; want kernel.ErrBroken and ErrStorage wrapping pgdb.ErrFenced", err)
	}
	if err := a.send("k2", 1); !errors.Is(err, kernel.ErrBroken) {
		t.Fatalf("the fenced node's next submit: %v, want kernel.ErrBroken", err)
	}
	f, err := b.db.Follow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h := f.Height(); h != height {
		t.Fatalf("the journal is at seq %d after the fenced commit, want %d: something of it was journaled", h, height)
	}
	b.checkCounts(t, want)
	b.sendMany(t, 10, want)
	b.checkCounts(t, want)
	if _, err := a.w.Status(context.Background()); !errors.Is(err, kernel.ErrBroken) {
		t.Fatalf("the fenced node's status: %v, want kernel.ErrBroken", err)
	}
}

// TestFaultInjectorOnPostgres: the storage ports' fault injector wraps the
// Postgres stores as it wraps Badger's. A failed journal append or CAS
// write stops the world (ErrBroken wrapping the injected failure, nothing
// journaled for it), and the world reopened on the same database holds
// every acknowledged event.
func TestFaultInjectorOnPostgres(t *testing.T) {
	for _, at := range []int64{1, 4, 9} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			wd := newWorld(t)
			inj := &storefault.Injector{}
			a := startWith(t, wd, "node-a", false, inj)
			m, err := manifest.LoadBytes("counter.json", []byte(counterManifest))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.w.Apply(context.Background(), m, false); err != nil {
				t.Fatal(err)
			}
			inj.Arm(storefault.Ops(storefault.Writes...), at)
			acked := map[string]int64{}
			var failure error
			for i := 0; failure == nil && i < 100; i++ {
				k := fmt.Sprintf("k%d", i%7)
				if i%10 == 9 {
					_, failure = a.w.Snapshot(context.Background())
					continue
				}
				if failure = a.send(k, 1); failure == nil {
					acked[k]++
				}
			}
			if !inj.Fired() || !errors.Is(failure, kernel.ErrBroken) || !errors.Is(failure, storefault.ErrInjected) {
				t.Fatalf("after write %d failed (fired: %v): %v; want ErrBroken wrapping the injected failure", at, inj.Fired(), failure)
			}
			height := a.j.Height()
			a.w.Close()
			a.db.Close()
			b := start(t, wd, "node-a", false)
			if h := b.j.Height(); h != height {
				t.Fatalf("reopened at seq %d, the failed world had acknowledged through seq %d", h, height)
			}
			b.checkCounts(t, acked)
		})
	}
}
