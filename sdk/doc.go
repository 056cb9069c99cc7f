// Package sdk is what a workflow author imports: one typed Go API whose code
// builds both into a WebAssembly module (GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared) and natively into a builtin (modules.Builtin), with
// byte-identical outputs, fault texts included.
//
//	var Module = sdk.NewModule("com.acme/orders")
//
//	func init() { sdk.Workflow(Module, "step", step) }
//
//	func step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) { ... }
//
// A wasm main is `func init() { sdk.Export(orders.Module) }` and an empty
// main; a host registers `orders.Module.Builtin(identity)`. docs/sdk.md is
// the author's guide.
//
// What it owns: decoding a step's state, event and context into the
// author's types; collecting what the step emits (domain events, effects,
// timers, an annotation) into the output envelope; turning a step's error or
// panic, or an input that does not decode, into a business fault; and the
// guest side of the wasm ABI (docs/wasm-abi.md: aos_abi_v1, aos_alloc,
// aos_step), none of which an author sees.
//
// What it must not touch: it is linked into every wasm guest, so it imports
// only the standard library, github.com/fxamacker/cbor/v2, modules (for
// Input, Output, Fault, Builtin), modules/sys (the sys/ shapes its Context,
// ReceiptEnvelope, ReceiptRejected and timer types are defined on, the
// kernel's own) and internal/canon (the CBOR heads the host's side of the
// envelopes reads and writes too) — never schemas,
// kernel or anything that drags them in (TestImportsStayLight). It reads no clock and no randomness
// and starts no goroutine: a guest that does fails its step.
//
// Invariants:
//   - One code path: both targets run Module.step; export_wasip1.go only
//     converts pointers. A fault's text is built in one place, so a native
//     builtin and its wasm build fail with the same reason.
//   - Marshal is the kernel's canonical encoding (schemas.Marshal), byte for
//     byte; the output envelope is written by hand and equals the library's
//     encoding of modules.Output (TestMarshalMatchesSchemas,
//     TestOutputEnvelopeMatchesLibrary).
//   - The envelopes (input, output) and the sdk's own records (context,
//     receipts, timer params and receipts, variants) are decoded and encoded
//     by hand, without reflection: a guest pays for them on every step, and
//     each allocation in a Go wasm guest costs about a microsecond, so the
//     guest also reuses its buffers between steps (never anything it hands
//     an author). The hand decoders accept nothing the library would refuse
//     (FuzzFastDecodersMatchLibrary).
//   - Author types get the library's results, whoever computes them.
//     Workflow compiles a codec plan for S and E once, with reflect, at
//     registration (codec.go): structs of exported, non-embedded fields
//     named by the library's rules (cbor tag, else json tag, else the Go
//     name; "-" skips; omitempty the only option), bool, integers, string,
//     []byte, pointers, slices and map[string]T of those, recursive types
//     included. Anything else (floats, interfaces, arrays, a type with its
//     own encoding such as a Marshaler or Variant, time.Time, RawValue,
//     other tag options, omitempty on a struct, two fields of one name)
//     leaves that type to the library. A plan's decode takes only plain
//     shapes and otherwise gives up, and the step decodes with the library
//     into a zero value, so values and fault texts are the library's; its
//     encode writes encMode.Marshal's bytes (TestCodecDecodeMatchesLibrary,
//     FuzzCodecDecodeMatchesLibrary, FuzzCodecEncodeMatchesLibrary).
//     sdk.Marshal and sdk.Unmarshal themselves always use the library.
//   - Decoding is lenient about what the kernel validated (unknown fields are
//     ignored, keys in any order) and strict about garbage: a value that is
//     not one well-formed item of the right shape fails the step with a fault
//     naming the state or the event.
package sdk
