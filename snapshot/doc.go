// Package snapshot owns what a snapshot is: the State object that captures
// everything a world's loop derives from its journal at one height, its
// canonical encoding, the checks a decoded one must pass, the comparison
// that names the first difference between two of them, and what a snapshot
// keeps reachable in the CAS (Pins) for garbage collection.
//
// It finds and loads them (load.go): Find walks the journal's kind index for
// the newest (the kernel's open) or oldest (the journal check) usable
// snapshot, and Load checks one against its record and checkpoint, so both
// readers take the same snapshots for the same reasons. It does not take or
// restore snapshots: the kernel does, because only the loop knows when the
// world is idle and how its tables are built. Nor does it know the storage
// engine: it reads and marks through cas.Store and a journal's Read and
// Marks.
//
// # The object
//
// A State is one canonical CBOR map (schemas.Marshal, core deterministic
// encoding) stored in the CAS; a snapshot record in the journal names it by
// hash (records.SnapshotRec). Every list in it is sorted by a documented key
// (or kept in the order the world evicts from, for the two FIFO tables), so
// the same world state gives the same bytes whatever order the loop's maps
// iterate in: two snapshots of one state are byte-identical, and replay from
// genesis reproduces the hash a live world journaled.
//
// What it holds, per DESIGN.md §9: the height (the seq of the checkpoint
// record it captures the state after), the logical clock, the manifest (its
// hash, and the CAS object holding its Source), the limits, per workflow the
// CellIndex root and cell count (and, unkeyed, the one state's hash), the
// instance table (every instance not at rest: failed ones with their fault
// and the input kept for a retry, waiting ones, parked ones held by a module
// set aside; each with the events parked for it), the intents in flight with
// their origins and stream-frame counters, the receipt fence (recently
// settled intents), the ingress idempotency table, the state-schema epochs,
// and the modules set aside. Mailboxes are empty at a checkpoint (the world
// is idle), so no delivery other than a failed instance's kept input and
// parked events appears. The parked lists and the modules set aside are
// omitted when empty, so a state without them has the bytes it had before
// they existed.
package snapshot
