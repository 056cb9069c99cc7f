package pgdb_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/pgdb"
)

// TestWorldFiles: world files are written under the lease and read back;
// a file never written is ErrNoFile (fs.ErrNotExist); a write through a
// lease another owner took stores nothing (ErrFenced, naming the owner),
// so a fenced node cannot overwrite the new owner's token or keys.
func TestWorldFiles(t *testing.T) {
	ctx := context.Background()
	db := newWorld(t).open(t)
	if _, err := db.ReadFile(ctx, "token"); !errors.Is(err, pgdb.ErrNoFile) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read of a file never written: %v", err)
	}
	a := acquire(t, db, "node-a", false)
	if err := db.WriteFiles(ctx, a, map[string][]byte{"token": []byte("t1\n"), "executor.key": []byte("k1")}); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteFiles(ctx, a, map[string][]byte{"token": []byte("t2\n")}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"token": "t2\n", "executor.key": "k1"} {
		if b, err := db.ReadFile(ctx, name); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v, want %q", name, b, err, want)
		}
	}
	if names, err := db.FileNames(ctx); err != nil || strings.Join(names, ",") != "executor.key,token" {
		t.Fatalf("file names %v %v", names, err)
	}
	acquire(t, db, "node-b", true)
	err := db.WriteFiles(ctx, a, map[string][]byte{"executors.json": []byte("{}"), "token": []byte("stale\n")})
	if !errors.Is(err, pgdb.ErrFenced) || !strings.Contains(err.Error(), "node-b") {
		t.Fatalf("write by a fenced owner: %v; want ErrFenced naming node-b", err)
	}
	if b, _ := db.ReadFile(ctx, "token"); string(b) != "t2\n" {
		t.Fatalf("token %q after a fenced write, want t2", b)
	}
	if _, err := db.ReadFile(ctx, "executors.json"); !errors.Is(err, pgdb.ErrNoFile) {
		t.Fatalf("a fenced write stored part of itself: %v", err)
	}
}
