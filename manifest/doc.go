// Package manifest loads, validates and hashes a world's manifest: the JSON
// defs that declare its schemas, workflow modules, workflows, effects and
// routing (DESIGN.md §3–§4; the reference is docs/manifest.md).
//
// It owns:
//   - strict decoding of manifest files: unknown fields, duplicate keys, wrong
//     types, invalid UTF-8 and trailing data are all problems;
//   - resolving every name a def refers to (user defs and the built-in sys/
//     schemas and effects) and enforcing the cross-def rules: key_field exactly
//     for keyed workflows, subscriptions deliverable to their workflow (same
//     event schema or an arm of its variant), key_field paths that exist,
//     declared effects, wasm artifacts present with the declared hash, sane
//     retry policies;
//   - the built-in effect defs (SysEffects);
//   - def hashes, the manifest hash, and Source, the canonical form the kernel
//     journals so a world can be rebuilt without its files (FromSource);
//   - Diff between two manifests, for apply.
//
// It must not touch: the journal, the CAS, cells or any running world. Loading
// is a pure function of the files (and, for FromSource, of the artifact bytes
// the caller hands in). It compiles schemas only through schemas.Registry and
// does not interpret event values: routing and the kernel do that.
//
// Invariants:
//   - A load reports every problem it can find, never just the first. Each
//     Problem names the file, the def and a JSON pointer into the file, so a
//     user can fix a manifest without a debugger. One mistake gives one
//     problem: follow-on errors (a reference to a def that is itself broken, a
//     missing manifest def in a file that did not parse) are suppressed.
//   - A def's hash is SHA-256 of the canonical CBOR of the def as declared:
//     key order, whitespace, file layout and number spelling (1, 1.0, 1e0) do
//     not change it. A wasm module's def carries its artifact's hash, so the
//     def hash covers the code.
//   - The manifest hash covers the name, the routing table (in order) and the
//     hash of every def: all user defs, the sys/ effects workflows emit and
//     the sys/ schemas the manifest refers to. Two worlds with the same hash
//     run the same code on the same schemas.
//   - FromSource(m.Source) rebuilds a Manifest equal to m, with the same Hash;
//     it runs every check Load runs, so a corrupt journal entry is refused.
//   - Nothing depends on declaration order except the routing table: variant
//     arms are kept in tag order because the canonical form does not record
//     the order they were written in.
//   - No global mutable state: SysEffects returns fresh copies.
package manifest
