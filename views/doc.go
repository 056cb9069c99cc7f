// Package views is what aos shows of a world's journal: its lossless JSON
// export (Describe, ParseRecord; export.go), the re-verification of its
// signed records and intent hashes (JournalVerifier; verify.go), trace
// entries (trace.go), a cell's paged timeline with the state each step
// left and the JSON Patch from the one before (Timelines; timeline.go), the
// journal check's report (CheckJournal; check.go), the JSON form of the
// limits that records carry (limits.go), and the one strict reader of JSON
// into a Go shape (strict.go), which reads the export back and, for
// package api, every request body.
//
// A view only reads: the journal, decoded with package records; the CAS
// by hash; for a timeline, the cell as the world holds it now and a replay
// in a scratch world (kernel.CellHistory), which never writes the world's
// stores. It answers with plain values and plain errors: package api words
// them for the HTTP API (status, code, where), and the CLI reads an export
// file with the same functions the daemon serves it with, so `aosd journal
// verify --file` checks an export exactly as it checks a live journal.
//
// Must not touch: HTTP (package api serves the views), a storage engine
// (views read through the kernel's ports: kernel.Log, cas.Store), the world
// directory, and the kernel's internals (its public API only).
//
// Invariants:
//   - The export is lossless: ParseRecord(Describe(r)) gives r's body byte
//     for byte, for every kind journal.Kinds lists (TestExportLossless), and
//     ParseRecord refuses what Describe would not write: a duplicate or
//     unknown key, a readable value that disagrees with its _cbor bytes.
//   - Verification reads each record as the export gives it back
//     (ParseRecord), so a world's journal and an export file are checked
//     alike; what it can and cannot prove is said in verify.go.
//   - A timeline's state for a step is the one the step record's hash
//     names: read from the CAS or the live cell by that hash, or recomputed
//     by replay and kept only when it hashes to it; otherwise the entry says
//     why it has none. Paging keeps at most intentsSeenCells cells' intents.
//   - Decode holds a fixed shape's keys exactly (case included) after jsonx
//     refused duplicates, lone surrogates and trailing data, so a text is
//     refused for the same reason in the same words wherever it is read.
package views
