// Command aosd is the aos daemon and command line: it creates worlds,
// applies manifests, sends events, serves the HTTP API with the built-in
// executors, and shows cells, journals and traces. docs/CLI.md is the
// reference; docs/API.md documents the HTTP API it serves and uses.
package main
