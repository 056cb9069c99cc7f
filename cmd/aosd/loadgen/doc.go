// Package loadgen is `aosd bench`: a closed-loop load generator that drives
// a running world through its public HTTP API only (POST /v1/events, GET
// /v1/quiescent, GET /v1/cells/..., GET /v1/failed, GET /metrics), measures
// what a client sees, and verifies the world's final state before it calls
// the run a figure.
//
// What it knows of the daemon is the documented wire format (docs/API.md),
// so a figure it gives is one any client in any language could reproduce;
// of this module it imports only receipts and schemas, to sign the effect
// mix's receipts as any external executor does (docs/executor-protocol.md).
//
// Events go out on one keep-alive connection per worker (wire.go), the
// request written and the answer read on the worker's goroutine; or, with
// Config.Client ClientStd, through net/http's Client as an ordinary Go
// program sends them (std.go). The other requests use an http.Client.
//
// Invariants:
//
//   - Closed loop: exactly Concurrency requests are in flight while work
//     remains; a worker sends its next request only once its previous one
//     was answered. Every request must be answered 200 with one seq per
//     event; any other answer stops the run and fails it.
//   - Warm-up is sent and verified like the rest but measured by nothing:
//     the clock, the CPU counters and the metrics are read after the last
//     warm-up answer and before the first measured request.
//   - A run verifies or fails: every seq answered is distinct; the world is
//     waited on until quiescent; no instance is failed; and for the keyed
//     counter every key's cell holds exactly the count of events sent to
//     it. A mismatch names the key, the count found and the count sent.
//     With the effect mix, every charge is settled by a receipt the world
//     accepted and every order ends paid (the orders' 15-minute timers keep
//     the world from quiescence, so that is read, not waited for).
//   - Latencies are exact: every request's latency is recorded and the
//     percentiles are read from the sorted list (nearest rank), no
//     bucketing.
package loadgen
