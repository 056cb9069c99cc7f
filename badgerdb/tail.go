package badgerdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The journal's tail: a file in the Badger directory holding
// every frame appended since the last checkpoint, so that a frame is durable
// with one fdatasync of one file instead of DB.Sync's two (Badger's memtable
// WAL and its value log). Badger still holds every frame, committed but not
// synced, and serves every read; the tail is only read at Open, to put back
// whatever Badger lost. See doc.go, "Durability".
//
// Layout: a header, then records, then whatever bytes follow.
//
//	header: "AOSJTAIL" | base (8 bytes BE) | CRC-32C of the 16 bytes before it
//	record: length n (4 bytes BE) | CRC-32C of the 8+n bytes after it |
//	        first seq (8 bytes BE) | the frame (n bytes, journal.EncodeFrame)
//
// base is the height through which Badger is known durable: every frame
// with a seq above it is in the tail. All integers are big-endian.
//
// The file is written in place and never shrinks: it grows in steps of
// zeros (tailGrowStep) ahead of the records, and a restart rewrites only
// the header. An fdatasync of a write inside the file's size then flushes
// the data alone, no inode update (measured in docs/PERFORMANCE.md). The
// records end at the first that is cut short, fails its CRC, or does not
// start past the one before (past base, for the first): zeros, a torn
// write, and records left from before the last restart (all at or below
// its base) all end them.
const (
	tailName      = "aos-journal.tail"
	tailMagic     = "AOSJTAIL"
	tailHeaderLen = len(tailMagic) + 8 + 4
	tailRecordLen = 4 + 4 + 8 // a record's bytes before its frame
)

// defaultTailLimit is the tail's size past which an Append checkpoints:
// it makes Badger durable (syncBadger) and starts the tail afresh. It
// bounds what Open replays.
const defaultTailLimit = 16 << 20

// tailGrowStep is how far ahead of its records the tail is extended with
// zeros at a time.
const tailGrowStep = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// tail is the open tail file. Its methods are called with the journal's
// appendMu held (or before the journal is shared).
type tail struct {
	f    *os.File
	path string
	base uint64 // Badger is durable through this seq
	last uint64 // the last seq the tail holds (base when it holds none)
	size int64  // bytes of header and whole records
	end  int64  // the file's size: zeros or stale bytes after size
	buf  []byte // reused record buffer
}

// tailFrame is one record read back from the tail.
type tailFrame struct {
	first uint64
	frame []byte
}

// openTail opens (creating if needed) the tail in dir and reads it. ok is
// false when the file holds no valid header: a new world, a world written
// before the tail existed, or a crash while the tail was being started
// afresh; in each case Badger was durable through its height. frames are
// the records after the header, in order, up to the first that ends them
// (see the layout above); the next append overwrites what follows.
func openTail(dir string) (t *tail, frames []tailFrame, ok bool, err error) {
	path := filepath.Join(dir, tailName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, false, fmt.Errorf("journal: open tail: %w", err)
	}
	data, err := readAll(f)
	if err != nil {
		f.Close()
		return nil, nil, false, fmt.Errorf("journal: read tail %s: %w", path, err)
	}
	t = &tail{f: f, path: path, end: int64(len(data))}
	base, ok := parseTailHeader(data)
	if !ok {
		return t, nil, false, nil
	}
	t.base, t.last, t.size = base, base, int64(tailHeaderLen)
	rest := data[tailHeaderLen:]
	for len(rest) >= tailRecordLen {
		n := int(binary.BigEndian.Uint32(rest[0:4]))
		if n > len(rest)-tailRecordLen {
			break // cut short
		}
		body := rest[8 : tailRecordLen+n]
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(rest[4:8]) {
			break // torn
		}
		first := binary.BigEndian.Uint64(body[:8])
		if first <= t.last {
			// Left from before the last restart: at or below its base,
			// so Badger holds it durably.
			break
		}
		frames = append(frames, tailFrame{first: first, frame: body[8:]})
		t.size += int64(tailRecordLen + n)
		rest = rest[tailRecordLen+n:]
	}
	return t, frames, true, nil
}

func readAll(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, err
	}
	return data, nil
}

func parseTailHeader(data []byte) (uint64, bool) {
	if len(data) < tailHeaderLen || string(data[:len(tailMagic)]) != tailMagic {
		return 0, false
	}
	sum := binary.BigEndian.Uint32(data[tailHeaderLen-4 : tailHeaderLen])
	if crc32.Checksum(data[:tailHeaderLen-4], castagnoli) != sum {
		return 0, false
	}
	return binary.BigEndian.Uint64(data[len(tailMagic) : len(tailMagic)+8]), true
}

// append writes the frame of first..last after the tail's records and
// fdatasyncs the file: the one device flush of a journal append.
func (t *tail) append(first, last uint64, frame []byte) error {
	b := t.buf[:0]
	b = binary.BigEndian.AppendUint32(b, uint32(len(frame)))
	b = append(b, 0, 0, 0, 0) // CRC, below
	b = binary.BigEndian.AppendUint64(b, first)
	b = append(b, frame...)
	binary.BigEndian.PutUint32(b[4:8], crc32.Checksum(b[8:], castagnoli))
	t.buf = b
	if cap(t.buf) > 4<<20 {
		t.buf = nil // do not keep a huge frame's buffer
	}
	if err := t.grow(t.size + int64(len(b))); err != nil {
		return err
	}
	if _, err := t.f.WriteAt(b, t.size); err != nil {
		return fmt.Errorf("write tail: %w", err)
	}
	if err := datasync(t.f); err != nil {
		return fmt.Errorf("sync tail: %w", err)
	}
	t.size += int64(len(b))
	t.last = last
	return nil
}

// grow extends the file with zeros, in tailGrowStep steps, until it holds
// size bytes; the append's fdatasync makes the new size durable.
func (t *tail) grow(size int64) error {
	if size <= t.end {
		return nil
	}
	newEnd := (size + tailGrowStep - 1) / tailGrowStep * tailGrowStep
	zeros := make([]byte, min(newEnd-t.end, tailGrowStep))
	for t.end < newEnd {
		n := min(int64(len(zeros)), newEnd-t.end)
		if _, err := t.f.WriteAt(zeros[:n], t.end); err != nil {
			return fmt.Errorf("extend tail: %w", err)
		}
		t.end += n
	}
	return nil
}

// restart empties the tail and gives it base: the caller has made Badger
// durable through base. It rewrites the header alone; the records after it
// are then stale (at or below base) and end the tail at Open. A crash part
// way leaves either the old header (its frames Badger now holds anyway) or
// one failing its CRC, which Open reads as "Badger is durable through its
// height": both true.
func (t *tail) restart(base uint64) error {
	h := make([]byte, 0, tailHeaderLen)
	h = append(h, tailMagic...)
	h = binary.BigEndian.AppendUint64(h, base)
	h = binary.BigEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	if _, err := t.f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("write tail header: %w", err)
	}
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("sync tail header: %w", err)
	}
	t.base, t.last, t.size = base, base, int64(tailHeaderLen)
	t.end = max(t.end, t.size)
	return nil
}

func (t *tail) close() error { return t.f.Close() }

// syncFiles fsyncs every memtable WAL (*.mem) in Badger's directory and
// every value-log file (*.vlog) numbered from vlogFrom on, and returns the
// highest value-log number it saw. DB.Sync syncs only the active memtable's
// WAL and the newest value-log file; with SyncWrites off Badger syncs
// neither a memtable's WAL when it rotates to a new memtable nor a
// value-log file when it moves to the next, so writes committed before a
// rotation may sit unsynced until these fsyncs (a memtable's WAL is deleted
// once its L0 table, synced, is in the synced manifest; a file gone
// meanwhile needs nothing). Linux writes back pages dirtied through Badger's
// mmap on an fsync of any descriptor of the file. The names are Badger v4's
// (memFileExt, vlogFilePath).
func syncFiles(dir string, vlogFrom uint64) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	maxVlog := vlogFrom
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".mem"):
		case strings.HasSuffix(name, ".vlog"):
			fid, err := strconv.ParseUint(strings.TrimSuffix(name, ".vlog"), 10, 32)
			if err != nil || fid < vlogFrom {
				continue
			}
			maxVlog = max(maxVlog, fid)
		default:
			continue
		}
		if err := syncFile(filepath.Join(dir, name)); err != nil {
			return 0, err
		}
	}
	return maxVlog, nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // flushed and deleted, or garbage collected, meanwhile
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}
