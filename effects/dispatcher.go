package effects

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// ErrTransient marks an attempt failure worth retrying.
var ErrTransient = errors.New("effects: transient failure")

// Executor performs one attempt of an intent. It returns the receipt status
// and canonical CBOR payload, or an error: wrapped ErrTransient to retry,
// anything else to settle the intent with status "error".
type Executor interface {
	Execute(ctx context.Context, it kernel.OpenIntent) (receipts.Status, []byte, error)
}

// Sink is where receipts and frames go: the kernel World.
type Sink interface {
	SubmitReceipt(ctx context.Context, sr receipts.SignedReceipt) (kernel.ReceiptResult, error)
	SubmitFrame(ctx context.Context, f receipts.SignedFrame) (uint64, error)
}

// Config configures a Dispatcher.
type Config struct {
	Name      string             // executor name for built-in receipts (default receipts.BuiltinExecutor, the only name a keyring trusts for sys/ effects)
	Key       ed25519.PrivateKey // signs built-in receipts and frames; its public key must be in the world's keyring, allowed the Executors' effects
	Executors map[string]Executor
	Logger    *slog.Logger
	// DefaultRetry applies to effects that declare no retry policy.
	DefaultRetry RetryPolicy
	// Now is the clock for leases (default time.Now).
	Now func() time.Time
}

// RetryPolicy bounds attempts and backoff.
type RetryPolicy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Dispatcher implements kernel.Publisher.
type Dispatcher struct {
	cfg  Config
	sink Sink

	mu       sync.Mutex
	pending  map[schemas.Hash]*entry // every intent in flight, by hash
	external []*entry                // intents for external executors, in publish order
	started  bool
	early    []kernel.OpenIntent // published before Start
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	changed  chan struct{} // closed and replaced when external work appears
}

type entry struct {
	it       kernel.OpenIntent
	cancel   context.CancelFunc // built-in run
	leasedTo string
	leaseEnd time.Time
}

// New makes a dispatcher; Start connects it to the world.
func New(cfg Config) *Dispatcher {
	if cfg.Name == "" {
		cfg.Name = receipts.BuiltinExecutor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DefaultRetry.MaxAttempts == 0 {
		cfg.DefaultRetry = RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Dispatcher{cfg: cfg, pending: map[schemas.Hash]*entry{}, ctx: ctx, cancel: cancel, changed: make(chan struct{})}
}

var _ kernel.Publisher = (*Dispatcher)(nil)

// Start begins executing: intents published so far start now.
func (d *Dispatcher) Start(sink Sink) {
	d.mu.Lock()
	d.sink, d.started = sink, true
	early := d.early
	d.early = nil
	d.mu.Unlock()
	d.Publish(early, nil)
}

// Stop cancels running attempts and waits for them.
func (d *Dispatcher) Stop() {
	d.cancel()
	d.wg.Wait()
}

// Publish implements kernel.Publisher. It never blocks on I/O.
func (d *Dispatcher) Publish(opened []kernel.OpenIntent, settled []schemas.Hash) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// A settled intent (a receipt, its instance's failure, an operator's
	// cancel) is withdrawn: a built-in run (a timer waiting) is stopped,
	// and no claim hands it out again.
	for _, h := range settled {
		if e := d.pending[h]; e != nil {
			if e.cancel != nil {
				e.cancel()
			}
			delete(d.pending, h)
		}
	}
	if len(settled) > 0 {
		d.compactExternal()
	}
	if !d.started {
		d.early = append(d.early, opened...)
		return
	}
	added := false
	for _, it := range opened {
		if _, dup := d.pending[it.Hash]; dup {
			continue
		}
		e := &entry{it: it}
		d.pending[it.Hash] = e
		if ex, ok := d.cfg.Executors[it.Effect]; ok {
			ctx, cancel := context.WithCancel(d.ctx)
			e.cancel = cancel
			d.wg.Add(1)
			go d.run(ctx, ex, it)
			continue
		}
		d.external = append(d.external, e)
		added = true
	}
	if added {
		close(d.changed)
		d.changed = make(chan struct{})
	}
}

func (d *Dispatcher) compactExternal() {
	kept := d.external[:0]
	for _, e := range d.external {
		if _, ok := d.pending[e.it.Hash]; ok {
			kept = append(kept, e)
		}
	}
	clear(d.external[len(kept):])
	d.external = kept
}

func (d *Dispatcher) policy(it kernel.OpenIntent) RetryPolicy {
	if it.Retry == nil {
		return d.cfg.DefaultRetry
	}
	p := RetryPolicy{MaxAttempts: it.Retry.MaxAttempts,
		InitialBackoff: time.Duration(it.Retry.InitialBackoffMs) * time.Millisecond,
		MaxBackoff:     time.Duration(it.Retry.MaxBackoffMs) * time.Millisecond}
	if p.MaxAttempts < 1 {
		p.MaxAttempts = 1
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	return p
}

// run performs an intent with a built-in executor, retrying transient
// failures, and submits the signed receipt.
func (d *Dispatcher) run(ctx context.Context, ex Executor, it kernel.OpenIntent) {
	defer d.wg.Done()
	// Attempts go on from the last one journaled (a frame each) before a
	// restart, so a re-sent request is not counted as attempt 1 again.
	first := int(it.LastFrame) + 1
	if ax, ok := ex.(AttemptExecutor); ok {
		d.runAttempts(ctx, ax, it, first)
		return
	}
	pol := d.policy(it)
	var status receipts.Status
	var payload []byte
	attempt := first
	for ; ; attempt++ {
		var err error
		status, payload, err = ex.Execute(ctx, it)
		if ctx.Err() != nil {
			return // settled elsewhere, or shutting down: the world republishes on reopen
		}
		if err == nil {
			break
		}
		if !errors.Is(err, ErrTransient) || attempt >= pol.MaxAttempts {
			status = receipts.StatusError
			payload = schemas.MustMarshal(map[string]any{"error": err.Error(), "attempts": uint64(attempt)})
			break
		}
		wait := pol.backoff(attempt - first + 1)
		d.retrying(ctx, it, uint64(attempt), err.Error(), wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	// Submit under the dispatcher's context, not the intent's: the world
	// settles the intent while SubmitReceipt waits for that to be durable,
	// and the settlement cancels the intent's context, which would turn a
	// delivered receipt into a "not admitted" error here.
	d.submit(d.ctx, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: d.cfg.Name, Status: status,
		Payload: payload, Attempt: uint64(attempt), IssuerRef: it.IssuerRef})
}

// runAttempts performs an intent with an executor that retries by itself
// and submits the signed receipt.
func (d *Dispatcher) runAttempts(ctx context.Context, ax AttemptExecutor, it kernel.OpenIntent, first int) {
	status, payload, attempt, err := ax.ExecuteAttempts(ctx, it, uint64(first), func(a AttemptStart) {
		d.starting(ctx, it, a)
	})
	if ctx.Err() != nil {
		return // settled elsewhere, or shutting down: the world republishes on reopen
	}
	if err != nil {
		status = receipts.StatusError
		payload = schemas.MustMarshal(map[string]any{"error": err.Error(), "attempts": attempt})
	}
	d.submit(d.ctx, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: it.Effect, Executor: d.cfg.Name, Status: status,
		Payload: payload, Attempt: attempt, IssuerRef: it.IssuerRef})
}

// retrying journals a failed attempt that will be retried as a stream
// frame whose seq is the attempt's number: `aosd trace` shows it, and a
// restart goes on from the next number (OpenIntent.LastFrame).
func (d *Dispatcher) retrying(ctx context.Context, it kernel.OpenIntent, attempt uint64, why string, wait time.Duration) {
	frame := schemas.MustMarshal(map[string]any{"attempt": attempt, "error": why, "retry_in_ms": uint64(wait.Milliseconds())})
	sf := receipts.SignFrame(d.cfg.Key, receipts.Frame{World: it.World, Intent: it.Hash, Effect: it.Effect, Seq: attempt, Executor: d.cfg.Name, Payload: frame})
	if _, err := d.sink.SubmitFrame(ctx, sf); err != nil {
		d.cfg.Logger.Debug("attempt frame not recorded", "intent", it.Hash, "err", err)
	}
}

// starting journals, before an AttemptExecutor's attempt, that it is
// being made, as a stream frame whose seq is the attempt's number, and
// waits for it to be durable: a restart goes on from the next number even
// if the attempt never finished. A frame that cannot be recorded (the
// world closing, its frame limit) does not stop the attempt.
func (d *Dispatcher) starting(ctx context.Context, it kernel.OpenIntent, a AttemptStart) {
	frame := map[string]any{"attempt": a.Attempt}
	if a.LastError != "" {
		frame["last_error"], frame["waited_ms"] = a.LastError, uint64(a.Waited.Milliseconds())
	}
	if a.Resumed {
		frame["resumed"] = true
	}
	sf := receipts.SignFrame(d.cfg.Key, receipts.Frame{World: it.World, Intent: it.Hash, Effect: it.Effect, Seq: a.Attempt, Executor: d.cfg.Name,
		Payload: schemas.MustMarshal(frame)})
	if _, err := d.sink.SubmitFrame(ctx, sf); err != nil {
		d.cfg.Logger.Debug("attempt frame not recorded", "intent", it.Hash, "err", err)
	}
}

func (d *Dispatcher) submit(ctx context.Context, r receipts.Receipt) {
	sr := receipts.Sign(d.cfg.Key, r)
	// A receipt that lost the race with a settlement (a cancel, its
	// instance's failure) is refused or dropped by the world, as it must be.
	if _, err := d.sink.SubmitReceipt(ctx, sr); err != nil && !errors.Is(err, kernel.ErrReceiptDropped) && !errors.Is(err, kernel.ErrReceiptDuplicate) &&
		!errors.Is(err, kernel.ErrIntentCancelled) {
		d.cfg.Logger.Warn("receipt not admitted", "intent", r.Intent, "effect", r.Effect, "err", err)
	}
}

// Claimed is an intent leased to an external executor.
type Claimed struct {
	kernel.OpenIntent
	LeaseUntil time.Time `json:"lease_until"`
}

// Claim leases up to max pending intents of the given effects to executor
// for lease. An intent whose lease expired without a receipt can be claimed
// again (by anyone): executors must make effects idempotent per intent hash.
// With wait > 0 and nothing to claim, Claim waits up to wait for work.
func (d *Dispatcher) Claim(ctx context.Context, executor string, effects []string, max int, lease, wait time.Duration) ([]Claimed, error) {
	if max <= 0 {
		max = 1
	}
	want := map[string]bool{}
	for _, e := range effects {
		want[e] = true
	}
	deadline := d.cfg.Now().Add(wait)
	for {
		d.mu.Lock()
		now := d.cfg.Now()
		var out []Claimed
		for _, e := range d.external {
			if len(out) >= max {
				break
			}
			if !want[e.it.Effect] || (e.leasedTo != "" && now.Before(e.leaseEnd)) {
				continue
			}
			e.leasedTo, e.leaseEnd = executor, now.Add(lease)
			out = append(out, Claimed{OpenIntent: e.it, LeaseUntil: e.leaseEnd})
		}
		ch := d.changed
		d.mu.Unlock()
		if len(out) > 0 || wait <= 0 || !d.cfg.Now().Before(deadline) {
			return out, nil
		}
		t := time.NewTimer(deadline.Sub(d.cfg.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-ch:
			t.Stop()
		case <-t.C:
		}
	}
}

// Queued counts intents waiting for an executor: external intents that no
// executor holds a live lease on. The kernel reports it as queued_effects.
func (d *Dispatcher) Queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	n := 0
	for _, e := range d.pending {
		if _, builtin := d.cfg.Executors[e.it.Effect]; !builtin && (e.leasedTo == "" || now.After(e.leaseEnd)) {
			n++
		}
	}
	return n
}

// Pending lists intents in flight here, oldest first, with lease holders.
func (d *Dispatcher) Pending() []PendingInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]PendingInfo, 0, len(d.pending))
	for _, e := range d.pending {
		_, builtin := d.cfg.Executors[e.it.Effect]
		out = append(out, PendingInfo{Hash: e.it.Hash, Effect: e.it.Effect, Builtin: builtin, LeasedTo: e.leasedTo, EmittedAt: e.it.EmittedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EmittedAt < out[j].EmittedAt })
	return out
}

// PendingInfo describes one intent in flight.
type PendingInfo struct {
	Hash      schemas.Hash `json:"hash"`
	Effect    string       `json:"effect"`
	Builtin   bool         `json:"builtin"`
	LeasedTo  string       `json:"leased_to,omitempty"`
	EmittedAt uint64       `json:"emitted_at"`
}

// String helps logs.
func (c Claimed) String() string { return fmt.Sprintf("%s %s", c.Effect, c.Hash) }
