// Package workflows implements, as Go builtin step functions, the workflow
// modules that the example manifests in examples/manifests name:
//
//	examples/counter          counter/        per-key running total
//	examples/orders           orders/         order lifecycle with a payment effect and an expiry timer
//	examples/notes            notes/          variant-keyed notes (create, edit, archive)
//	examples/reminders        reminders/      a timer effect per reminder
//	examples/choreo.orders    choreography/   emits OrderPaid when an order is placed
//	examples/choreo.shipping  choreography/   ships paid orders, emits Shipped
//	examples/choreo.audit     choreography/   unkeyed tally of payments and shipments
//
// Register adds them all to a modules.Builtins; aosd registers them at
// startup. Every step function is deterministic: it reads only its input
// (state, event, context) and never the clock, randomness or I/O. Effects are
// only asked for; whether and when a receipt comes back is the kernel's and
// the executors' business.
//
// This package must not import the kernel: it depends on modules and schemas
// only, like any workflow author's code would.
package workflows
