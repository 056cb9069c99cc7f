// Package archtest holds the test that keeps docs/ARCHITECTURE.md true: the
// layers it draws are the import graph `go list` reports, the kernel names
// no storage engine and no wasm engine and renders no JSON, and nothing in
// internal/ imports a package of this module outside it.
//
// It owns no code and must not be imported.
package archtest
