package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/aos-kernel/aos/internal/canon"
)

// archiveMagic is the first line of every archive (the format is in doc.go).
const archiveMagic = "aos journal archive v1\n"

// ArchiveWriter writes frames dropped by retention to an archive: the
// header line, then one canonical CBOR item [first_seq, frame_bytes] per
// frame, in the order Frame is called. It checks nothing about the frames
// (ReadArchive does); DropBefore hands them over oldest first.
type ArchiveWriter struct {
	w       io.Writer
	head    []byte // reused for each item's heads
	started bool   // the header is written
	closed  bool
	err     error // sticky: the first write error
}

// NewArchiveWriter returns a writer of an archive to w. Nothing is written
// until the first Frame or Close.
func NewArchiveWriter(w io.Writer) *ArchiveWriter { return &ArchiveWriter{w: w} }

// Frame appends one frame: first is the seq of its first record and frame
// its EncodeFrame bytes, as DropBefore's archive callback receives them.
// frame is not retained. After a write error every call returns it.
func (a *ArchiveWriter) Frame(first uint64, frame []byte) error {
	if a.closed {
		return errors.New("journal: archive: Frame after Close")
	}
	if err := a.start(); err != nil {
		return err
	}
	a.head = canon.AppendArray(a.head[:0], 2)
	a.head = canon.AppendUint(a.head, first)
	a.head = canon.AppendHead(a.head, canon.MajorBytes, uint64(len(frame)))
	if _, err := a.w.Write(a.head); err != nil {
		a.err = fmt.Errorf("journal: archive: write the frame at seq %d: %w", first, err)
		return a.err
	}
	if _, err := a.w.Write(frame); err != nil {
		a.err = fmt.Errorf("journal: archive: write the frame at seq %d: %w", first, err)
	}
	return a.err
}

// Close ends the archive: it writes the header if no frame was written (an
// archive of nothing is still an archive) and returns the first write
// error. It does not close the underlying writer.
func (a *ArchiveWriter) Close() error {
	if a.closed {
		return a.err
	}
	err := a.start()
	a.closed = true
	return err
}

func (a *ArchiveWriter) start() error {
	if a.err != nil || a.started {
		return a.err
	}
	a.started = true
	if _, err := io.WriteString(a.w, archiveMagic); err != nil {
		a.err = fmt.Errorf("journal: archive: write the header: %w", err)
	}
	return a.err
}

// ReadArchive calls fn for every record of the archive read from r, in
// order, until fn returns false or an error (which ReadArchive returns). It
// checks the header, decodes each frame against the seq it was archived
// under (DecodeFrame), and checks that each frame starts right after the
// one before; anything else is ErrArchive naming the item and its byte
// offset. An archive may start at any seq.
func ReadArchive(r io.Reader, fn func(Record) (bool, error)) error {
	ar := archiveReader{r: bufio.NewReader(r)}
	magic := make([]byte, len(archiveMagic))
	if n, err := io.ReadFull(ar.r, magic); err != nil || string(magic) != archiveMagic {
		return fmt.Errorf("%w: the file does not start with the header %q (read %q)", ErrArchive, archiveMagic, magic[:n])
	}
	ar.off = int64(len(magic))
	var buf bytes.Buffer
	var next uint64 // the seq the next frame must start with
	for item := 1; ; item++ {
		start := ar.off
		where := func(format string, args ...any) error {
			return fmt.Errorf("%w: item %d at byte %d: %s", ErrArchive, item, start, fmt.Sprintf(format, args...))
		}
		b, err := ar.r.ReadByte()
		if err == io.EOF {
			return nil // the end, between items
		}
		if err != nil {
			return where("%v", err)
		}
		ar.off++
		if b != 0x82 {
			return where("want a 2-item array [first_seq, frame_bytes], got initial byte %#02x", b)
		}
		first, err := ar.head(canon.MajorUint, "first_seq")
		if err != nil {
			return where("%v", err)
		}
		size, err := ar.head(canon.MajorBytes, "frame_bytes")
		if err != nil {
			return where("frame at seq %d: %v", first, err)
		}
		if size > math.MaxInt64 {
			return where("frame at seq %d: length %d is too large", first, size)
		}
		// CopyN grows buf only as bytes arrive, so a corrupt length cannot
		// make a huge allocation before the file runs out.
		buf.Reset()
		got, err := io.CopyN(&buf, ar.r, int64(size))
		ar.off += got
		if err != nil {
			if err == io.EOF {
				return where("frame at seq %d: truncated: want %d bytes, the file ends after %d", first, size, got)
			}
			return where("frame at seq %d: %v", first, err)
		}
		recs, err := DecodeFrame(first, buf.Bytes())
		if err != nil {
			return fmt.Errorf("%w: item %d at byte %d: %w", ErrArchive, item, start, err)
		}
		if item > 1 && first != next {
			return where("frame starts at seq %d, want seq %d (the frame before ended at seq %d)", first, next, next-1)
		}
		for _, rec := range recs {
			if more, err := fn(rec); err != nil || !more {
				return err
			}
		}
		next = recs[len(recs)-1].Seq + 1
	}
}

// archiveReader reads canonical CBOR heads from a stream, counting bytes.
type archiveReader struct {
	r   *bufio.Reader
	off int64 // bytes consumed, header included
	hb  [9]byte
}

// head reads one head that must be of major type major and in its
// shortest form, and returns its argument; name says what it is for the
// error.
func (a *archiveReader) head(major byte, name string) (uint64, error) {
	b, err := a.r.ReadByte()
	if err != nil {
		return 0, fmt.Errorf("%s: truncated: %w", name, noEOF(err))
	}
	a.off++
	a.hb[0] = b
	n := 0
	switch ai := b & 0x1f; {
	case ai < 24:
	case ai <= 27:
		n = 1 << (ai - 24)
	default:
		return 0, fmt.Errorf("%s: initial byte %#02x is not a definite-length head", name, b)
	}
	got, err := io.ReadFull(a.r, a.hb[1:1+n])
	a.off += int64(got)
	if err != nil {
		return 0, fmt.Errorf("%s: truncated: %w", name, noEOF(err))
	}
	maj, arg, end, ok := canon.Head(a.hb[:1+n], 0)
	switch {
	case !ok:
		return 0, fmt.Errorf("%s: malformed head %x", name, a.hb[:1+n])
	case maj != major:
		return 0, fmt.Errorf("%s: want %s, got %s", name, canon.TypeName(major), canon.TypeName(maj))
	case end != canon.HeadLen(arg):
		return 0, fmt.Errorf("%s: head %x is not in its shortest form", name, a.hb[:end])
	}
	return arg, nil
}

// noEOF says that a stream ending inside an item is unexpected.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
