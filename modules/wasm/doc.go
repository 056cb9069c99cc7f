// Package wasm runs WebAssembly workflow modules on wazero: the host side
// of the module ABI in docs/wasm-abi.md.
//
// It owns: checking a module against the ABI when it is compiled (exports,
// imports limited to wasi_snapshot_preview1 functions, and a shape wazero
// can read without being taken down: shape.go), instrumenting it so that it
// can be stopped (instrument.go), compiling it
// (once per code hash and memory limit, shared by every Module of that code,
// cached on disk when Config.CacheDir is set), the instances, the host's
// wasi_snapshot_preview1, and the envelopes' bytes: the input written into
// the guest, the result read out of it.
//
// It must not touch the journal, cells, the CAS or the clock. A step sees
// only its input envelope and gives back an output, a modules.Fault or a
// *modules.EnvError; what to journal, and whether a failure is replayed or
// adopted, is the kernel's. It does not validate outputs against schemas
// or limits either: the kernel does that for every runtime alike.
//
// Invariants:
//
//   - Same module, same sequence of calls, same results: outputs and fault
//     texts alike. Nothing ambient reaches a guest. WASI calls get
//     deterministic answers (wasi.go): no args, env or files; a monotonic
//     clock that counts; a wall clock frozen at 2020-01-01; randomness from
//     a fixed seed while _initialize runs. The calls a step must not make
//     (randomness, files, sockets, sleeping) are recorded and turn the step
//     into a fault naming the call. Fault texts carry no host addresses or
//     times; what the guest printed (a Go panic's trace) is in guest terms.
//   - A Go guest is not faulted for what its runtime does: during steps the
//     Go runtime reads both clocks (the wall clock at every GC) and polls
//     with a zero timeout, and those are answered, not refused
//     (TestGoRuntimeNeedsNoFaults keeps this true).
//   - A warm instance lives until Reset, Close or a failed step. After any
//     error, the instance is discarded and the next Step starts a fresh one,
//     so the kernel can replace instances at journaled points only.
//   - Prepare (modules.Preparer) makes the warm instance ready, adopting
//     the spare or instantiating, under a context of its own: the kernel
//     calls it before a live step and starts the step's wall-clock limit
//     after it, since an instance costs about a thousand steps. It reports
//     what the Step would have reported for that instantiation.
//   - Reset of a module that has been stepping builds the next fresh
//     instance (instantiation and _initialize) at once on a goroutine of its
//     own, the spare, so that the next Step, on the kernel's loop, only
//     adopts it; otherwise a Step instantiates when it finds no instance. A
//     spare is exactly what the Step would have built (a fresh instance is
//     deterministic), writes only its own output captures, and whatever
//     _initialize did is reported by the adopting Step as it would have been
//     inline. The adopting Step waits for it under its context and, if that
//     ends first, stops it (the interrupt), waits for its goroutine and
//     reports a timeout. At most one spare per module: a Reset with no step
//     since the last keeps the spare it has. Close and Engine.Close stop and
//     wait for a spare in flight.
//   - A context that is done stops a guest, wherever it is, and a running
//     guest never holds up the Go runtime for long. Compiled modules are
//     instrumented (instrument.go): a fuel counter at every function entry
//     and loop iteration sends the guest to Go every 32768 checks, where the
//     garbage collector can stop it (native code cannot be preempted) and
//     where it traps if the host has set its interrupt global, which the
//     host does when the step's context is done. Such a stop is a
//     *modules.EnvError (Cause "timeout"), never a Fault: replay could not
//     reproduce it. A context that cannot be done costs nothing per step.
//   - Output envelopes are decoded strictly (envelope.go): exactly the
//     canonical CBOR schemas.Marshal writes for the decoded value, or a fault
//     saying what is wrong. The input envelope is written without reflection
//     and is byte for byte what schemas.Marshal writes.
//
// An Engine is safe for concurrent use; a Module is not (the kernel's loop
// owns it), but different Modules may step concurrently.
package wasm
