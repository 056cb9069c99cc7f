package pgtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestWithoutPostgres: without the server binaries a test asking for a
// cluster is skipped, saying so on stderr too, and under CI=true it fails.
// It runs this test binary again with AOS_PG_BIN naming an empty
// directory.
func TestWithoutPostgres(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		pgtest.Start(t)
		t.Fatal("Start returned a cluster without PostgreSQL")
	}
	for _, c := range []struct{ ci, want string }{{"", "--- SKIP"}, {"true", "--- FAIL"}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWithoutPostgres$", "-test.v")
		cmd.Env = append(os.Environ(), "PGTEST_CHILD=1", "AOS_PG_BIN="+t.TempDir(), "CI="+c.ci)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "NO POSTGRES") || strings.Contains(string(out), "returned a cluster") {
			t.Fatalf("CI=%q without PostgreSQL: want %q and NO POSTGRES, got:\n%s", c.ci, c.want, out)
		}
	}
}
