// Package host is a world this process runs: the world directory (Dir:
// store, token, executor key, executors.json, daemon.json, wasm-cache),
// creating one (Init, InitPostgres), choosing and opening its store
// (store.go: Badger, or PostgreSQL through pgdb for a directory holding
// postgres.json, pgworld.go: the lease, its renewal, stepping down), the
// world's files (token, executor key, trusted keys: the directory's or the
// database's, behind one seam, files), and the wiring
// of a running world (Host: the store, the kernel, the wasm cache, the
// built-in executors and their dispatcher, and the HTTP API of package api
// over them). Open builds a Host and Run is `aosd serve` (Open, wait for
// ctx, Close); package aos (the repository root) embeds the same Host, so
// a daemon and an embedded world are wired once, here.
//
// A world on PostgreSQL is served by nodes (cluster.go, cluster_run.go:
// RunNode is `aosd serve` on such a world): each listens for its whole
// life, owns the world while it holds the lease (a Host opened without a
// listener of its own, its API behind the node's), and is otherwise a
// standby whose requests are forwarded to the owner (cluster_forward.go).
// A standby opens the world when the lease is free or its own; an owner
// that lost the lease, or whose world stopped on a storage failure, closes
// it and becomes a standby.
//
// It also reaches a world from outside (Connect: through the daemon that
// serves it, or by opening its store when none does), and does what needs
// the world's store or directory rather than its API: backups and restores
// (backup.go: one read of the store plus the directory's files), the
// journal check of a world no daemon serves (CheckJournal: the store alone,
// never the world, whose open replays a journal a broken journal may not
// survive), the bearer token's file and its rotation (token.go; the set of
// tokens the API accepts is api.TokenSet), and the trusted-keys file
// (keyring.go).
//
// Invariants:
//   - It is the one package that names the storage engine (store.go): the
//     kernel opens on the store's two ports, and the built-in executors
//     share its CAS through one cas.Guard, so a collection beside the world
//     spares what they write.
//   - A world on PostgreSQL has one owner: the node holding its lease, which
//     serve and writing commands take (claimWorld) and reads never do; an
//     owner that learns another took it (a fenced append, a refused
//     renewal) fails its journal and writes nothing more, and a node then
//     serves as a standby.
//   - A standby answers nothing for the world itself: it forwards (reads
//     too), and never forwards a request that was forwarded to it.
//   - Two processes never open one Badger directory: Connect uses the daemon
//     when daemon.json names a live process that answers, and a direct open
//     of a world held by another process fails with badgerdb.ErrLocked,
//     which Connect turns into a message that names the daemon.
//   - daemon.json names this process only while its HTTP API is served, and
//     Close removes it only if it still names this process.
//   - Configuration is passed in (Options, kernel.Config): the package reads
//     no environment variables; aosd reads them at the edge.
//
// The package must not reach into kernel internals: it uses the kernel's
// public API only.
package host
