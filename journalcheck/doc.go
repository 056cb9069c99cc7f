// Package journalcheck checks a journal's invariants: the rules every
// journal the kernel writes keeps, read from the journal alone.
//
// It is the product's `aosd journal check` (docs/journal-check.md lists
// every rule with what it means). It reads records in order once and keeps
// a model of what the kernel's loop keeps of them — which instance has
// which deliveries waiting or parked, which intents are pending and who
// opened them, which instances are failed by which fault, which workflows a
// module set aside holds — and reports each record that
// could not have been written by a kernel that keeps its contract: a seq
// gap, a step that consumes what was not next in its mailbox, a receipt
// for an intent that is not pending, a manifest applied while work was in
// flight, and so on. Each violation names the record's seq, a stable rule
// id, the workflow and key concerned and one sentence.
//
// # What it owns
//
//   - Check, its Journal port (First, Read and the kind index's Marks:
//     kernel.Log, the backends' journals and journal.Memory all serve it)
//     and Options.
//   - The rule ids (rules.go) and the model (checker.go).
//   - Where a cut journal's check starts (start.go): after the checkpoint
//     of its oldest usable snapshot, from the snapshot's state. Finding and
//     checking that snapshot is snapshot.Find's, as for the kernel's open.
//
// # What it must not do
//
// Re-run workflows: replay does that, and needs the modules, the cells and
// the manifest's code; this package reads no CAS object but snapshots and
// judges no state hash. It must not import the kernel (it reads the
// records the kernel writes, through package records) or a storage engine,
// and must not change the journal it reads.
//
// # Invariants it keeps
//
//   - Memory is bounded by the live part of the world, never by the
//     journal: instances with deliveries, parked deliveries, pending
//     intents or a failure,
//     pending intents, the step whose output is being read, and the last
//     Options.RememberSettled settled intents.
//   - The report is a function of the journal: violations are ordered by
//     seq and rule, and nothing depends on map order or timing.
//   - A rule never fires on a journal the kernel wrote: the CLI's
//     end-to-end tests, the examples' tests (the world an older build
//     wrote, kept in examples/testdata, included) and the daemon's tests
//     check every world they create, the kernel's tests every world their
//     harness creates; kernel/journalcheck_test.go corrupts a real journal
//     once per rule.
package journalcheck
