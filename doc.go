// Package aos runs a whole aos world inside another Go program: the world
// directory (created on first use, as `aosd init` creates it), the Badger
// store, the kernel, the built-in executors and their dispatcher, and
// optionally the HTTP API. The wiring itself is host.Open's, which `aosd
// serve` runs too (host.Run), so an embedded world and a daemon behave the
// same, byte for byte in the journal; this package adds creating the world on
// first use and a small typed API of its own types (ApplyResult, Cell),
// converted at the edge from the API's. docs/embedding.md walks through an
// example.
//
// What an embedder adds is native workflow code: Options.Modules registers Go
// modules (sdk's Module.Builtin(identity)) that a manifest's builtin defs name
// by name and identity, or that stand in for a wasm module whose artifact hash
// they declare as their identity.
//
// Invariants:
//   - One process opens a world directory at a time (Badger's lock); Open of
//     a world a daemon holds fails with an error that says so.
//   - While the HTTP API is served, daemon.json names this process, so the
//     aosd CLI reaches the world through it; Close removes it.
//   - Close stops in order: HTTP (streams end, requests finish), the kernel
//     (everything acknowledged is durable), the executors, the store.
//
// The package decides nothing and wires nothing of its own. It must not reach into kernel
// internals, and it holds no global state: two Worlds in one process are
// independent.
package aos
