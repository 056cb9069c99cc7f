package pgdb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/internal/pgtest"
	"github.com/aos-kernel/aos/pgdb"
)

// TestSchemaMigratesOnce: processes opening a new schema at once create it
// once (schema_migrations holds one row per version), and opening it again
// changes nothing.
func TestSchemaMigratesOnce(t *testing.T) {
	w := newWorld(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := pgdb.Open(context.Background(), pgdb.Config{URL: w.url, Schema: w.schema})
			if err == nil {
				db.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent opens of a new schema: %v", err)
		}
	}
	w.open(t)
	if n := w.count(t, "SELECT count(*) FROM schema_migrations"); n != int64(pgdb.SchemaVersion()) {
		t.Fatalf("schema_migrations holds %d rows, want %d", n, pgdb.SchemaVersion())
	}
	if n := w.count(t, "SELECT count(*) FROM partitions"); n != 1 {
		t.Fatalf("partitions holds %d rows, want 1", n)
	}
}

// TestSchemaNewerRefused: a schema a newer aos migrated is refused with
// ErrSchemaNewer naming both versions, and left as it was.
func TestSchemaNewerRefused(t *testing.T) {
	w := newWorld(t)
	w.open(t).Close()
	next := pgdb.SchemaVersion() + 1
	w.sql(t, "INSERT INTO schema_migrations (version, name) VALUES ($1, 'from the future')", next)
	_, err := pgdb.Open(context.Background(), pgdb.Config{URL: w.url, Schema: w.schema})
	if !errors.Is(err, pgdb.ErrSchemaNewer) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", next)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("up to %d", pgdb.SchemaVersion())) || !strings.Contains(err.Error(), w.schema) {
		t.Fatalf("Open of a newer schema: %v; want ErrSchemaNewer naming the schema, version %d and %d", err, next, pgdb.SchemaVersion())
	}
	if n := w.count(t, "SELECT count(*) FROM schema_migrations"); n != int64(next) {
		t.Fatalf("schema_migrations holds %d rows after the refusal, want %d", n, next)
	}
}

// TestRefusesNonDurableSessions: a connection string that turns
// synchronous_commit off is refused at Open with ErrNotDurable, and so is
// a bad schema name.
func TestRefusesNonDurableSessions(t *testing.T) {
	c := pgtest.Shared(t)
	url := c.URL("") + "&options=-c%20synchronous_commit%3Doff"
	_, err := pgdb.Open(context.Background(), pgdb.Config{URL: url, Schema: newSchema()})
	if !errors.Is(err, pgdb.ErrNotDurable) || !strings.Contains(err.Error(), "synchronous_commit") {
		t.Fatalf("Open with synchronous_commit off: %v, want ErrNotDurable naming synchronous_commit", err)
	}
	for _, s := range []string{"Aos", "1aos", "a-b", "a;drop"} {
		if _, err := pgdb.Open(context.Background(), pgdb.Config{URL: c.URL(""), Schema: s}); err == nil || !strings.Contains(err.Error(), s) {
			t.Fatalf("Open with schema %q: %v, want an error naming it", s, err)
		}
	}
}

// count runs a query answering one number on the world's schema.
func (w world) count(t testing.TB, query string) int64 {
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
	var n int64
	if err := conn.QueryRow(ctx, query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
