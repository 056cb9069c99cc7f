// Package modules defines the workflow step contract (DESIGN.md §5) and the
// ports through which the kernel runs workflow code.
//
// A step is a pure function from an input envelope to an output envelope.
// Both are canonical CBOR when they cross a runtime boundary (WebAssembly,
// see modules/wasm and docs/wasm-abi.md); a builtin gets the same envelopes
// as Go values, to avoid encoding on the hot path. The kernel validates every
// output (canonical bytes, schemas, limits) whatever the runtime, so a
// builtin gets no more trust than a WebAssembly guest.
//
// A step fails in one of two classes. A Fault is the workflow's own doing
// (a trap, a panic, malformed output, a forbidden host call): the kernel
// journals its text and replay must reproduce it. An EnvError is the host's
// (a wall-clock limit, a runtime that could not start): replay cannot
// reproduce it, so it is never judged as the workflow's.
//
// It owns: the envelope types, the fault classes, the builtin registry
// (Go code with a declared code identity that manifests pin), and the
// Compiler and Runner ports (modules/wasm implements them). It must not
// touch the journal, cells or the clock: a step sees only its input.
package modules
