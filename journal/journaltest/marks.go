package journaltest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aos-kernel/aos/journal"
)

// Mixed is the deterministic record for seq whose kind runs through twelve
// kinds in turn (mixedKinds[seq%12]), so a run of twelve holds one record
// of each indexed kind: a manifest at seq%12 == 6, a checkpoint at 7, a
// snapshot at 8.
func Mixed(seq uint64) journal.Record {
	return journal.Record{Seq: seq, Kind: mixedKinds[seq%uint64(len(mixedKinds))], Body: fmt.Appendf(nil, "mixed %d", seq)}
}

// mixedKinds are the kinds Mixed cycles through: journal.Kinds() as it was
// when the backends' tests placed their marks by it. Kinds added since are
// not indexed, so a backend treats them as it treats these.
var mixedKinds = journal.Kinds()[:12]

// MixedRecs is Mixed(from), ..., Mixed(from+n-1).
func MixedRecs(from uint64, n int) []journal.Record {
	out := make([]journal.Record, n)
	for i := range out {
		out[i] = Mixed(from + uint64(i))
	}
	return out
}

// AppendMixed appends frames of Mixed records of the given sizes after the
// current height.
func AppendMixed(t testing.TB, j Journal, sizes ...int) {
	t.Helper()
	for _, n := range sizes {
		if err := j.Append(MixedRecs(j.Height()+1, n)); err != nil {
			t.Fatal(err)
		}
	}
}

// CheckMixed fails unless got is exactly Mixed(from), ..., Mixed(to).
func CheckMixed(t testing.TB, got []journal.Record, from, to uint64) {
	t.Helper()
	if err := runError(got, from, to, Mixed); err != nil {
		t.Fatal(err)
	}
}

// MarksOf is every seq Marks gives for kind k, in the order given.
func MarksOf(t testing.TB, j Journal, k journal.Kind) []uint64 {
	t.Helper()
	var got []uint64
	if err := j.Marks(k, func(seq uint64) (bool, error) { got = append(got, seq); return true, nil }); err != nil {
		t.Fatalf("Marks(%s): %v", k, err)
	}
	return got
}

// MixedMarks is what Marks(k) gives for a journal holding Mixed(from..to):
// the seqs of its records of kind k, newest first, none for a kind that is
// not indexed.
func MixedMarks(k journal.Kind, from, to uint64) []uint64 {
	var want []uint64
	for s := to; s >= max(from, 1); s-- {
		if journal.Indexed(k) && Mixed(s).Kind == k {
			want = append(want, s)
		}
	}
	return want
}

// checkMarks fails unless Marks gives MixedMarks(k, from, to) for every kind.
func checkMarks(t testing.TB, j Journal, from, to uint64) {
	t.Helper()
	for _, k := range journal.Kinds() {
		if got, want := MarksOf(t, j, k), MixedMarks(k, from, to); !slices.Equal(got, want) {
			t.Fatalf("Marks(%s) = %v, want %v", k, got, want)
		}
	}
}

func firstOfAFreshJournal(t *testing.T, j Journal) {
	if f := j.First(); f != 1 {
		t.Fatalf("First of an empty journal = %d, want 1", f)
	}
	AppendFrames(t, j, 3, 2)
	if f := j.First(); f != 1 {
		t.Fatalf("First after appends = %d, want 1", f)
	}
}

// Marks gives the seqs of exactly the records of indexed kinds, newest
// first, across frames.
func marksByKind(t *testing.T, j Journal) {
	AppendMixed(t, j, 3, 12, 1, 20)
	for _, k := range journal.IndexedKinds() {
		if n := len(MixedMarks(k, 1, 36)); n != 3 {
			t.Fatalf("the test's journal holds %d records of %s, want 3", n, k)
		}
	}
	checkMarks(t, j, 1, 36)
}

func marksStopErrorAndNewAppends(t *testing.T, j Journal) {
	AppendMixed(t, j, 20) // two manifests (where depends on how many kinds there are)
	want := MixedMarks(journal.KindManifest, 1, 20)
	if len(want) != 2 {
		t.Fatalf("the test's journal holds %d manifest records, want 2", len(want))
	}
	var got []uint64
	err := j.Marks(journal.KindManifest, func(seq uint64) (bool, error) {
		got = append(got, seq)
		return false, nil
	})
	if err != nil || !slices.Equal(got, want[:1]) {
		t.Fatalf("Marks stopped after one: %v, %v; want %v, nil", got, err, want[:1])
	}
	stop := errors.New("stop")
	calls := 0
	err = j.Marks(journal.KindCheckpoint, func(uint64) (bool, error) { calls++; return true, stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Marks with a failing fn: %v after %d calls, want fn's error after 1", err, calls)
	}
	AppendMixed(t, j, 5, 6)
	checkMarks(t, j, 1, 31)
}
