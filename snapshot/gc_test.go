package snapshot_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// begun is what the writer hands a collector: the collection it began and
// the root it took right after, both between two of its batches.
type begun struct {
	c    *cas.Collection
	root schemas.Hash
	err  error
}

// writer keeps changing a cells.Head over a cas.Guard, the way the
// kernel's loop does, and serves requests between its batches: Begin a
// collection and take the root (as the kernel will on its loop), and check
// that its current index is whole.
type writer struct {
	g     *cas.Guard
	head  *cells.Head
	rng   *rand.Rand
	model map[string][]byte // key -> state, what the head must hold

	begin  chan chan begun
	verify chan chan error
	// wrote gets a signal after the first Materialize that follows a Begin,
	// so a collector can sweep knowing the index changed since its root.
	wrote chan struct{}
	stop  chan struct{}
	done  chan struct{}
	err   error
}

const (
	keySpace   = 3000
	batchOps   = 200
	stateKinds = 3 // each key cycles through few states, so garbage states are written again
)

func (w *writer) run() {
	defer close(w.done)
	notify := false
	for {
		select {
		case reply := <-w.begin:
			c, err := w.g.Begin()
			reply <- begun{c: c, root: w.head.Root(), err: err}
			notify = true
		case reply := <-w.verify:
			reply <- w.check()
		case <-w.stop:
			return
		default:
		}
		if err := w.batch(); err != nil {
			w.err = err
			return
		}
		if notify {
			w.wrote <- struct{}{}
			notify = false
		}
	}
}

func (w *writer) batch() error {
	for range batchOps {
		k := w.rng.IntN(keySpace)
		key := schemas.MustMarshal(fmt.Sprintf("cell %d", k))
		if w.rng.IntN(10) == 0 {
			if err := w.head.Delete(key); err != nil {
				return err
			}
			delete(w.model, string(key))
			continue
		}
		state := schemas.MustMarshal(fmt.Sprintf("cell %d state %d", k, w.rng.IntN(stateKinds)))
		if err := w.head.Put(key, state, 1); err != nil {
			return err
		}
		w.model[string(key)] = state
	}
	_, err := w.head.Materialize()
	return err
}

// check proves every object of the current index present (Mark) and that
// the index holds exactly the model.
func (w *writer) check() error {
	if _, err := snapshot.Mark(w.g, []snapshot.Pins{{Indexes: []schemas.Hash{w.head.Root()}}}, nil); err != nil {
		return err
	}
	return checkIndex(w.g, w.head.Root(), w.model)
}

// checkIndex reads the index at root afresh from store (no cache), checks
// its structure, and reads back every cell's state, comparing it with model.
func checkIndex(store cas.Store, root schemas.Hash, model map[string][]byte) error {
	ix, err := cells.LoadIndex(store, root)
	if err != nil {
		return err
	}
	if _, err := ix.Verify(); err != nil {
		return err
	}
	n := 0
	err = ix.Ascend(func(e cells.Entry) (bool, error) {
		n++
		state, err := store.Get(e.StateHash)
		if err != nil {
			return false, fmt.Errorf("cell %x: %w", e.Key, err)
		}
		if want := model[string(e.Key)]; !bytes.Equal(state, want) {
			return false, fmt.Errorf("cell %x: state %x, want %x", e.Key, state, want)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if n != len(model) {
		return fmt.Errorf("index holds %d cells, want %d", n, len(model))
	}
	return nil
}

// TestCollectWhileWriting runs collections on a real Badger CAS while a
// writer keeps rebuilding a cells index through the Guard: each round
// begins on the writer's goroutine, takes the head's root there, then marks
// and sweeps from another goroutine while the writer goes on (at least one
// Materialize lands between Begin and the sweep). After each round and at
// the end, every node and state of the writer's current index is present
// and every cell reads back as written.
func TestCollectWhileWriting(t *testing.T) {
	db, err := badgerdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g := cas.NewGuard(db.CAS())
	head, err := cells.NewHead(g, cells.EmptyRoot, cells.Config{})
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("writer seed %d", seed)
	w := &writer{
		g: g, head: head, rng: rand.New(rand.NewPCG(seed, seed)), model: map[string][]byte{},
		begin: make(chan chan begun), verify: make(chan chan error),
		wrote: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	writerFailed := func() {
		t.Helper()
		<-w.done
		t.Fatalf("writer stopped: %v", w.err)
	}
	defer func() {
		select {
		case <-w.done:
		default:
			close(w.stop)
			<-w.done
		}
	}()

	const rounds = 6
	var total cas.GCStats
	for round := range rounds {
		reply := make(chan begun)
		select {
		case w.begin <- reply:
		case <-w.done:
			writerFailed()
		}
		b := <-reply
		if b.err != nil {
			t.Fatalf("round %d: Begin: %v", round, b.err)
		}
		select {
		case <-w.wrote:
		case <-w.done:
			writerFailed()
		}
		stats, err := snapshot.Collect(b.c, g, []snapshot.Pins{{Indexes: []schemas.Hash{b.root}}}, snapshot.Progress{})
		if err != nil {
			t.Fatalf("round %d: Collect: %v", round, err)
		}
		t.Logf("round %d: %+v", round, stats)
		total.FreedObjects += stats.FreedObjects
		total.KeptWritten += stats.KeptWritten

		check := make(chan error)
		select {
		case w.verify <- check:
		case <-w.done:
			writerFailed()
		}
		if err := <-check; err != nil {
			t.Fatalf("round %d: the writer's index after the sweep: %v", round, err)
		}
	}
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	if err := checkIndex(db.CAS(), head.Root(), w.model); err != nil {
		t.Fatalf("final index: %v", err)
	}
	if total.FreedObjects == 0 || total.KeptWritten == 0 {
		t.Errorf("over %d rounds: freed %d, kept as written %d; want both > 0 (the test did not exercise the sweep)", rounds, total.FreedObjects, total.KeptWritten)
	}
}

// TestCollectAbortsWhenMarkFails: a failed Mark deletes nothing and ends
// the collection; a good one sweeps what the pins do not reach.
func TestCollectAbortsWhenMarkFails(t *testing.T) {
	mem := cas.NewMemory()
	g := cas.NewGuard(mem)
	ix := buildIndex(t, g, 100, 0)
	garbage, _ := g.Put([]byte("garbage"))
	ghost := schemas.HashBytes([]byte("never stored"))

	c, err := g.Begin()
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot.Collect(c, g, []snapshot.Pins{{Indexes: []schemas.Hash{ix.Root()}, Objects: []schemas.Hash{ghost}}}, snapshot.Progress{})
	if !errors.Is(err, cas.ErrMissing) {
		t.Fatalf("Collect with a missing pin: %v, want ErrMissing", err)
	}
	if ok, _ := mem.Has(garbage); !ok {
		t.Fatal("a failed mark deleted garbage")
	}

	c, err = g.Begin()
	if err != nil {
		t.Fatalf("Begin after a failed Collect: %v", err)
	}
	var swept [2]int
	stats, err := snapshot.Collect(c, g, []snapshot.Pins{{Indexes: []schemas.Hash{ix.Root()}}}, snapshot.Progress{Swept: func(d, n int) { swept = [2]int{d, n} }})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := mem.Has(garbage); ok || stats.FreedObjects != 1 || swept != [2]int{1, 1} {
		t.Errorf("garbage present=%v, stats %+v, progress %v; want it freed", ok, stats, swept)
	}
	if _, err := ix.Verify(); err != nil {
		t.Errorf("the pinned index after Collect: %v", err)
	}
}
