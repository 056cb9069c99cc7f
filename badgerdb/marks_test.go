package badgerdb_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// countKeys counts the keys under prefix.
func countKeys(t testing.TB, db *badgerdb.DB, prefix string) int {
	t.Helper()
	n := 0
	err := db.Badger().View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// allMarks is Marks of every indexed kind.
func allMarks(t testing.TB, j journaltest.Journal) map[journal.Kind][]uint64 {
	t.Helper()
	m := map[journal.Kind][]uint64{}
	for _, k := range journal.IndexedKinds() {
		m[k] = journaltest.MarksOf(t, j, k)
	}
	return m
}

// TestMarksBackfilledOnOpen: a world written before the kind index existed
// (no "m/" keys, no done flag) gets it built at open, the same as the one
// written with the frames.
func TestMarksBackfilledOnOpen(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	journaltest.AppendMixed(t, db.Journal(), 5, 30, 1, 12, 40)
	want := allMarks(t, db.Journal())
	for _, k := range journal.IndexedKinds() {
		if !slices.Equal(want[k], journaltest.MixedMarks(k, 1, 88)) {
			t.Fatalf("Marks(%s) before the backfill = %v, want %v", k, want[k], journaltest.MixedMarks(k, 1, 88))
		}
	}
	if err := db.ForgetMarks(); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, db, "m/"); n != 0 {
		t.Fatalf("%d marks left after ForgetMarks", n)
	}
	if got := journaltest.MarksOf(t, db.Journal(), journal.KindManifest); len(got) != 0 {
		t.Fatalf("Marks without an index = %v, want none", got)
	}
	db = reopen(t, db, dir)
	defer db.Close()
	for k, seqs := range allMarks(t, db.Journal()) {
		if !slices.Equal(seqs, want[k]) {
			t.Fatalf("Marks(%s) after the backfill = %v, want %v", k, seqs, want[k])
		}
	}
	if n, want := countKeys(t, db, "m/"), 3*len(want[journal.KindManifest]); n != want {
		t.Fatalf("%d marks stored after the backfill, want %d", n, want)
	}
}

// TestRefusedAppendWritesNoMark: a mark is written in its frame's
// transaction, so an Append refused with ErrGap leaves no mark, as a reopen
// shows.
func TestRefusedAppendWritesNoMark(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir)
	j := db.Journal()
	journaltest.AppendMixed(t, j, 3)
	landmarks := func(seqs ...uint64) []journal.Record {
		var recs []journal.Record
		for i, s := range seqs {
			recs = append(recs, journal.Record{Seq: s, Kind: journal.IndexedKinds()[i%3], Body: []byte{1}})
		}
		return recs
	}
	for name, recs := range map[string][]journal.Record{
		"gap":              landmarks(5),
		"repeat":           landmarks(3, 4),
		"gap inside frame": landmarks(4, 6),
	} {
		if err := j.Append(recs); !errors.Is(err, journal.ErrGap) {
			t.Fatalf("%s: Append = %v, want ErrGap", name, err)
		}
	}
	db = reopen(t, db, dir)
	defer db.Close()
	if n := countKeys(t, db, "m/"); n != 0 {
		t.Fatalf("%d marks stored by refused appends, want 0", n)
	}
	for k, seqs := range allMarks(t, db.Journal()) {
		if len(seqs) != 0 {
			t.Fatalf("Marks(%s) = %v after refused appends, want none", k, seqs)
		}
	}
	// The journal goes on, and its marks are its own.
	if err := db.Journal().Append(landmarks(4, 5, 6)); err != nil {
		t.Fatal(err)
	}
	if got := journaltest.MarksOf(t, db.Journal(), journal.KindSnapshot); !slices.Equal(got, []uint64{6}) {
		t.Fatalf("Marks(snapshot) = %v, want [6]", got)
	}
}
