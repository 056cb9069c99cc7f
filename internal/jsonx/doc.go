// Package jsonx is the one strict JSON parser: it reads a JSON text into the
// values encoding/json builds with UseNumber (map[string]any, []any non-nil
// when empty, json.Number, string, bool, nil), in one pass over the bytes.
// schemas.DecodeJSON (events, receipts, schema documents; the ingress hot
// path) and manifest's loader (manifest files) are its two callers; each
// passes Options for its limits and number rules and words the errors its
// users see.
//
// Scanner (scan.go) reads a JSON text under the same grammar without
// building it: a caller walks an envelope it knows and takes a payload's
// raw bytes to hand on, so the payload is parsed once, by its consumer
// (POST /v1/events reads its body this way; the kernel parses each value).
//
// Strict means: UTF-8 only, the JSON grammar exactly as encoding/json reads
// it, strings unescaped exactly as encoding/json does, nothing after the
// value, no lone UTF-16 surrogate escapes and no duplicate object keys.
// encoding/json accepts both: duplicate keys (last one wins) would let two
// spellings of one object hash apart, and a lone or mismatched surrogate
// escape ("\ud800") becomes U+FFFD, so it would be the same string, key and
// hash as "\ufffd". A surrogate escape must be a high one followed at once
// by a low one; anything else is refused (Kind LoneSurrogate) at the escape. By default the first
// duplicate stops the parse; with Options.CollectDuplicates every one is
// reported and the first value is kept, so a loader can show every mistake
// at once.
//
// Must not touch: anything beyond the standard library. It knows nothing of
// schemas, CBOR or manifests; number ranges are the caller's (Options.Number).
//
// Invariants:
//   - It accepts exactly what encoding/json's decoder accepts, minus
//     duplicate keys, lone surrogate escapes and what Options bound, with
//     the same values
//     (differential tests and fuzz targets in schemas and manifest hold it
//     to encoding/json's token walk).
//   - An *Error names the byte offset where the problem is (the offending
//     character, the start of a refused number or key, the end of input),
//     the pointer tokens of the member being parsed, and, in Msg, what is
//     wrong in encoding/json's words for syntax errors.
//   - Strings without escapes and number literals share one copy of the
//     input, so a value keeps at most that copy alive. The default options
//     add no work per byte; option checks are per value or per member.
package jsonx
