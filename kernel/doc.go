// Package kernel is the deterministic stepper of aos (DESIGN.md §5, §6, §9):
// ingress, routing of domain events to mailboxes, fair round-robin stepping,
// workflow invocation, output validation and effect admission, the instance
// table and quiescence, recovery by replay of the journal.
//
// Shape. One goroutine (the loop) owns every piece of deterministic state: the
// manifest, the router, the instance table, the per-workflow cell heads, the
// mailboxes and the journal sequence counter. Callers talk to it through
// requests; it never blocks on I/O. Records it produces go to a committer
// goroutine that group-commits them to the journal (one append, made durable
// before it returns, for everything queued) and only then acknowledges
// callers and releases intents to executors.
//
// Ports. The kernel names no storage engine and no wasm engine. It defines
// the ports it consumes and is handed implementations (Stores): the journal
// (Log: append a frame, read a range, height, wait) and cas.Store, beside
// the Clock, Entropy and Publisher ports in config.go, and the wasm engine
// (Config.Wasm, a modules.Compiler: modules/wasm's, made and closed by the
// host), which the scratch worlds it opens share. The package named after Badger
// opens a world directory and implements both storage ports; journal.Memory and
// cas.Memory serve unit tests; storefault wraps either to inject
// failures or run a hook before an append. Test hooks are wrappers at a
// port, never fields of Config.
//
// Determinism. Each external input (an ingress event, later a receipt) runs to
// idle before the next is taken: it is journaled, routed, delivered, and every
// cell it makes ready is stepped in round-robin order, including the cascade
// of events those steps emit, until no mailbox has work. The journal is
// therefore a pure function of the ordered external inputs and their stamps,
// whatever the batch sizes, goroutine scheduling or map iteration order. Time
// and entropy enter only through the ingress stamp (the Clock and Entropy
// ports), which is journaled; events emitted by steps inherit their parent's
// time and derive their entropy by hashing, so replay needs no port at all.
// The world's identity (identity.go), bound into every intent, is drawn
// from the Entropy port once, when the world is created, and journaled as
// its world record; replay adopts it.
//
// Wall time. What rests on wall time (a step's StepTimeout, an input's
// InputTimeout, setting aside a module whose steps keep timing out) is
// decided live only and journaled as environmental: replay adopts those
// records and never consults a clock. A loop turn's time (MaxTurnTime) only
// decides when a slow request lets others go first, never what is journaled
// for an input.
//
// Parking. An event for an instance that cannot take it now (failed, or its
// module set aside) is parked for it in journal order and delivered when it
// is recovered or resumed (park.go, aside.go); replay rebuilds the parked
// lists from the same records.
//
// Pins. A world holds live manifests (pins.go): the current one, and each
// older one an apply --pin kept for the instances then in flight, which
// are pinned to it and step, take receipts and route what they emit under
// it until they move (at rest, with a state the current schema accepts).
// An instance's pin is nil on the current manifest, so the hot path pays a
// nil check; pins follow from the journal and replay rebuilds them.
//
// Replay follows the journal: for each step record it re-runs that step on
// the state replay has rebuilt and compares the records the step produces,
// byte for byte, with the journaled ones (replay-or-die). It never re-runs
// the scheduler.
//
// Records and readers. The journal's record types and their encoders live in
// package records, which the kernel writes with and readers decode with. The
// kernel keeps only the queries that need the loop (Status, Cell, CellPage,
// Failed, Limits) and answers with plain structs: keys and states stay
// canonical CBOR, and the API renders them, and traces of the journal, as
// JSON. The structs carry no JSON tags: their JSON shapes (Status,
// LimitsResult, RecoverResult, ReceiptResult, ...) are the API's views
// (api/shapes.go), converted from these. No file here imports
// encoding/json, tests included (the scenario harness renders typed records
// itself).
//
// Must not touch: wall clock, randomness (except through the ports), map
// iteration where order matters, the network, JSON rendering, a storage
// engine (Badger or any other: only the ports), a wasm engine (wazero:
// only modules.Compiler). Executors live elsewhere.
package kernel
