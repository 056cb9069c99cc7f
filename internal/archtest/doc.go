// Package archtest holds the test that keeps docs/ARCHITECTURE.md true: the
// layers it draws are the import graph `go list` reports, and the kernel
// names no storage engine and renders no JSON.
//
// It owns no code and must not be imported.
package archtest
