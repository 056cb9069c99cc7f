// Command aosd is the aos daemon and command line: it creates worlds,
// applies manifests, sends events, serves the HTTP API with the built-in
// executors, and shows cells, journals and traces. docs/CLI.md is the
// reference; docs/API.md documents the HTTP API it serves and uses.
//
// The command is thin: each command lives in its own file (init.go,
// apply.go, send.go, serve.go, ...) and parses flags, reaches the world
// through package host (host.Connect gives an api.Backend; host.Run is
// serve) and renders the answer as a table or,
// with --json, as the API's JSON. It is the one place that reads the
// environment (AOS_WORLD, AOS_LOG_LEVEL, AOS_WASM_CACHE, AOS_CELL_CACHE_SIZE,
// GOROOT for build) and passes what it read down as configuration.
package main
