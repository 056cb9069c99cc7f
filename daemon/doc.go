// Package daemon is what aosd runs on top of the kernel: the world directory
// layout (store, token, executor key, daemon.json, wasm-cache), the wiring
// of a running world (Host: the store, the kernel, the built-in executors and
// their dispatcher, the HTTP API), the HTTP API server, its Prometheus
// metrics, and a client for that API.
//
// Open builds a Host and Run is `aosd serve` (Open, wait for ctx, Close);
// package aos (the repository root) embeds the same Host, so a daemon and an
// embedded world are wired once, here. The storage engine is named in one
// place (store.go): the Host opens the store there and hands the kernel and
// the built-in executors what they need from it. So is the wasm engine,
// which the kernel is handed too: store.go makes it (compiled code in
// StoreOptions.WasmCacheDir, the world's wasm-cache by default) unless the
// configuration names one, and closes it with the store.
//
// Both the server and the CLI go through Backend. Local implements it over an
// open *kernel.World; Client implements it over HTTP. The server's handlers
// call a Local, so a command gives the same answer whether or not a daemon is
// running: the JSON shapes are defined once, here. Every handler goes through
// one helper (handle.go): decode the body (size limit, strict JSON), call,
// write the answer or map the error to a status and a JSON error body.
// The kernel answers with
// plain, untagged structs holding canonical CBOR; shapes.go defines their
// JSON views (status, limits, the results of a limits change, a recover, a
// receipt and a snapshot, a replay report, cells, failed instances) and
// converts to them. Snapshots and replay verification (snapshot.go) run
// beside the world: replay in scratch worlds over its stores
// (kernel.ScratchStores), which never write them. What only reads
// the journal, trace and the journal listing, reads the world's journal
// (kernel.World.Journal) with package records and renders it here
// (trace.go, export.go). The journal listing is the journal's lossless
// export: Describe writes every field of a record and ParseRecord reads a
// line back to the journaled bytes, so JournalVerifier (journalverify.go,
// `aosd journal verify`) re-checks signatures and intent hashes from a
// world's journal and from an export file alike. The journal check
// (journalcheck.go) reads the journal with package journalcheck;
// CheckJournal runs it on a world no daemon serves by opening the store
// alone, never the world, whose open replays the journal a broken journal
// may not survive. ParseLimits is the JSON side of limits. Backup and
// Restore (backup.go) copy a world, serving or not, from one read of its
// store plus its own files; TokenSet (token.go) is the bearer tokens the API
// accepts, which `aosd token rotate` and SIGHUP change while it serves.
//
// Invariants:
//   - Two processes never open one Badger directory: Connect uses the daemon
//     when daemon.json names a live process that answers, and a direct open of
//     a world held by another process fails with badgerdb.ErrLocked, which Connect
//     turns into a message that names the daemon.
//   - Every refusal is an *Error with an HTTP status, a stable code, a message
//     and a where; nothing invalid reaches the journal (the kernel validates
//     before it journals).
//   - Event input is checked once, by the kernel: the server only checks the
//     request's shape (JSON, idempotency key given as "") and maps the
//     kernel's *kernel.InputError to its answer.
//   - Every request body is read by one strict reader (strict.go, on
//     internal/jsonx): declared JSON or undeclared (415 otherwise), one
//     value and nothing after it, no duplicate key, no lone surrogate,
//     exact keys where the body has a Go struct's shape; a body must arrive
//     within Server.BodyTimeout (408), and the Host's http.Server bounds
//     headers and idle connections (HTTPLimits).
//   - A claim leases intents only to an executor with a key trusted for
//     every effect it names (Executors.Keyring); a manifest sent as files
//     takes its wasm artifacts from the request or the world's store, never
//     from the server's disk.
//   - The journal's export is lossless: ParseRecord(Describe(r)) gives r's
//     body byte for byte, for every kind journal.Kinds lists
//     (TestExportLossless).
//   - Configuration is passed in (Options, kernel.Config): the package reads
//     no environment variables; aosd reads them at the edge.
//
// The package must not reach into kernel internals: it uses the kernel's
// public API only.
package daemon
