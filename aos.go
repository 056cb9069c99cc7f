package aos

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
)

// Options configure Open. The zero value opens a world with no native
// modules, no HTTP API and no logging.
type Options struct {
	// Modules are native workflow modules, e.g. sdk's Module.Builtin(identity).
	// A manifest's builtin def names one by Name and pins its Identity; a
	// wasm def whose artifact hash is a module's Identity runs it natively.
	Modules []modules.Builtin
	// Listen, when set, serves the HTTP API (docs/API.md) on this address,
	// e.g. "127.0.0.1:0" for a free loopback port (see World.Addr). The API
	// needs the bearer token in the world's token file (World.Token). A
	// non-loopback address is served with a logged warning.
	Listen string
	// Logger receives the world's logs (default: none).
	Logger *slog.Logger

	// The kernel's knobs (kernel.Config documents each; zero values take
	// its defaults).
	Limits      kernel.Limits // per-step and ingress bounds
	Cells       cells.Config  // hot cache size, spill thresholds
	StepTimeout time.Duration // wall-clock limit of one wasm step
	// InputTimeout bounds the wall time of one external input's whole
	// cascade, and SetAsideAfter sets a wasm module aside after that many
	// of its steps in a row timed out (kernel.Config documents both).
	InputTimeout  time.Duration
	SetAsideAfter int
	// InstantiateTimeout bounds building a wasm module's fresh instance,
	// apart from the step's and the input's limits, which start after it.
	InstantiateTimeout time.Duration
	Clock              kernel.Clock   // ingress time (default: the system clock)
	Entropy            kernel.Entropy // ingress entropy (default: crypto/rand)
	// WasmCacheDir keeps compiled wasm code across restarts (default:
	// wasm-cache in the world directory). Worlds may share one.
	WasmCacheDir string
}

// World is an open world. Its methods are safe for concurrent use.
type World struct {
	h *host.Host
}

// Open opens the world in directory dir, creating it first when it holds no
// world yet (as `aosd init` does: store, API token, executor key), and starts
// the built-in executors and, with opts.Listen, the HTTP API. ctx bounds the
// opening only; the world runs until Close. The wiring is host.Open's, the
// same `aosd serve` runs.
func Open(ctx context.Context, dir string, opts Options) (*World, error) {
	h, err := host.Open(ctx, dir, host.Options{
		Listen: opts.Listen, Logger: opts.Logger, Modules: opts.Modules, Create: true,
		Kernel: kernel.Config{
			Limits: opts.Limits, Cells: opts.Cells, StepTimeout: opts.StepTimeout,
			InputTimeout: opts.InputTimeout, SetAsideAfter: opts.SetAsideAfter, InstantiateTimeout: opts.InstantiateTimeout,
			Clock: opts.Clock, Entropy: opts.Entropy,
		},
		Store: host.StoreOptions{WasmCacheDir: opts.WasmCacheDir},
	})
	if err != nil {
		return nil, err
	}
	return &World{h: h}, nil
}

// Dir is the world directory.
func (w *World) Dir() string { return string(w.h.Dir()) }

// Addr is the HTTP API's address (host:port), "" when it is not served.
func (w *World) Addr() string { return w.h.Addr() }

// Token is the HTTP API's bearer token.
func (w *World) Token() string { return w.h.Token() }

// Kernel is the open kernel world: status, cells, traces, the journal.
func (w *World) Kernel() *kernel.World { return w.h.Kernel() }

// Identity is the world's identity ("world:" and 32 hex digits), made when
// the world was created and journaled as its first record: every intent
// hash binds it, and every receipt and frame for the world must name it.
func (w *World) Identity() string { return w.h.Kernel().Identity() }

// Apply loads the manifest at path (a file or a directory of JSON files),
// validates it, and makes it the world's manifest; dryRun reports what would
// change and changes nothing. The result says what `aosd apply --json`
// says. When the world is not quiescent the result lists the blockers and
// the error wraps kernel.ErrNotQuiescent (errors.Is); a manifest that does
// not load or validate is refused with an error naming the file, the def
// and the JSON pointer.
func (w *World) Apply(ctx context.Context, path string, dryRun bool) (*ApplyResult, error) {
	out, err := w.h.Local().Apply(ctx, api.ApplyRequest{Path: path, DryRun: dryRun})
	return applyResult(out), err
}

// ApplyResult says what Apply did, or with a dry run would do.
type ApplyResult struct {
	Applied   bool // the manifest is now the world's
	Unchanged bool // the world's manifest already had its hash
	DryRun    bool // nothing changed: the result says what would

	ManifestName string
	ManifestHash string // "sha256:" and 64 hex digits
	PreviousHash string // the manifest it replaces ("" for the world's first)
	Seq          uint64 // the manifest record (0 when nothing was journaled)

	// The defs the manifest adds, removes and changes (by hash), and the
	// subscriptions it adds and removes, in the manifest's order.
	Added, Removed, Changed                  []string
	SubscriptionsAdded, SubscriptionsRemoved []manifest.Subscription

	// BlockedBy is what kept the world from quiescence when the apply was
	// refused: instances not at rest and intents in flight.
	BlockedBy []Blocker
}

// Blocker is an instance not at rest (Kind "instance": its workflow, key
// as JSON, and status) or an intent in flight (Kind "intent": its origin
// workflow and key, hash and effect).
type Blocker struct {
	Kind, Workflow, Status, Intent, Effect string
	Key                                    json.RawMessage
}

// applyResult is out, the API's answer, as an ApplyResult (nil for nil).
func applyResult(out *api.ApplyOutput) *ApplyResult {
	if out == nil {
		return nil
	}
	r := &ApplyResult{Applied: out.Applied, Unchanged: out.Unchanged, DryRun: out.DryRun, ManifestName: out.ManifestName,
		ManifestHash: out.ManifestHash, Seq: out.Seq, Added: out.Changes.Added, Removed: out.Changes.Removed,
		Changed: out.Changes.Changed, SubscriptionsAdded: out.Changes.SubscriptionsAdded,
		SubscriptionsRemoved: out.Changes.SubscriptionsRemoved, BlockedBy: make([]Blocker, len(out.BlockedBy))}
	if out.PreviousHash != nil {
		r.PreviousHash = *out.PreviousHash
	}
	for i, b := range out.BlockedBy {
		r.BlockedBy[i] = Blocker{Kind: b.Kind, Workflow: b.Workflow, Status: b.Status, Intent: b.Intent, Effect: b.Effect, Key: b.Key}
	}
	return r
}

// Send injects one domain event, value as JSON, and returns its journal
// sequence once it is durable. Invalid input is refused with an error naming
// the schema and the JSON pointer, and nothing is journaled.
func (w *World) Send(ctx context.Context, schema string, value json.RawMessage) (uint64, error) {
	res, err := w.h.Local().Send(ctx, []api.Event{{Schema: schema, Value: value}})
	if err != nil {
		return 0, err
	}
	return res[0].Seq, nil
}

// Cell is one cell of a keyed workflow as `aosd cells show --json` shows it:
// status and state as JSON. key is JSON if it parses as JSON, else a string
// ("a" and `"a"` are the same key); an unkeyed workflow takes "". A cell
// that does not exist is an error wrapping kernel.ErrNoCell.
func (w *World) Cell(ctx context.Context, workflow, key string) (*Cell, error) {
	v, err := w.h.Local().Cell(ctx, workflow, key)
	if err != nil {
		return nil, err
	}
	c := &Cell{Workflow: v.Workflow, Key: v.Key, Status: v.Status, Reason: v.Reason, State: v.State, Size: v.Size,
		Inflight: v.Inflight, Parked: v.Parked, AsideModule: v.AsideModule}
	if v.StateHash != nil {
		c.StateHash = v.StateHash.String()
	}
	return c, nil
}

// Cell is one cell: an instance of a keyed workflow, or an unkeyed
// workflow's one instance.
type Cell struct {
	Workflow string
	Key      json.RawMessage // the key as JSON (null for an unkeyed workflow)
	// Status is running (events queued for it), waiting (intents in
	// flight), completed (at rest), failed (a step faulted; Reason says
	// why) or parked (events wait for it behind a module set aside).
	Status, Reason string
	State          json.RawMessage // the state as JSON (null: none, or none with a JSON form)
	StateHash      string          // "sha256:<hex>" of the state's canonical CBOR ("" for none)
	Size           uint64          // the state's bytes
	Inflight       []string        // the hashes of its intents in flight, sorted
	Parked         uint64          // events parked for it
	AsideModule    string          // the module set aside that holds it ("" when none)
}

// Wait blocks until ctx is done (nil) or the HTTP API stops on its own (its
// error). Without an API it waits for ctx.
func (w *World) Wait(ctx context.Context) error { return w.h.Wait(ctx) }

// Close stops the HTTP API (streams end, requests in flight finish), closes
// the kernel (everything acknowledged is durable), stops the executors and
// closes the store. It returns the first error; later calls return it again.
func (w *World) Close() error { return w.h.Close() }
