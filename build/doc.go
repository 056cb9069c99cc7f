// Package build compiles a manifest's wasm workflow modules from their Go
// sources and pins each artifact's hash in the manifest: what `aosd build`
// runs, and what the demo, the tests and embedders call.
//
// A wasm defmodule may name its Go package in "source" (a directory relative
// to the JSON file that declares the def). Build runs `go build` on it with
// GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 and
// `-buildmode=c-shared -trimpath -buildvcs=false`, writes the module to the
// def's "artifact" (relative to the same file), and rewrites the def's
// "hash" to the artifact's sha256.
//
// Why it parses the JSON itself: manifest.Load refuses a def whose artifact
// does not match its hash, which is exactly the state a manifest is in before
// a build (a placeholder, or a hash gone stale with the code). So Build finds
// the defmodules with its own scan, which keeps byte offsets, and edits only
// the hash string of each def it built: the file's layout, spacing and key
// order stay as the author wrote them. Afterwards it loads the
// result with manifest.Load, which must now succeed.
//
// Why those flags: a c-shared wasip1 build is a WASI reactor (docs/wasm-abi.md);
// -trimpath keeps the build directory out of the binary and -buildvcs=false
// keeps the commit out, so the same source, dependencies and toolchain give
// the same bytes, hence the same hash, on every machine and at every commit.
//
// Invariants:
//   - A file is rewritten only when a hash in it changes, atomically (temp
//     file and rename), and only inside the hash string (or, when a def has
//     no "hash" yet, by inserting one right after its "artifact").
//   - An artifact is replaced atomically too: a failed build leaves the old
//     one in place.
//   - Defs that share a source build once.
//
// The package runs the Go toolchain and touches files; it must not open a
// world or import the kernel.
package build
