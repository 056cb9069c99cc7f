// Package sys is the one home of the sys/ wire shapes a workflow step meets:
// the values the kernel hands a step (sys/WorkflowContext@1, and the
// deliveries sys/EffectReceiptEnvelope@1, sys/EffectReceiptRejected@1,
// sys/EffectCancelled@1 and sys/EffectStreamFrame@1), the built-in effects' params and receipts a step
// emits or reads (sys/timer.set@1's, sys/blob.put@1's receipt), and their
// names. Each is a Go struct whose cbor tags give the canonical encoding:
// what schemas.Marshal writes for it is the value's bytes.
//
// Both sides use these types: the host (the kernel builds, encodes and
// validates them) and the guest (the sdk decodes them, its public types
// being defined on them), so the two can never disagree on a field. Each
// side keeps its own hand-written codec for the hot ones, beside the code
// that runs it (kernel/encode.go writes the context and the envelope, the
// sdk's decodeFields reads them), and their tests hold both to the
// library's encoding of these types.
//
// What it must not touch: anything at all. It is linked into every wasm
// guest through the sdk, so it imports nothing, not even the standard
// library (the sdk's TestImportsStayLight and the examples' wasm test
// pin what a guest links). It holds no logic, only shapes and names; their
// JSON Schemas are schemas/sys.go's, which TestShapesMatchSchemas holds to
// these fields.
package sys
