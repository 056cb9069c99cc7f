package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/journal/journaltest"
)

// archiveOf writes the frames of Mixed records of the given sizes, the
// first starting at seq first, as an archive.
func archiveOf(t testing.TB, first uint64, sizes ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := journal.NewArchiveWriter(&buf)
	for _, n := range sizes {
		if err := w.Frame(first, journal.EncodeFrame(journaltest.MixedRecs(first, n))); err != nil {
			t.Fatal(err)
		}
		first += uint64(n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readArchive(data []byte) ([]journal.Record, error) {
	var recs []journal.Record
	err := journal.ReadArchive(bytes.NewReader(data), func(r journal.Record) (bool, error) {
		recs = append(recs, r)
		return true, nil
	})
	return recs, err
}

func TestArchiveRoundTrip(t *testing.T) {
	// An archive starts wherever retention's First was.
	data := archiveOf(t, 40, 1, 3, 30, 1, 300)
	recs, err := readArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	journaltest.CheckMixed(t, recs, 40, 374)

	// A frame past 64 KiB has a 4-byte length head.
	big := journal.Record{Seq: 7, Kind: journal.KindSnapshot, Body: bytes.Repeat([]byte{0xa5}, 70000)}
	var buf bytes.Buffer
	w := journal.NewArchiveWriter(&buf)
	if err := w.Frame(7, journal.EncodeFrame([]journal.Record{big})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err = readArchive(buf.Bytes())
	if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Body, big.Body) || recs[0].Seq != 7 {
		t.Fatalf("big frame read back as %d records, %v", len(recs), err)
	}

	// An archive of nothing is the header alone.
	empty := archiveOf(t, 1)
	if string(empty) != "aos journal archive v1\n" {
		t.Fatalf("empty archive = %q", empty)
	}
	if recs, err := readArchive(empty); err != nil || len(recs) != 0 {
		t.Fatalf("empty archive read as %d records, %v", len(recs), err)
	}
}

// The layout doc.go promises: the header line, then per frame the CBOR
// array [first_seq, frame_bytes].
func TestArchiveLayout(t *testing.T) {
	frame := journal.EncodeFrame(journaltest.MixedRecs(300, 1))
	want := append([]byte("aos journal archive v1\n\x82\x19\x01\x2c\x58"), byte(len(frame)))
	want = append(want, frame...)
	if got := archiveOf(t, 300, 1); !bytes.Equal(got, want) {
		t.Fatalf("archive = %x\nwant      %x", got, want)
	}
}

func TestReadArchiveStopsWhenFnDoes(t *testing.T) {
	data := archiveOf(t, 1, 3, 3)
	var n int
	err := journal.ReadArchive(bytes.NewReader(data), func(journal.Record) (bool, error) { n++; return n < 4, nil })
	if err != nil || n != 4 {
		t.Fatalf("stopped after %d records, %v; want 4, nil", n, err)
	}
	stop := errors.New("stop")
	err = journal.ReadArchive(bytes.NewReader(data), func(journal.Record) (bool, error) { return true, stop })
	if !errors.Is(err, stop) {
		t.Fatalf("ReadArchive = %v, want fn's error", err)
	}
}

func TestReadArchiveRefusesBadFiles(t *testing.T) {
	good := archiveOf(t, 1, 2, 3)
	header := len("aos journal archive v1\n")
	frame := func(first uint64, n int) []byte { return journal.EncodeFrame(journaltest.MixedRecs(first, n)) }
	item := func(first uint64, f []byte) []byte {
		var buf bytes.Buffer
		w := journal.NewArchiveWriter(&buf)
		if err := w.Frame(first, f); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()[header:]
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	hdr := []byte("aos journal archive v1\n")
	secondItem := header + len(item(1, frame(1, 2)))
	corrupted := bytes.Clone(good)
	corrupted[len(corrupted)-3] ^= 0xff // inside the last record's kind text

	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty file", nil, "does not start with the header"},
		{"other header", []byte("aos journal archive v2\n"), "does not start with the header"},
		{"not an archive", []byte("{\"seq\": 1}"), "does not start with the header"},
		{"truncated frame", good[:len(good)-5], fmt.Sprintf("item 2 at byte %d: frame at seq 3: truncated", secondItem)},
		{"truncated head", good[:secondItem+2], fmt.Sprintf("item 2 at byte %d: frame at seq 3: frame_bytes: truncated", secondItem)},
		{"gap between frames", cat(hdr, item(1, frame(1, 2)), item(4, frame(4, 2))), "frame starts at seq 4, want seq 3"},
		{"overlapping frames", cat(hdr, item(1, frame(1, 2)), item(2, frame(2, 2))), "frame starts at seq 2, want seq 3"},
		{"frame under another seq", cat(hdr, item(5, frame(1, 2))), "frame keyed at seq 5 starts at seq 1"},
		{"corrupted frame", corrupted, "item 2 at byte"},
		{"not an array", cat(hdr, []byte{0x01}), "want a 2-item array"},
		{"seq not an integer", cat(hdr, []byte{0x82, 0x41, 0x01}), "first_seq: want an unsigned integer, got a byte string"},
		{"seq not shortest", cat(hdr, []byte{0x82, 0x18, 0x01, 0x40}), "not in its shortest form"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readArchive(c.data)
			if !errors.Is(err, journal.ErrArchive) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadArchive = %v, want ErrArchive saying %q", err, c.want)
			}
		})
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestArchiveWriterErrorsStick(t *testing.T) {
	w := journal.NewArchiveWriter(&failingWriter{n: 2}) // the header and one head
	err := w.Frame(1, journal.EncodeFrame(journaltest.MixedRecs(1, 1)))
	if err == nil || !strings.Contains(err.Error(), "frame at seq 1: disk full") {
		t.Fatalf("Frame on a failing writer = %v", err)
	}
	if err2 := w.Frame(2, journal.EncodeFrame(journaltest.MixedRecs(2, 1))); err2 != err {
		t.Fatalf("second Frame = %v, want the first error again", err2)
	}
	if err2 := w.Close(); err2 != err {
		t.Fatalf("Close = %v, want the first error", err2)
	}
	w = journal.NewArchiveWriter(&bytes.Buffer{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Frame(1, nil); err == nil {
		t.Fatal("Frame after Close succeeded")
	}
}

// ReadArchive reads files from outside: whatever it accepts is a
// gap-free run of records, and it never panics.
func FuzzReadArchive(f *testing.F) {
	f.Add(archiveOf(f, 1, 2, 3))
	f.Add(archiveOf(f, 1<<40, 1))
	f.Add([]byte("aos journal archive v1\n\x82\x01\x5b\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readArchive(data)
		if err != nil && !errors.Is(err, journal.ErrArchive) {
			t.Fatalf("error not ErrArchive: %v", err)
		}
		for i := 1; i < len(recs); i++ {
			if recs[i].Seq != recs[i-1].Seq+1 {
				t.Fatalf("record %d has seq %d after %d", i, recs[i].Seq, recs[i-1].Seq)
			}
		}
	})
}
