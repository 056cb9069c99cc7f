// Package storefault wraps the storage ports for tests, the way pebble's
// errorfs wraps a filesystem: a CAS (any cas.Store) and a journal (the
// kernel's journal port) whose operations fail when an Injector says so,
// with hooks a crash test stops or kills its process in: before each CAS
// write (a snapshot's cells half written, a collection's sweep half done),
// before each CAS read (a collection marking), and before and after each
// journal Append (between a step and its flush; right after a record is
// durable).
//
// Test-only behaviour lives here, at the port, instead of in production
// configuration: kernel.Config has no hooks.
//
// # Invariants
//
//   - A failed operation never reaches the wrapped store: an injected
//     failure of a write writes nothing, so what a test then finds on disk
//     is what the store acknowledged before it.
//   - An Injector fails at most once, and counts only the operations its
//     predicate accepts, so a clean run's count tells a test where the
//     failure points of a faulty run can fall.
//
// It wraps the ports as the kernel defines them (cas.Store, and kernel.Log,
// whose methods it declares again as Log rather than import the kernel: a
// test rig sits beside the ports, above cas and journal and below the
// kernel) and must not import a storage engine: it is handed the stores it
// wraps. The kernel's own package must not import it (only its external
// tests do, and they hold Log and Dropper to kernel.Log and kernel.Dropper).
package storefault
