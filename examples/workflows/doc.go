// Package workflows gathers the example workflow modules that the manifests
// in examples/manifests name, each written once against sdk/ in a package of
// its own, and each built both natively (a builtin) and into wasm
// (<name>/wasm, a GOOS=wasip1 main):
//
//	examples/counter        counter/        per-key running total
//	examples/orders         orders/         order lifecycle with a payment effect and an expiry timer
//	examples/notes          notes/          variant-keyed notes (create, edit, archive)
//	examples/reminders      reminders/      a timer effect per reminder
//	examples/choreography   choreography/   entrypoints orders, shipping, audit, talking through domain events
//
// Register adds them all to a modules.Builtins, for tests and benchmarks
// that link them natively; aosd links none of them and runs their wasm
// builds, as any user's workflow. examples/manifests/EXAMPLES.md says what
// each must do. Every step is deterministic: it reads only its input (state,
// event, context) and never the clock, randomness or I/O. Effects are only
// asked for; whether and when a receipt comes back is the kernel's and the
// executors' business.
//
// This package and its children must not import the kernel or schemas: they
// depend on sdk (and modules, for registration) only, like any workflow
// author's code. Tests here pin that the native builtins and the wasm builds
// give byte-identical outputs.
package workflows
