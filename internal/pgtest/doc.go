// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb into
// a temporary directory, a postmaster listening on a free loopback port only
// (no Unix socket), trust authentication for the "postgres" superuser, and
// a stop (fast shutdown) when the test or the test binary ends.
//
// # What it owns
//
//   - Finding the server binaries: $AOS_PG_BIN, then initdb on PATH, then
//     the newest /usr/lib/postgresql/<version>/bin (where Debian's
//     postgresql-15 puts them).
//   - Start: one cluster for one test, in t.TempDir(), with extra
//     postgresql.conf lines if asked, stopped by t.Cleanup. Shared: one
//     cluster for a whole test binary, which its TestMain stops through
//     Main.
//   - Stop (fast shutdown), Crash (immediate shutdown: what the server had
//     in its shared memory, unflushed WAL included, is lost) and Restart on
//     the same directory and port, after crash recovery.
//   - Running the server as the "postgres" user when the tests run as root
//     (initdb and postgres both refuse root): the process is started with
//     that user's credentials, as runuser would, and the directories above
//     the data directory that the tests created are made traversable.
//
// Without the binaries a test that asks for a cluster is skipped, loudly
// (a line on stderr beside the skip message), except under CI=true, where
// it fails: CI installs postgresql-15 (.ci/run), so a missing server there
// is a broken setup, not a reason to run less.
//
// The postmaster gets a parent-death signal: if the test binary dies
// (killed, timed out), the server goes with it instead of outliving it.
// Readiness is the server's own "ready to accept connections" log line,
// read from its stderr as it is written; nothing here sleeps or polls.
//
// It imports nothing of aos: any package's tests may use it, and it knows
// nothing of what they store.
package pgtest
