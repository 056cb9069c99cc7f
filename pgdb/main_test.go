package pgdb_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/pgdb"
)

// One throwaway cluster serves the package's tests; each test keeps to a
// schema of its own.
func TestMain(m *testing.M) { pgtest.Main(m) }

var schemaCount atomic.Int64

// newSchema is a schema name no other test of this binary uses.
func newSchema() string { return fmt.Sprintf("t%d", schemaCount.Add(1)) }

// world is one schema of the shared cluster: where a world's tables live.
type world struct {
	url    string
	schema string
}

func newWorld(t testing.TB) world {
	t.Helper()
	return world{url: pgtest.Shared(t).URL(""), schema: newSchema()}
}

// open opens the world's DB, closed when the test ends.
func (w world) open(t testing.TB) *pgdb.DB {
	t.Helper()
	db, err := pgdb.Open(context.Background(), pgdb.Config{URL: w.url, Schema: w.schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sql runs one statement on the world's schema, as an operator (or an
// attacker) would, beside aos.
func (w world) sql(t testing.TB, stmt string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path TO "+w.schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// acquire takes the lease for owner, failing the test if it cannot.
func acquire(t testing.TB, db *pgdb.DB, owner string, force bool) pgdb.Lease {
	t.Helper()
	l, err := db.Acquire(context.Background(), pgdb.Claim{Owner: owner, Address: owner + ":7070", TTL: time.Minute, Force: force})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ownerJournal opens the journal for the holder of l, closed when the test
// ends.
func ownerJournal(t testing.TB, db *pgdb.DB, l pgdb.Lease) *pgdb.Journal {
	t.Helper()
	j, err := db.Journal(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return j
}

// owned is a fresh world's DB, with a lease taken and its journal open.
func owned(t testing.TB) (*pgdb.DB, pgdb.Lease, *pgdb.Journal) {
	t.Helper()
	db := newWorld(t).open(t)
	l := acquire(t, db, "node-a", false)
	return db, l, ownerJournal(t, db, l)
}
