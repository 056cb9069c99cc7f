package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aos-kernel/aos/internal/pgtest"
)

// TestStartAndStop starts a cluster, talks to it over loopback TCP, and
// checks that Stop leaves no server behind: its postmaster.pid is gone,
// which PostgreSQL removes last on a clean shutdown.
func TestStartAndStop(t *testing.T) {
	c := pgtest.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL(""))
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, c.Log())
	}
	var fsync, sync string
	if err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sync); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if fsync != "on" || sync != "on" {
		t.Fatalf("fsync = %s, synchronous_commit = %s; a test cluster keeps both on", fsync, sync)
	}
	pid := filepath.Join(c.Dir, "postmaster.pid")
	if _, err := os.Stat(pid); err != nil {
		t.Fatalf("a running cluster has no %s: %v", pid, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pid); !os.IsNotExist(err) {
		t.Fatalf("after Stop, %s: %v; want it removed by a clean shutdown", pid, err)
	}
	if _, err := pgx.Connect(ctx, c.URL("")); err == nil {
		t.Fatal("connected to a stopped cluster")
	}
}
