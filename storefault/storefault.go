package storefault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// ErrInjected is the failure an Injector hands out.
var ErrInjected = errors.New("storefault: injected failure")

// Op names a storage operation a failure can hit.
type Op string

// The operations the wrappers count.
const (
	CASPut        Op = "cas put"
	CASPutBatch   Op = "cas put batch"
	CASGet        Op = "cas get"
	CASHas        Op = "cas has"
	CASIterate    Op = "cas iterate"
	CASDelete     Op = "cas delete"
	JournalAppend Op = "journal append"
	JournalRead   Op = "journal read"
)

// Writes are the operations that change a store.
var Writes = []Op{CASPut, CASPutBatch, CASDelete, JournalAppend}

// Ops returns a predicate accepting exactly ops.
func Ops(ops ...Op) func(Op) bool {
	return func(op Op) bool { return slices.Contains(ops, op) }
}

// Injector fails the n-th operation its predicate accepts, once, and counts
// the operations it accepts. The zero Injector (or a nil one) fails nothing
// and counts nothing; Arm sets it, so a test can open a world cleanly and
// only then let failures fall.
type Injector struct {
	mu     sync.Mutex
	match  func(Op) bool
	failAt int64 // 0: count only
	n      int64
	fired  bool
}

// FailNth returns an Injector failing the n-th operation match accepts
// (n 0: none, it only counts).
func FailNth(match func(Op) bool, n int64) *Injector {
	return &Injector{match: match, failAt: n}
}

// Arm (re)sets which operations count and which one fails, and restarts the
// count.
func (i *Injector) Arm(match func(Op) bool, n int64) {
	i.mu.Lock()
	i.match, i.failAt, i.n, i.fired = match, n, 0, false
	i.mu.Unlock()
}

// Count is how many accepted operations the Injector has seen.
func (i *Injector) Count() int64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.n
}

// Fired reports whether the failure was handed out.
func (i *Injector) Fired() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fired
}

// check counts op and returns the injected failure when its turn has come.
func (i *Injector) check(op Op) error {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.match == nil || !i.match(op) {
		return nil
	}
	i.n++
	if i.n != i.failAt {
		return nil
	}
	i.fired = true
	return fmt.Errorf("%w of %s (operation %d)", ErrInjected, op, i.n)
}

// CAS is a cas.Store whose operations fail when Faults says so and which
// runs BeforeWrite ahead of each write and BeforeRead ahead of each read.
type CAS struct {
	Store  cas.Store
	Faults *Injector // nil: none
	// BeforeWrite, when set, runs first in every Put, PutBatch and Delete,
	// before a failure is injected or the wrapped store sees the write, with
	// the operation's name. A crash test holds a snapshot's cell writes
	// there while its process is killed.
	BeforeWrite func(op Op)
	// BeforeRead, when set, runs first in every Get, Has and Iterate, before
	// a failure is injected or the wrapped store sees the read, with the
	// operation's name. A crash test holds a collection's marking there
	// while its process is killed.
	BeforeRead func(op Op)
}

var _ cas.Store = (*CAS)(nil)

// Put implements cas.Store.
func (c *CAS) Put(data []byte) (schemas.Hash, error) {
	c.beforeWrite(CASPut)
	if err := c.Faults.check(CASPut); err != nil {
		return schemas.Hash{}, err
	}
	return c.Store.Put(data)
}

// PutBatch implements cas.Store.
func (c *CAS) PutBatch(objs [][]byte) ([]schemas.Hash, error) {
	c.beforeWrite(CASPutBatch)
	if err := c.Faults.check(CASPutBatch); err != nil {
		return nil, err
	}
	return c.Store.PutBatch(objs)
}

func (c *CAS) beforeWrite(op Op) {
	if c.BeforeWrite != nil {
		c.BeforeWrite(op)
	}
}

func (c *CAS) beforeRead(op Op) {
	if c.BeforeRead != nil {
		c.BeforeRead(op)
	}
}

// Get implements cas.Store.
func (c *CAS) Get(h schemas.Hash) ([]byte, error) {
	c.beforeRead(CASGet)
	if err := c.Faults.check(CASGet); err != nil {
		return nil, err
	}
	return c.Store.Get(h)
}

// Has implements cas.Store.
func (c *CAS) Has(h schemas.Hash) (bool, error) {
	c.beforeRead(CASHas)
	if err := c.Faults.check(CASHas); err != nil {
		return false, err
	}
	return c.Store.Has(h)
}

// Iterate implements cas.Store.
func (c *CAS) Iterate(fn func(h schemas.Hash, size int) error) error {
	c.beforeRead(CASIterate)
	if err := c.Faults.check(CASIterate); err != nil {
		return err
	}
	return c.Store.Iterate(fn)
}

// Delete implements cas.Store.
func (c *CAS) Delete(hs []schemas.Hash) error {
	c.beforeWrite(CASDelete)
	if err := c.Faults.check(CASDelete); err != nil {
		return err
	}
	return c.Store.Delete(hs)
}

// Log is the journal port Journal wraps: the methods of the kernel's
// kernel.Log, declared here so that a test rig below the kernel need not
// import it (the kernel's tests hold the two to each other).
type Log interface {
	journal.Reader // Read
	Append(recs []journal.Record) error
	Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error
	First() uint64
	Height() uint64
	Wait(ctx context.Context, after uint64) (uint64, error)
}

// Dropper is a journal with retention (the kernel's kernel.Dropper).
type Dropper interface {
	DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error)
}

// Journal is a journal whose Appends and Reads fail when Faults says so and
// which runs BeforeAppend ahead of each Append and AfterAppend after it.
type Journal struct {
	Log    Log
	Faults *Injector // nil: none
	// BeforeAppend, when set, runs first in every Append, before a failure
	// is injected or the wrapped journal sees the records. recs must not be
	// changed. A crash test kills its process here.
	BeforeAppend func(recs []journal.Record)
	// AfterAppend, when set, runs last in every Append with its result: a
	// nil err means the records are as durable as the wrapped journal makes
	// them. It runs before Append returns, so before the kernel answers
	// anyone waiting for those records. recs must not be changed. A crash
	// test kills its process here, right after a record is durable.
	AfterAppend func(recs []journal.Record, err error)
}

var (
	_ Log     = (*Journal)(nil)
	_ Dropper = (*Journal)(nil)
)

// Height implements Log.
func (j *Journal) Height() uint64 { return j.Log.Height() }

// Append implements Log.
func (j *Journal) Append(recs []journal.Record) error {
	if j.BeforeAppend != nil {
		j.BeforeAppend(recs)
	}
	err := j.Faults.check(JournalAppend)
	if err == nil {
		err = j.Log.Append(recs)
	}
	if j.AfterAppend != nil {
		j.AfterAppend(recs, err)
	}
	return err
}

// Read implements Log.
func (j *Journal) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	if err := j.Faults.check(JournalRead); err != nil {
		return err
	}
	return j.Log.Read(from, fn)
}

// Wait implements Log.
func (j *Journal) Wait(ctx context.Context, after uint64) (uint64, error) {
	return j.Log.Wait(ctx, after)
}

// Marks implements Log.
func (j *Journal) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	if err := j.Faults.check(JournalRead); err != nil {
		return err
	}
	return j.Log.Marks(k, fn)
}

// First implements Log.
func (j *Journal) First() uint64 { return j.Log.First() }

// DropBefore is the wrapped journal's retention (Dropper), with no
// failure injected: a world on a faulty journal can still be collected
// with --drop-journal when the journal under it can.
func (j *Journal) DropBefore(before uint64, archive func(first uint64, frame []byte) error) (journal.DropStats, error) {
	d, ok := j.Log.(Dropper)
	if !ok {
		return journal.DropStats{First: j.Log.First()}, fmt.Errorf("storefault: the wrapped journal (%T) does not support retention", j.Log)
	}
	return d.DropBefore(before, archive)
}

// Gate holds the first operation of a kind after Arm until Open: hooked
// into BeforeWrite or BeforeRead, it stops a writer (a snapshot writing its
// object, say) at a known point while a test looks at the world.
type Gate struct {
	Op      Op // the operation held
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewGate returns a gate for op, not armed.
func NewGate(op Op) *Gate {
	return &Gate{Op: op, entered: make(chan struct{}), release: make(chan struct{})}
}

// Arm makes the next op wait in Hook until Open.
func (g *Gate) Arm() { g.armed.Store(true) }

// Entered is closed once the armed op is held.
func (g *Gate) Entered() <-chan struct{} { return g.entered }

// Open lets the held op and every later one through; it may be called
// more than once.
func (g *Gate) Open() { g.once.Do(func() { close(g.release) }) }

// Hook is the function to set as BeforeWrite or BeforeRead.
func (g *Gate) Hook(op Op) {
	if op == g.Op && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
}
