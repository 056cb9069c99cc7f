// Package schemas owns what a value is in aos: JSON Schema compilation and
// validation (santhosh-tekuri/jsonschema/v5), the canonical CBOR encoding
// (fxamacker/cbor/v2, RFC 8949 core deterministic encoding), value hashing,
// and the built-in sys/ schemas every world shares.
//
// A value is JSON on the outside and canonical CBOR inside. Everything the
// kernel journals, hashes or hands to a workflow passes through here, so the
// package exists to make one promise: the same logical value always becomes
// the same bytes, and bytes that are not the canonical form of some value are
// refused. Concretely:
//
//   - Map keys are sorted by their encoded bytes; integers and floats take
//     their shortest form; lengths are definite; there are no tags and no
//     simple values other than false, true and null.
//   - Every integral JSON number (1, 1.0, 1e0, -0) is a CBOR integer when it
//     fits the CBOR integer range [-2^64, 2^64-1]. Other numbers are rounded to
//     the nearest float64, and an integral result inside that range is again
//     an integer; so a CBOR float this package writes is always non-integral or
//     outside integer range, and ToJSON followed by FromJSON gives the same
//     bytes. Numbers beyond float64 range (or closer to zero than 1e-320)
//     are refused, as are number literals longer than 400 characters.
//   - A string is a CBOR byte string exactly when the schema location it sits
//     at says "contentEncoding": "base64" (standard alphabet, padded, strict:
//     every byte string has one text form). The location is found by walking
//     the compiled schema alongside the value: properties, patternProperties,
//     additionalProperties, items/prefixItems, $ref, allOf, if/then/else,
//     dependentSchemas, and the anyOf/oneOf branches the value validates against.
//   - Input JSON is strict: UTF-8, no duplicate object keys (encoding/json
//     would keep the last one silently), nothing after the value, at most 64
//     levels of nesting and 2^20 members per container, the same limits the
//     CBOR decoder enforces, so every value written can be read back.
//   - Decoding CBOR is strict: the decoder refuses duplicate keys, indefinite
//     lengths, tags and trailing bytes, and because the library accepts
//     non-canonical forms, Decode re-encodes and compares. Validate further
//     refuses CBOR that FromJSON could not have produced (integral or
//     non-finite floats, non-text map keys, byte strings where the schema has
//     text and the other way round).
//
// Schemas come only from memory. A def's "$ref" names another def
// ("com.acme/OrderId@1", optionally with a "#/..." fragment) or is local
// ("#/$defs/x"); names are rewritten to internal "aos:///schema/<name>" URLs
// before compiling, and the compiler's loader refuses every URL, so no schema
// is ever read from a file or the network. "$id" is refused (a schema is
// identified by its def name) and so is any contentEncoding but base64.
// Formats are asserted. Variant defs compile to a closed object
// {"$tag": <arm tag>, "$value": <value of that arm's schema>}.
//
// Validate has two paths. The general one decodes, re-encodes to check
// canonical form, builds the JSON-model view and runs the validator; it
// gives every refusal and every error message. For a def that uses only a
// common subset of keywords (see fastpath.go), Define also builds a plan
// that walks the canonical CBOR bytes once, checking canonical form and the
// schema together without allocating. A plan answers only "valid" or
// "unsure", and unsure (every invalid value, and anything rare: floats,
// tags, deep nesting) falls through to the general path. The invariant:
// the plan never calls valid what the general path refuses.
//
// A Registry is an immutable snapshot behind an atomic pointer: Define
// compiles a whole batch (defs may reference each other in any order), either
// publishes all of it or, reporting every problem as DefErrors with JSON
// pointers into the defs, none of it. Reads never lock and are safe from any
// number of goroutines.
//
// What this package must not touch: it does no I/O, keeps no clock, and knows
// nothing about manifests, workflows, the journal or the CAS. It imports no
// other aos package but two internal helpers, internal/canon (the CBOR heads
// the fast path reads) and internal/walk (the
// walk over JSON-model values that checkJSONValue, plain, toJSONModel and
// displayValue are visitors of); everything else imports it. Manifest loading, def
// hashing and name resolution across kinds belong to manifest/; schemas only
// exports what they need (CheckName, IsSysName, SysSchemaJSON).
package schemas
