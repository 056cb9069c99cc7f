// Package modules defines the workflow step contract (DESIGN.md §5) and the
// runtimes that execute it.
//
// A step is a pure function from an input envelope to an output envelope. Both
// are canonical CBOR when they cross a runtime boundary (WebAssembly); the
// builtin runtime passes the same envelopes as Go values to avoid encoding on
// the hot path. The kernel validates every output (canonical bytes, schemas,
// limits) whatever the runtime, so a builtin gets no more trust than a
// WebAssembly guest.
//
// It owns: the envelope types, the builtin registry. It must not touch the
// journal, cells or the clock: a step sees only its input.
package modules
