// Package built gives tests the example worlds of examples/manifests
// built: a copy of every example, each wasm module compiled from its source
// in examples/workflows and its hash pinned, made once per test binary. Tests
// apply from the copy, so they never write into the repository, and they see
// the modules the current source builds, whatever hash the checked-in
// manifests pin.
//
// It also warms a compiled-code cache for those modules (WasmCache): wazero
// compiling a Go-built module takes 15-40 s inside a -race binary and about
// one second outside it, and its cache is keyed by the module's bytes, the
// CPU and wazero's version, not by how the compiler was built. So the
// modules are compiled by plain (non-race) aosd binaries into one cache
// shared by every test binary and kept between runs, under the version
// aosd's wazero names and under the one a test binary's names (they differ:
// see warm), and every world a test opens with that cache (or
// AOS_WASM_CACHE) starts warm.
package built
