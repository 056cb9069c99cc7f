// Package walk is the one recursive walk over JSON-model values: trees of
// map[string]any and []any with anything else at the leaves, as
// encoding/json, schemas.DecodeJSON and schemas.Decode build them. Checks
// and conversions of such trees (schemas: checking Go values, converting
// numbers, the JSON model of decoded CBOR, display values; manifest: JSON
// <-> CBOR values, "$ref" scans) are each one Visit function handed to Map.
//
// Must not touch: anything beyond the standard library; it knows nothing of
// schemas or CBOR. Each caller keeps its own leaf rules and error texts.
//
// Invariants:
//   - Map never modifies its input, and copies a map or slice only when
//     something below it changed, so an unchanged tree costs no allocation
//     and comes back as is.
//   - Visit sees every value, parents before children, with the pointer
//     tokens that lead to it (array indexes in decimal).
//   - With sorted, members of a map are visited in key order, so a walk that
//     stops at the first problem names the same problem on every run
//     (messages reach the journal through faults and rejected receipts).
package walk
