package badgerdb

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/dgraph-io/badger/v4"

	"github.com/aos-kernel/aos/journal"
)

// A store backup is every key and value of the database as one Badger read
// transaction sees them, so it is a consistent copy of a world's store taken
// while the world runs: a journal that is a prefix of the live one (every
// frame committed before the transaction began, hence every acknowledged
// one) and every CAS object written before the records that name them
// (callers write objects before appending the records naming them). The
// format:
//
//	"aos-store-backup/1\n"
//	per key, in Badger's key order (strictly increasing):
//	    uvarint len(key) (> 0), key, uvarint len(value), value
//	uvarint 0                     the end of the entries
//	uvarint N                     how many entries there were
//	32 bytes                      SHA-256 of every byte before them
//
// Restore writes such a copy into a new directory; opening it recovers the
// journal as after a clean stop.
const backupMagic = "aos-store-backup/1\n"

// ErrBadBackup reports a store backup that cannot be restored: not one,
// cut short, or failing its checksum.
var ErrBadBackup = errors.New("badgerdb: not a valid store backup")

// BackupInfo describes a store backup.
type BackupInfo struct {
	Keys  uint64 // key-value pairs
	Bytes uint64 // their keys' and values' bytes
	// First and Height are the first and last seq of the journal the copy
	// holds (Height 0: no record).
	First, Height uint64
}

// Backup writes a consistent copy of the database to w (see backupMagic),
// while writers go on. It returns what it wrote.
func (d *DB) Backup(w io.Writer) (BackupInfo, error) {
	var info BackupInfo
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 1<<20)
	var n [binary.MaxVarintLen64]byte
	put := func(b []byte) {
		bw.Write(binary.AppendUvarint(n[:0], uint64(len(b))))
		bw.Write(b)
	}
	bw.WriteString(backupMagic)
	err := d.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false // a frame or an artifact can be large: one at a time
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			put(item.Key())
			err := item.Value(func(v []byte) error {
				put(v)
				return nil
			})
			if err != nil {
				return fmt.Errorf("read %q: %w", item.Key(), err)
			}
			info.Keys++
			info.Bytes += uint64(len(item.Key())) + uint64(item.ValueSize())
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("badgerdb: backup: %w", err)
	}
	bw.Write(binary.AppendUvarint(n[:0], 0))
	bw.Write(binary.AppendUvarint(n[:0], info.Keys))
	if err := bw.Flush(); err != nil {
		return info, fmt.Errorf("badgerdb: backup: write: %w", err)
	}
	if _, err := w.Write(sum.Sum(nil)); err != nil {
		return info, fmt.Errorf("badgerdb: backup: write: %w", err)
	}
	return info, nil
}

// ReadBackup reads a store backup from r, calling fn with each key and
// value (fresh slices fn may keep), and checks it whole: the header, keys
// strictly increasing, the count and the checksum. The journal range it
// reports comes from the frames the copy holds. Given a *bufio.Reader it
// stops at the backup's last byte, so what follows can be read from it;
// any other reader it buffers, reading ahead.
func ReadBackup(r io.Reader, fn func(key, value []byte) error) (BackupInfo, error) {
	var info BackupInfo
	sum := sha256.New()
	buf, ok := r.(*bufio.Reader)
	if !ok {
		buf = bufio.NewReaderSize(r, 1<<20)
	}
	br := &countingReader{r: buf}
	tr := io.TeeReader(br, sum)
	bad := func(format string, a ...any) (BackupInfo, error) {
		return info, fmt.Errorf("%w: at byte %d: %s", ErrBadBackup, br.n, fmt.Sprintf(format, a...))
	}
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(tr, magic); err != nil || string(magic) != backupMagic {
		return bad("no %q header", backupMagic[:len(backupMagic)-1])
	}
	var prev, lastFrame, lastFrameKey, recordedFirst []byte
	var firstFrame uint64
	for {
		klen, err := binary.ReadUvarint(byteReader{tr})
		if err != nil {
			return bad("cut short after %d entries (%v)", info.Keys, err)
		}
		if klen == 0 {
			break
		}
		key, err := readN(tr, klen)
		if err != nil {
			return bad("key of entry %d: %v", info.Keys+1, err)
		}
		if prev != nil && bytes.Compare(key, prev) <= 0 {
			return bad("key %q does not follow %q", key, prev)
		}
		vlen, err := binary.ReadUvarint(byteReader{tr})
		if err != nil {
			return bad("value length of %q: %v", key, err)
		}
		value, err := readN(tr, vlen)
		if err != nil {
			return bad("value of %q: %v", key, err)
		}
		if bytes.HasPrefix(key, []byte(journalPrefix)) {
			if firstFrame == 0 {
				if firstFrame, err = seqFromKey(key); err != nil {
					return bad("%v", err)
				}
			}
			lastFrameKey, lastFrame = key, value
		}
		if string(key) == firstKey {
			recordedFirst = value
		}
		if err := fn(key, value); err != nil {
			return info, err
		}
		prev = key
		info.Keys++
		info.Bytes += klen + vlen
	}
	count, err := binary.ReadUvarint(byteReader{tr})
	if err != nil {
		return bad("no entry count (%v)", err)
	}
	want := sum.Sum(nil)
	got := make([]byte, sha256.Size)
	if _, err := io.ReadFull(br, got); err != nil {
		return bad("no checksum (%v)", err)
	}
	if count != info.Keys {
		return bad("%d entries, the backup says %d", info.Keys, count)
	}
	if !bytes.Equal(got, want) {
		return bad("checksum mismatch: the bytes were changed")
	}
	return info, journalRangeOf(&info, lastFrameKey, lastFrame, firstFrame, recordedFirst)
}

// journalRangeOf sets the journal range a backup holds from its first and
// last frames, or from the First retention recorded when no frame is left.
func journalRangeOf(info *BackupInfo, lastKey, last []byte, first uint64, recorded []byte) error {
	if lastKey == nil {
		info.First, info.Height = 1, 0
		if len(recorded) == 8 {
			info.First = binary.BigEndian.Uint64(recorded)
			info.Height = info.First - 1
		}
		return nil
	}
	seq, err := seqFromKey(lastKey)
	if err != nil {
		return err
	}
	recs, err := journal.DecodeFrame(seq, last)
	if err != nil {
		return fmt.Errorf("%w: the last journal frame: %v", ErrBadBackup, err)
	}
	info.First, info.Height = first, recs[len(recs)-1].Seq
	return nil
}

// Restore writes the store backup read from r into dir, which must not
// exist or be empty, and opens it once as Open does, so the journal is
// recovered and durable: the store then opens like one closed cleanly at
// the backup's height. On an error dir may hold part of the store; the
// caller removes it.
func Restore(dir string, r io.Reader) (BackupInfo, error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return BackupInfo{}, fmt.Errorf("badgerdb: restore into %s: the directory is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return BackupInfo{}, fmt.Errorf("badgerdb: restore into %s: %w", dir, err)
	}
	db, err := Open(dir)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("badgerdb: restore into %s: %w", dir, err)
	}
	// Every write asks the free-space guard first (space.go), a restore's
	// too: in chunks, so a full disk fails it with ErrDiskFull instead of
	// faulting Badger's mapped files.
	wb := db.db.NewWriteBatch()
	g := &chunkedAdmit{space: db.space}
	info, err := ReadBackup(r, func(key, value []byte) error {
		var c cost
		c.add(len(key), len(value))
		if err := g.add(c); err != nil {
			return err
		}
		return wb.Set(key, value)
	})
	if err == nil {
		err = wb.Flush()
	} else {
		wb.Cancel()
	}
	g.done()
	if err == nil {
		// The journal was opened empty: take its range from what was
		// written, so Close makes it durable and starts the tail at the
		// restored height (and the next Open replays nothing).
		err = db.journal.recoverHeight()
	}
	if err == nil {
		err = db.journal.loadFirst()
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("badgerdb: restore into %s: close: %w", dir, cerr)
	}
	if err != nil {
		return info, err
	}
	opened, err := Open(dir)
	if err != nil {
		return info, fmt.Errorf("badgerdb: open the restored store: %w", err)
	}
	h, first := opened.Journal().Height(), opened.Journal().First()
	if err := opened.Close(); err != nil {
		return info, fmt.Errorf("badgerdb: close the restored store: %w", err)
	}
	if h != info.Height || (h > 0 && first != info.First) {
		return info, fmt.Errorf("%w: the restored journal holds seqs %d..%d, the backup %d..%d", ErrBadBackup, first, h, info.First, info.Height)
	}
	return info, nil
}

// readN reads exactly n bytes into a new slice, refusing lengths no value
// of a world can have before allocating them.
func readN(r io.Reader, n uint64) ([]byte, error) {
	if n > maxBackupValue {
		return nil, fmt.Errorf("length %d is over %d", n, uint64(maxBackupValue))
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// maxBackupValue bounds one key or value in a backup: a Badger value is
// below its value-log file size.
const maxBackupValue = valueLogFileSize

type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// byteReader reads one byte at a time from a reader that is buffered below.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var one [1]byte
	if _, err := io.ReadFull(b.r, one[:]); err != nil {
		return 0, err
	}
	return one[0], nil
}
