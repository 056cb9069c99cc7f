// Package daemon is what aosd runs on top of the kernel: the world directory
// layout (store, token, executor key, daemon.json, wasm-cache), the HTTP API
// server, its Prometheus metrics, and a client for that API. Package aos (the
// repository root) wires these to a kernel for `aosd serve` and embedders.
//
// Both the server and the CLI go through Backend. Local implements it over an
// open *kernel.World; Client implements it over HTTP. The server's handlers
// call a Local, so a command gives the same answer whether or not a daemon is
// running: the JSON shapes are defined once, here.
//
// Invariants:
//   - Two processes never open one Badger directory: Connect uses the daemon
//     when daemon.json names a live process that answers, and a direct open of
//     a world held by another process fails with badgerdb.ErrLocked, which Connect
//     turns into a message that names the daemon.
//   - Every refusal is an *Error with an HTTP status, a stable code, a message
//     and a where; nothing invalid reaches the journal (the kernel validates
//     before it journals).
//
// The package must not reach into kernel internals: it uses the kernel's
// public API only.
package daemon
