package kernel

import (
	"crypto/rand"
	"log/slog"
	"time"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
)

// Clock is the time port: ingress stamps come from it and nowhere else.
type Clock interface{ NowNs() uint64 }

// Entropy is the randomness port: ingress stamps take 32 bytes from it.
type Entropy interface{ Fill(p []byte) }

// SystemClock is the wall clock.
type SystemClock struct{}

// NowNs implements Clock.
func (SystemClock) NowNs() uint64 { return uint64(time.Now().UnixNano()) }

// CryptoEntropy reads crypto/rand.
type CryptoEntropy struct{}

// Fill implements Entropy.
func (CryptoEntropy) Fill(p []byte) { _, _ = rand.Read(p) }

// Limits bound what one step may produce, what one external input may cause,
// and what ingress accepts. The type is the journal's (records.Limits: it is
// journaled with each manifest and with every change); the kernel owns their
// defaults (limitDefaults), their checks and when they change (limits.go).
type Limits = records.Limits

// Snapshot defaults (Config.SnapshotEvery, Config.SnapshotInterval).
const (
	DefaultSnapshotEvery    = 50_000
	DefaultSnapshotInterval = 5 * time.Minute
)

// limitDefaults are the values of limits left zero.
var limitDefaults = Limits{
	MaxEffects:               16,
	MaxDomainEvents:          64,
	MaxOutputBytes:           1 << 20,
	MaxEventBytes:            256 << 10,
	MaxCascadeDepth:          64,
	MaxStepsPerInput:         10_000,
	MaxRecordsPerInput:       50_000,
	MaxBytesPerInput:         64 << 20,
	IdempotencyWindowSeconds: 24 * 60 * 60,
	MaxIdempotencyKeys:       1_000_000,
	MaxFramesPerIntent:       1024,
	MaxFrameBytes:            64 << 10,
	MaxSettledIntents:        65_536,
	MaxParkedPerInstance:     1000,
}

// limitsWithDefaults fills the limits left zero with their defaults.
func limitsWithDefaults(l Limits) Limits { return mergeLimits(limitDefaults, l) }

// Config configures a World. Zero values take the documented defaults.
type Config struct {
	Clock    Clock   // default SystemClock
	Entropy  Entropy // default CryptoEntropy
	Builtins *modules.Builtins
	Limits   Limits
	Cells    cells.Config
	Logger   *slog.Logger
	Observer Observer // metrics hooks (default: none)
	// Publisher receives intents once they are durable (default: none; the
	// daemon wires the executors here).
	Publisher Publisher
	// Keyring holds the executor keys whose receipts the world trusts.
	Keyring *receipts.Keyring
	// MaterializeAt: when a workflow's cell delta holds more dirty cells than
	// this, the kernel materializes it into the CellIndex between inputs, so
	// memory stays bounded without snapshots (default 65536). The index root
	// is a pure function of the cells, so this changes nothing journaled.
	MaterializeAt int
	// MaterializeChunk bounds how many dirty cells one materialization step
	// writes (default 4096, ~75 ms on Badger over a million-cell index), so
	// draining a delta pauses the loop in short slices rather than once for
	// the whole delta. A delta over MaterializeAt is drained to half of it.
	MaterializeChunk int
	// MaterializeInBackground writes each slice from its own goroutine while
	// the loop goes on (cells.Drain), instead of on the loop: the loop then
	// pauses ~8 ms per 4,096-cell slice instead of ~75 ms on Badger. Off by
	// default: the extra concurrent writing makes Badger's memtable flushes
	// overlap ingestion more, and the million-cell test measured 360-490 MiB
	// of heap at 1M cells with it (128-244 MiB without), too close to its
	// 512 MiB bound until Badger's flush memory is tamed. See
	// docs/DECISIONS.md.
	MaterializeInBackground bool
	// Wasm compiles the manifest's wasm modules: the caller's engine (e.g.
	// modules/wasm's), shared by the scratch worlds this world opens
	// (replay verification, shadow, cell history) and closed by the caller
	// after the world. The kernel names no engine. Nil: a manifest with a
	// wasm module that no builtin stands in for is refused (apply) or
	// cannot be opened, with an error naming the module.
	Wasm modules.Compiler
	// StepTimeout is the wall-clock limit of one wasm step (default 2s). A
	// step it stops is an environmental fault: journaled as such, adopted by
	// replay, never re-judged. Replay runs with no limit. Negative: none.
	StepTimeout time.Duration
	// InputTimeout is the wall-clock budget of one external input's whole
	// cascade, every step it causes together (default 5s, or none when
	// StepTimeout is negative; negative: none).
	// Each wasm step's limit is the smaller of StepTimeout and what is
	// left of it; once it is spent, the instances still holding the
	// input's work are failed with an environmental fault (their pending
	// events parked, the failed input kept for a retry), as a step the
	// host stopped is. It is host configuration, not a journaled limit:
	// what it decides is journaled as environmental and adopted by replay,
	// which runs with no wall-clock limit at all.
	InputTimeout time.Duration
	// InstantiateTimeout bounds building a wasm module's fresh instance
	// (instantiation and _initialize) before a step (default 30s, or none
	// when StepTimeout is negative; negative: none). It is apart from the
	// step's limits: the step's StepTimeout and the input's InputTimeout
	// start after it, because an instance costs about a thousand steps
	// (90 ms under -race against 30-130 µs for a step of the counter), so
	// on a loaded machine a limit sized for steps stopped the first step
	// after every start or snapshot and failed its instance. An
	// instantiation it stops is an environmental fault, as a step's.
	InstantiateTimeout time.Duration
	// SetAsideAfter sets a wasm module aside once this many of its steps
	// in a row were stopped by a wall-clock limit (default 3; negative:
	// never). Its workflows' inputs are then parked, not stepped, until an
	// operator resumes the module (World.ResumeModule) or applies a
	// manifest that replaces it (aside.go). The decision is journaled and
	// replay adopts it; the count is the running world's (it starts at
	// zero when the world opens).
	SetAsideAfter int
	// MaxTurnTime bounds one loop turn (default 100ms; negative: none): a
	// turn takes no more requests once it has run this long, and an
	// events request still under way then yields to the requests queued
	// behind it, going on in a later turn. So a request of many slow
	// inputs holds other clients' acknowledgements for about one input,
	// not for all of its inputs. It changes when requests are answered,
	// never what is journaled for an input.
	MaxTurnTime time.Duration
	// MaxBatch bounds how many requests one loop turn takes before handing
	// its records to the committer (default 4096).
	MaxBatch int
	// SnapshotEvery takes a snapshot once this many records were journaled
	// since the last checkpoint (default 50,000; negative: never by count).
	SnapshotEvery int
	// SnapshotMaxTail bounds what an open replays after a kill at any
	// moment, during a snapshot included: once this many records were
	// journaled since the checkpoint of the newest journaled snapshot while
	// a snapshot is being written, the loop waits for that snapshot before
	// it hands on its turn (holdTail). A durable journal then never holds
	// more than SnapshotMaxTail records plus one loop turn's after its
	// newest snapshot's checkpoint. Default 2 x SnapshotEvery; a positive
	// value below SnapshotEvery is raised to it; negative, or SnapshotEvery
	// negative: no bound.
	SnapshotMaxTail int
	// SnapshotInterval takes a snapshot when this much time has passed and
	// anything was journaled since the last checkpoint (default 5 minutes;
	// negative: never by time).
	SnapshotInterval time.Duration
	// FromGenesis opens by replaying the whole journal, ignoring snapshots.
	FromGenesis bool
	// VerifySnapshots makes replay recompute the snapshot at every
	// checkpoint it passes and compare it with the journaled object, byte
	// for byte (aosd replay --verify).
	VerifySnapshots bool
	// Progress, when set, is told how replay and snapshots advance (the
	// CLI draws bars on a terminal).
	Progress Progress

	// noIdentity: the world journals no identity of its own (a world on
	// ScratchStores, scratchConfig); it takes borrowedWorld, in memory
	// only, when its journal holds none (identity.go).
	noIdentity    bool
	borrowedWorld string
}

// ProgressBar follows one long operation.
type ProgressBar interface {
	Add(n uint64)
	Finish()
}

// Progress starts a bar for an operation of total steps (0: unknown).
type Progress func(label string, total uint64) ProgressBar

type nopBar struct{}

func (nopBar) Add(uint64) {}
func (nopBar) Finish()    {}

func (p Progress) start(label string, total uint64) ProgressBar {
	if p == nil {
		return nopBar{}
	}
	return p(label, total)
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Entropy == nil {
		c.Entropy = CryptoEntropy{}
	}
	if c.Builtins == nil {
		c.Builtins = modules.NewBuiltins()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Publisher == nil {
		c.Publisher = nopPublisher{}
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.MaterializeAt == 0 {
		c.MaterializeAt = 1 << 16
	}
	if c.MaterializeChunk == 0 {
		c.MaterializeChunk = 4096
	}
	if c.InputTimeout == 0 {
		c.InputTimeout = 5 * time.Second
		if c.StepTimeout < 0 {
			// A world that asked for no wall-clock limit on its steps
			// gets none on its inputs either, unless it asks.
			c.InputTimeout = -1
		}
	}
	if c.InstantiateTimeout == 0 {
		c.InstantiateTimeout = 30 * time.Second
		if c.StepTimeout < 0 {
			c.InstantiateTimeout = -1
		}
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = 2 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 4096
	}
	if c.SetAsideAfter == 0 {
		c.SetAsideAfter = 3
	}
	if c.MaxTurnTime == 0 {
		c.MaxTurnTime = 100 * time.Millisecond
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	switch {
	case c.SnapshotEvery < 0 || c.SnapshotMaxTail < 0:
		c.SnapshotMaxTail = -1
	case c.SnapshotMaxTail == 0:
		c.SnapshotMaxTail = 2 * c.SnapshotEvery
	case c.SnapshotMaxTail < c.SnapshotEvery:
		c.SnapshotMaxTail = c.SnapshotEvery
	}
	return c
}
