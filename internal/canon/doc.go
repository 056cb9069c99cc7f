// Package canon is the one home of low-level canonical CBOR (RFC 8949 core
// deterministic encoding): the major-type constants, appenders that write
// heads, integers, text, byte strings and simple values in their shortest
// form, and a reader of heads (Head, Why, HeadLen) with Skip, which steps
// over a whole item.
//
// The hand-written codecs of hot records use it: journal frames, cell index
// nodes, routing's key lookup, the schema fast path, the wasm step
// envelopes (host side in modules/wasm, guest side in sdk). Each keeps its
// own record layout and its own error texts (they reach faults and the
// journal); what they share is how one head is read and written.
//
// Must not touch: anything beyond the standard library. sdk imports this
// package and is linked into every wasm guest, so it stays small and
// dependency-free (sdk's TestImportsStayLight pins that).
//
// Invariants:
//   - Every appender writes exactly the bytes fxamacker/cbor's core
//     deterministic encoder writes for the same value (canon_test holds it).
//   - Head and Skip never panic and never allocate; Head agrees with the
//     library on every head it accepts, and refuses (ok false) only what
//     the library cannot read as a definite-length head.
//   - The appenders of heads inline; Head is one call with no interface or
//     closure, so a per-item loop pays what it paid for its own copy.
package canon
