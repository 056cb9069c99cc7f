// Package api is aos's HTTP API and everything that speaks it: the server
// (Server: the route table, bearer-token auth, the strict reading of every
// request body, error shapes, Prometheus metrics, the executor protocol,
// token rotation's route), its client (Client), and Backend, the one
// interface both sides of a command go through: Local implements it over a
// *kernel.World this process has open, Client over HTTP, with the same
// results. The JSON shapes of the API and the CLI are defined once, here:
// the kernel answers with plain, untagged structs holding canonical CBOR,
// and shapes.go renders them (status, cells, failed instances, modules,
// results of an apply, a recover, a limits change, a receipt, a snapshot,
// a replay, a shadow run).
//
// Every handler goes through one helper (handle.go): read the body (size
// limit, 415 unless JSON, 408 when it comes too slowly), decode it with
// the one strict reader (views.Decode), call, and answer the result as JSON
// or the error as its status and JSON error body. What only reads the
// journal (the export, traces, timelines, the journal check) is package
// views; this package words its answers for HTTP and pages through it.
//
// The world directory (the token file, executors.json, daemon.json), the
// store, and the wiring of a running world are package host's, which
// builds a Server over a Local; this package reads no file of the world
// directory but the keys file it is handed (Keys).
//
// Invariants:
//   - Every refusal is an *Error with an HTTP status, a stable code, a
//     message and a where; nothing invalid reaches the journal (the kernel
//     validates before it journals).
//   - Event input is checked once, by the kernel: the server only checks the
//     request's shape (JSON, idempotency key given as "") and maps the
//     kernel's *kernel.InputError to its answer.
//   - Every request body is read by one strict reader (views.Decode, on
//     internal/jsonx): declared JSON or undeclared (415 otherwise), one
//     value and nothing after it, no duplicate key, no lone surrogate,
//     exact keys where the body has a Go struct's shape; a body must arrive
//     within Server.BodyTimeout (408), and HTTPLimits bound what one client
//     may hold.
//   - The route table (routes) is the API: the mux is built from it alone,
//     and docs/openapi.json and docs/API.md's answer tables are held to it
//     (openapi_test.go, answers_test.go).
//   - A claim leases intents only to an executor with a key trusted for
//     every effect it names (Executors.Keyring); a manifest sent as files
//     takes its wasm artifacts from the request or the world's store, never
//     from the server's disk.
//   - Configuration is passed in (Server's fields, kernel.Config): the
//     package reads no environment variables.
//
// The package must not reach into kernel internals: it uses the kernel's
// public API only, and names no storage engine.
package api
