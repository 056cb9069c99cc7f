package badgerdb_test

import (
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
)

// TestOpenRunsTwoCompactors pins the compactor count docs/PERFORMANCE.md
// states for an idle daemon (issue 33): each Badger compactor wakes every
// 50 ms whether or not there is work, so Badger's default of four cost an
// idle daemon 1.25-1.45 % of a core against 0.9-1.05 % with two.
func TestOpenRunsTwoCompactors(t *testing.T) {
	db, err := badgerdb.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := db.Badger().Opts().NumCompactors; n != 2 {
		t.Fatalf("Badger runs %d compactors, want 2 (badgerdb.numCompactors)", n)
	}
}
