package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// Errors callers branch on.
var (
	ErrClosed       = errors.New("kernel: world is closed")
	ErrNoManifest   = errors.New("kernel: world has no manifest (run apply first)")
	ErrNotQuiescent = errors.New("kernel: world is not quiescent")
	ErrBroken       = errors.New("kernel: world stopped after a storage failure (reopen it to go on)")
	ErrInvalid      = errors.New("kernel: invalid input")
)

// World is one running kernel over one store.
type World struct {
	cfg     Config
	cas     cas.Store // guard: every write the world makes goes through it
	guard   *cas.Guard
	journal Log

	// verifier batches the signature checks of concurrent receipts; nil
	// when the world trusts no keys.
	verifier *receipts.Verifier

	// identity is st.world once Open has settled it (identity.go); it never
	// changes afterwards, so it is read without the loop.
	identity string

	reqs     chan request
	commits  chan *batch
	loopDone chan struct{}
	comDone  chan struct{}
	closing  sync.Once
	// sendMu orders every send on reqs with Close closing it: a sender
	// holds it shared from its look at closed to the end of its send, and
	// Close holds it alone to set closed and close reqs. So a send never
	// meets a closed channel, and a closed world is known by closed alone.
	sendMu sync.RWMutex
	closed atomic.Bool // set under sendMu; read alone where a stale answer is harmless
	broken atomic.Pointer[error]

	quietMu  sync.Mutex
	quietCh  chan struct{} // closed while the world is quiescent
	quietNow bool

	// current is the manifest (and its router) callers validate and route
	// against outside the loop.
	current atomic.Pointer[installed]

	// limits are st.limits, for the goroutines that check ingress.
	limits atomic.Pointer[Limits]

	snapWG            sync.WaitGroup // snapshot writers (snapshot.go); Close waits for them
	stopTimer         chan struct{}  // closed by Close: the snapshot timer ends
	openInfo          OpenInfo
	verifiedSnapshots int // snapshots replay recomputed and matched (Config.VerifySnapshots)

	// hist, when set (CellHistory's scratch worlds only), taps every step
	// replay applies and ends replay early (history.go).
	hist *historyTap
	// upg, when set (the scratch worlds of an upgrade's check only), checks
	// a manifest's code against every step replay applies (upgrade.go).
	upg *upgradeTap

	// journaled counts the records of each kind made durable since Open
	// (replayed ones not counted), for Status.
	journaledMu sync.Mutex
	journaled   map[journal.Kind]uint64

	st *state // owned by the loop goroutine
}

// state is everything the loop owns.
type state struct {
	w         *World
	man       *manifest.Manifest
	router    *routing.Router
	wfs       map[string]*wfRuntime
	mods      map[string]*boundModule // the current manifest's modules, by name
	cur       *liveManifest           // the current manifest: man, router, wfs and mods again (pins.go)
	live      []*liveManifest         // the live manifests in the order applied, cur last
	pinned    int                     // instances whose pin is set (pins.go)
	heads     map[string]*cells.Head  // by workflow name; outlive manifest changes
	draining  map[string]bool         // heads whose delta is being drained (maybeMaterialize)
	drains    map[string]*cells.Drain // slices being written off the loop, by head
	instances map[string]*instance    // non-default instances only (see instance)
	listed    instanceLists           // instances again, by workflow in key-hash order (cellpage.go)
	failed    failedIndex             // the failed instances, ordered by (workflow, key) (recover.go)
	aside     map[string]*asideModule // modules set aside, by name (aside.go)
	held      map[string]*asideModule // the workflows they hold, by name
	timeouts  map[string]int          // steps of each module timed out in a row, live only (aside.go)
	idBuf     []byte                  // scratch for instance lookups (park.go)
	ready     []*instance             // round-robin queue of instances with mailbox work
	turnEnds  time.Time               // when the current loop turn's time is up (zero: no limit)
	seq       uint64                  // last assigned journal seq
	logical   uint64                  // last logical time stamped
	out       []journal.Record        // records produced this loop turn, not yet committed
	outBytes  int                     // their body bytes
	inflight  map[schemas.Hash]*records.IntentRec
	frameSeq  map[schemas.Hash]uint64 // last stream frame seq per pending intent
	fence     intentFence             // recently settled intents, frames per intent (fence.go)
	inputs    uint64                  // external inputs handled, for periodic upkeep
	replaying bool
	replayErr error          // a replayed step the host could not run (see step)
	limits    Limits         // the world's limits (journaled; see config.go)
	work      workBudget     // what the current external input has caused
	idem      idemTable      // ingress idempotency keys (idempotency.go)
	stopped   error          // a storage failure: the world stops (failstop.go)
	opened    []OpenIntent   // intents opened this loop turn, released after flush
	settled   []schemas.Hash // intents settled this loop turn
	epochs    schemaEpochs   // state-schema changes (schema_epoch.go)
	manText   string         // man.Hash.String(), which every step's context carries
	world     string         // the world's identity, bound into every intent ("" before it has one; identity.go)

	snap           *snapJob                   // the snapshot being written (snapshot.go)
	lastCheckpoint uint64                     // seq of the last checkpoint
	lastSnapshot   uint64                     // checkpoint of the newest snapshot whose record is journaled (0: none)
	verifying      map[uint64]*snapshot.State // replay's states at checkpoints, until their snapshot records
	ahead          *readAhead                 // replay's read-ahead goroutine, while it runs (readahead.go)
}

type wfRuntime struct {
	def *manifest.WorkflowDef
	mod *boundModule
	fn  modules.StepFunc // the native code, when the module has it; else mod.runner runs it
	// migrate is the native code of def.Migrate's entrypoint, when the
	// module has it (migrate.go).
	migrate modules.StepFunc
	head    *cells.Head
	ctx     bool
	keyed   bool
	// hashText is def.Hash.String(), which every step's context carries:
	// made once, not per step.
	hashText string
}

// Log is the journal port: what the world appends to and replays from.
// The kernel names no storage engine: a world directory's journal lives in
// the package named after Badger, journal.Memory serves unit tests, and
// tests wrap either to inject failures or run hooks (storefault).
type Log interface {
	// Height is the seq of the last durable record.
	Height() uint64
	// Append makes records durable, atomically, continuing the seqs.
	Append(recs []journal.Record) error
	// Read calls fn for each record from seq on, in order.
	Read(from uint64, fn func(journal.Record) (bool, error)) error
	// Wait returns once the height exceeds after (or ctx ends).
	Wait(ctx context.Context, after uint64) (uint64, error)
	// Marks calls fn with the seqs of the records of an indexed kind
	// (journal.Indexed: manifests, checkpoints, snapshots), newest first,
	// without reading the journal.
	Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error
	// First is the lowest seq the journal still holds: 1, unless
	// retention dropped the segments before a retained snapshot.
	First() uint64
}

// Stores are the storage ports a world runs on. On disk both live in one
// Badger database and share its sync (one open gives both); the CAS
// objects a record names must be durable once its Append returns. Whoever
// else writes to the CAS while the world runs must write through the same
// *cas.Guard, given here as the CAS, or a garbage collection may sweep
// what they wrote (World.GC).
type Stores struct {
	CAS     cas.Store
	Journal Log
}

// Open opens a world over the given stores and replays the journal to
// rebuild state. The caller keeps owning the stores and closes them after
// the world.
func Open(s Stores, cfg Config) (*World, error) { return open(s, cfg, nil, nil) }

// open is Open with a history tap (history.go) or an upgrade's check
// (upgrade.go): nil for every world but the scratch worlds of CellHistory
// and of an upgrade.
func open(s Stores, cfg Config, hist *historyTap, upg *upgradeTap) (*World, error) {
	cfg = cfg.withDefaults()
	// A caller that writes to the CAS beside the world (the daemon's blob
	// executor) hands over a Guard it writes through too.
	guard, ok := s.CAS.(*cas.Guard)
	if !ok {
		guard = cas.NewGuard(s.CAS)
	}
	w := &World{
		cfg:      cfg,
		cas:      guard,
		guard:    guard,
		journal:  s.Journal,
		reqs:     make(chan request, 1024),
		commits:  make(chan *batch, 64),
		loopDone: make(chan struct{}),
		comDone:  make(chan struct{}),
		quietCh:  make(chan struct{}),

		stopTimer: make(chan struct{}),
		hist:      hist,
		upg:       upg,
	}
	w.st = &state{
		w:         w,
		wfs:       map[string]*wfRuntime{},
		heads:     map[string]*cells.Head{},
		draining:  map[string]bool{},
		drains:    map[string]*cells.Drain{},
		instances: map[string]*instance{},
		inflight:  map[schemas.Hash]*records.IntentRec{},
		frameSeq:  map[schemas.Hash]uint64{},
	}
	w.st.setLimits(legacyLimits())
	if err := w.st.recover(); err != nil {
		w.st.waitDrains() // none may write after the caller closes the store
		return nil, err
	}
	if err := w.st.openIdentity(); err != nil {
		w.st.waitDrains()
		return nil, err
	}
	w.setQuiet(w.st.quiescent())
	if p := w.st.pendingIntents(); len(p) > 0 {
		cfg.Publisher.Publish(p, nil) // durable already: they were read from the journal
	}
	if cfg.Keyring != nil {
		w.verifier = receipts.NewVerifier(cfg.Keyring, 0)
	}
	go w.loop()
	go w.committer()
	if cfg.SnapshotInterval > 0 {
		go w.snapshotTimer(cfg.SnapshotInterval)
	}
	if err := w.openLimits(); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Close stops the loop after the requests already queued and waits for their
// records to be durable. The stores and the wasm engine (Config.Wasm) stay
// open: their owner closes them, after the world.
func (w *World) Close() error {
	w.closing.Do(func() {
		w.sendMu.Lock()
		w.closed.Store(true)
		close(w.reqs)
		w.sendMu.Unlock()
		close(w.stopTimer)
		<-w.loopDone
		<-w.comDone
		w.snapWG.Wait() // no snapshot writer touches the store after Close
		if w.verifier != nil {
			w.verifier.Close()
		}
	})
	return nil
}

// Journal gives read access to the journal (durable records only).
func (w *World) Journal() Log { return w.journal }

// CAS gives read access to the content-addressed store.
func (w *World) CAS() cas.Store { return w.cas }

// Manifest is the current manifest, or nil before the first apply.
func (w *World) Manifest() *manifest.Manifest {
	if in := w.current.Load(); in != nil {
		return in.m
	}
	return nil
}

// installed is a manifest with the router built for it. Both are immutable
// once installed and safe for concurrent use.
type installed struct {
	m *manifest.Manifest
	r *routing.Router
}

// request is one unit of work for the loop.
type request struct {
	events  []ingressEvent // submit
	sub     *submission    // the submit's progress, once it yielded (idempotency.go); nil before
	apply   *manifest.Manifest
	dryRun  bool
	pin     bool // apply --pin
	receipt *receipts.SignedReceipt
	frame   *Frame
	query   func(*state)
	done    chan result
}

type result struct {
	receipt ReceiptResult
	seqs    []uint64
	dups    []bool     // per seq: a resend under a remembered idempotency key
	parked  [][]Target // per seq: the targets it was parked for (nil when none was)
	applied *ApplyResult
	err     error
}

// maxTurnBytes bounds the journal bytes of one loop turn, and of the batches
// the committer joins into one append (Badger refuses values over 1 GiB; one
// input's records are bounded by Limits.MaxBytesPerInput and one step's).
const maxTurnBytes = 32 << 20

type batch struct {
	bytes   int
	recs    []journal.Record
	reqs    []pending
	opened  []OpenIntent
	settled []schemas.Hash
}

type pending struct {
	done chan result
	res  result
}

func (w *World) send(ctx context.Context, r request) (result, error) {
	if err := w.brokenErr(); err != nil {
		return result{}, err
	}
	r.done = make(chan result, 1)
	if err := w.enqueue(ctx, r); err != nil {
		return result{}, err
	}
	select {
	case res := <-r.done:
		return res, res.err
	case <-ctx.Done():
		// The request may still complete; its result is dropped, never lost
		// from the journal.
		return result{}, ctx.Err()
	}
}

// enqueue hands r to the loop, or says why it cannot: ErrClosed once Close
// began (the check and the send hold sendMu shared, so Close cannot close
// reqs between them), or ctx's error. A send that waits for room in reqs
// keeps Close waiting until the loop, which drains reqs until it is closed,
// takes it.
func (w *World) enqueue(ctx context.Context, r request) error {
	w.sendMu.RLock()
	defer w.sendMu.RUnlock()
	if w.closed.Load() {
		return ErrClosed
	}
	select {
	case w.reqs <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Usable reports, without a trip through the loop, why the world can take
// no more requests: ErrBroken after a storage failure, ErrClosed once
// closed; nil while it serves. Work handed out meanwhile (an executor's
// claim) could never be settled on a world that is not usable.
func (w *World) Usable() error {
	if err := w.brokenErr(); err != nil {
		return err
	}
	if w.closed.Load() {
		return ErrClosed
	}
	return nil
}

// brokenErr is ErrBroken, with the storage failure, once the world has
// stopped on one; else nil.
func (w *World) brokenErr() error {
	if p := w.broken.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrBroken, *p)
	}
	return nil
}

// loop is the only goroutine that touches w.st after Open.
//
// A turn takes the requests already queued (up to MaxBatch, until its
// records reach maxTurnBytes or it has run Config.MaxTurnTime), then hands
// their records to the committer, which answers them once durable. An
// events request still under way when its turn's time is up yields: it goes
// to the backlog with its events left, and goes on in a later turn. Turns
// of queued requests and turns of the backlog alternate while both have
// work, so a request that arrives while a slow request runs waits for about
// one of the slow request's inputs (each bounded by Config.InputTimeout),
// not for all of them, and a backlog is never starved.
func (w *World) loop() {
	defer close(w.loopDone)
	defer close(w.commits)
	st := w.st
	var backlog []request // requests that yielded, oldest first
	open := true
	backlogNext := false // the next turn serves the backlog when both have work
	for open || len(backlog) > 0 {
		var first *request
		if len(backlog) == 0 {
			r, ok := <-w.reqs
			if !ok {
				break
			}
			first = &r
		}
		if st.stopped != nil {
			// Stopped: answer what is still queued, change nothing.
			if first != nil {
				backlog = append(backlog, *first)
			}
			for _, r := range backlog {
				if r.done != nil {
					r.done <- result{err: fmt.Errorf("%w: %w", ErrBroken, st.stopped)}
				}
			}
			backlog = nil
			continue
		}
		b := &batch{}
		st.startTurn()
		var next []request // what yields this turn
		run := func(r request) {
			if r, yielded := st.handle(r, b); yielded {
				next = append(next, r)
			}
		}
		// A turn also ends once its records are large (they are held in
		// memory until durable and go to the store as one write) or its
		// time is up.
		more := func() bool {
			return len(b.reqs) < w.cfg.MaxBatch && st.outBytes < maxTurnBytes && st.stopped == nil && !st.turnOver()
		}
		if first != nil || (open && len(w.reqs) > 0 && !backlogNext) {
			// A turn of queued requests (only the loop receives, so a
			// non-empty queue has one for it).
			if first != nil {
				run(*first)
			}
		drain:
			for open && more() {
				select {
				case r, ok := <-w.reqs:
					if !ok {
						open = false
						break drain
					}
					run(r)
				default:
					break drain
				}
			}
			backlogNext = len(backlog) > 0
		} else {
			// A turn of the backlog, oldest first, one at least.
			for len(backlog) > 0 && st.stopped == nil {
				r := backlog[0]
				backlog = backlog[1:]
				run(r)
				if !more() {
					break
				}
			}
			backlogNext = false
		}
		backlog = append(backlog, next...)
		st.holdTail() // before the check: a snapshot that failed stops the world
		if st.stopped != nil {
			// Nothing of this turn was durable or acknowledged: drop its
			// records and answer its requests with the failure. The
			// committer still finishes the turns before it.
			w.halt(st.stopped)
			for _, p := range b.reqs {
				p.done <- result{err: fmt.Errorf("%w: %w", ErrBroken, st.stopped)}
			}
			st.out, st.opened, st.settled, st.outBytes = nil, nil, nil, 0
			w.setQuiet(false)
			continue
		}
		st.maybeCheckpoint()
		b.recs, b.opened, b.settled, b.bytes = st.out, st.opened, st.settled, st.outBytes
		st.out, st.opened, st.settled, st.outBytes = nil, nil, nil, 0
		w.setQuiet(st.quiescent() && len(backlog) == 0)
		w.commits <- b
	}
	if err := st.waitDrains(); err != nil {
		w.cfg.Logger.Error("cell delta slice not written at close; its cells are rebuilt from the journal on open", "err", err)
	}
}

// startTurn starts a loop turn's clock.
func (st *state) startTurn() {
	st.turnEnds = time.Time{}
	if d := st.w.cfg.MaxTurnTime; d > 0 && st.w.isOpen() {
		st.turnEnds = time.Now().Add(d)
	}
}

// turnOver says whether the current loop turn has used its time
// (Config.MaxTurnTime): a request under way then yields. Never in replay.
func (st *state) turnOver() bool {
	return !st.turnEnds.IsZero() && !st.replaying && time.Now().After(st.turnEnds)
}

// isOpen says whether the world takes requests (not closing).
func (w *World) isOpen() bool { return !w.closed.Load() }

// handle runs one request. It returns the request and true when it yielded
// (an events request whose turn ran out of time with events left): the
// caller keeps it for a later turn, and it is answered then.
func (st *state) handle(r request, b *batch) (request, bool) {
	var res result
	switch {
	case r.query != nil:
		r.query(st)
	case r.apply != nil:
		res.applied, res.err = st.apply(r.apply, r.dryRun, r.pin)
	case r.receipt != nil:
		if st.man == nil {
			res.err = ErrNoManifest
			break
		}
		res.receipt, res.err = st.ingestReceipt(r.receipt, nil)
		st.maybeMaterialize()
	case r.frame != nil:
		if st.man == nil {
			res.err = ErrNoManifest
			break
		}
		res.receipt.Seq, res.err = st.ingestFrame(r.frame, nil)
	default:
		// The progress lives on the stack until the request yields: most
		// requests never do, and the hottest route pays no allocation.
		var sub submission
		if r.sub != nil {
			sub = *r.sub
		}
		if !st.ingestEvents(r.events, &sub) {
			kept := sub
			r.sub = &kept
			return r, true
		}
		res = sub.res
	}
	if r.done != nil {
		b.reqs = append(b.reqs, pending{done: r.done, res: res})
	}
	return r, false
}

// committer group-commits whatever batches are queued in one journal append,
// then answers their callers.
func (w *World) committer() {
	defer close(w.comDone)
	for b := range w.commits {
		recs, reqs, opened, settled, size := b.recs, b.reqs, b.opened, b.settled, b.bytes
	more:
		for size < maxTurnBytes {
			select {
			case b2, ok := <-w.commits:
				if !ok {
					break more
				}
				size += b2.bytes
				recs = append(recs, b2.recs...)
				reqs = append(reqs, b2.reqs...)
				opened = append(opened, b2.opened...)
				settled = append(settled, b2.settled...)
			default:
				break more
			}
		}
		var err error
		if p := w.broken.Load(); p != nil {
			err = *p
		} else if len(recs) > 0 {
			t0 := time.Now()
			err = w.journal.Append(recs)
			w.cfg.Observer.Flushed(len(recs), time.Since(t0), err)
			if err == nil {
				w.countJournaled(recs)
			}
			if err != nil {
				err = fmt.Errorf("%w: journal append of records %d..%d: %w", ErrStorage, recs[0].Seq, recs[len(recs)-1].Seq, err)
				w.halt(err)
			}
		}
		if err == nil && (len(opened) > 0 || len(settled) > 0) {
			w.cfg.Publisher.Publish(opened, settled)
		}
		for _, p := range reqs {
			if err != nil {
				// Not durable: whatever the loop answered, it is not
				// acknowledged.
				p.res = result{err: fmt.Errorf("%w: %w", ErrBroken, err)}
			}
			p.done <- p.res
		}
	}
}

// Sync waits until everything submitted before it is durable.
func (w *World) Sync(ctx context.Context) error {
	_, err := w.send(ctx, request{query: func(*state) {}})
	return err
}

// do runs fn on the loop goroutine, ordered after earlier requests, and
// returns once the records queued before it are durable.
func (w *World) do(ctx context.Context, fn func(*state)) error {
	_, err := w.send(ctx, request{query: fn})
	return err
}

// countJournaled counts durable records by kind (Status.Journaled).
func (w *World) countJournaled(recs []journal.Record) {
	w.journaledMu.Lock()
	defer w.journaledMu.Unlock()
	if w.journaled == nil {
		w.journaled = map[journal.Kind]uint64{}
	}
	for i := range recs {
		w.journaled[recs[i].Kind]++
	}
}
