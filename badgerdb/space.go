package badgerdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// ErrDiskFull reports a write refused before it began because the
// filesystem under the store has too little free space for it and for what
// Badger may still write on its own. Nothing of the write reached the
// store; the message names the directory, the free bytes and what they fall
// short of. A write the operating system itself refused for want of space
// (ENOSPC from the tail's write(2), say) is reported with it too.
var ErrDiskFull = errors.New("badgerdb: disk full")

// Why a guard at all: Badger creates its value-log files, memtable
// write-ahead logs and tables at their full size with ftruncate, which
// allocates nothing, maps them, and writes through the mapping. On a full
// filesystem the page fault of such a write cannot allocate the page and the
// kernel raises SIGBUS, which Go turns into a fatal error in Badger's
// goroutine: the process dies instead of failing a write (dgraph-io/badger
// #1682, #1801; reproduced on a full tmpfs in valueLog.write). So every
// write of ours asks the guard first, and the guard refuses it unless,
// after it, the filesystem keeps free
//
//	reserve                     what Badger writes on its own, after and
//	                            between our writes (DefaultDiskReserve)
//	+ tables                    the bytes of the LSM's tables: a compaction
//	                            writes its output tables before it deletes
//	                            its inputs, compactions running at once
//	                            take disjoint inputs, and an output is no
//	                            larger than its input, so all of them
//	                            together write at most this much
//	+ in flight                 the writes admitted and not yet done
//
// A refused write changes nothing; the kernel meets it as a storage failure
// and stops the world (kernel/failstop.go), so no write follows that could
// fault. Once space is freed, reopening the world goes on.

// DefaultDiskReserve is the reserve Open keeps when Options.DiskReserve is
// 0, derived from the options Open sets:
//
//   - numMemtables * memTableSize (48 MiB): Badger flushes each full
//     memtable into a level-0 table on its own, after the writes that
//     filled it, and flushes the active one at Close; a table holds no
//     more than its memtable, and Badger stalls writes while numMemtables
//     wait to be flushed;
//   - smallFilesReserve (4 MiB): the first page of each new memtable
//     write-ahead log and value-log file, and the discard-statistics file
//     Badger maps at 1 MiB and fills as value-log files are compacted.
//
// What our writes put in the value log and the write-ahead logs is counted
// write by write (writeCost), and the tail is written with write(2), which
// reports a full disk as an error instead of a fault.
const DefaultDiskReserve = numMemtables*memTableSize + smallFilesReserve

// smallFilesReserve covers the small mapped files Badger creates or grows
// on its own (see DefaultDiskReserve).
const smallFilesReserve = 4 << 20

// entryOverhead bounds what Badger adds to an entry's key and value in a
// write-ahead log, a value-log file or a table: its header (at most 22
// bytes of varints), the 8-byte version it appends to every key, a CRC-32,
// and a table's per-key index and bloom-filter share.
const entryOverhead = 64

// valuePointerLen is the size of the pointer the LSM keeps for a value in
// the value log (Badger's valuePointer: fid, len, offset).
const valuePointerLen = 12

// measureEvery is how many bytes admitted to the LSM since the tables were
// last measured make the next admit measure them again (Badger's Levels
// takes ~80 µs, too much for every write). Between measurements the guard
// counts what may become tables on top of the measured ones (pending), an
// upper bound.
const measureEvery = memTableSize

// space is the free-space guard of one on-disk store; nil (in memory)
// admits everything.
type space struct {
	dir     string
	reserve int64

	// free reports the bytes an unprivileged writer may still allocate on
	// the filesystem holding dir (statfs); tests replace it. closeDir, when
	// set, releases what it holds (the directory it asks fstatfs about).
	free     func(dir string) (int64, error)
	closeDir func()
	// tables measures the LSM's table bytes (Badger's levels); nil until
	// Badger is open.
	tables func() int64

	inflight    atomic.Int64 // bytes admitted and not yet written
	inflightLSM atomic.Int64 // their LSM bytes
	// measured are the table bytes at the last measurement; pending what
	// may become tables beyond them: the memtables' write-ahead logs then,
	// and the LSM bytes admitted since. Their sum bounds the tables.
	measured  atomic.Int64
	pending   atomic.Int64
	since     atomic.Int64 // LSM bytes admitted since the last measurement
	measuring atomic.Bool  // one measurement at a time
}

// cost is what a write may allocate: disk now (write-ahead log, value log,
// tail), lsm later as table bytes when its memtable is flushed.
type cost struct{ disk, lsm int64 }

// add counts one Badger entry of a key and a value of these lengths.
func (c *cost) add(key, value int) {
	if value < valueThreshold {
		n := int64(key + value + entryOverhead)
		c.disk += n // write-ahead log
		c.lsm += n
		return
	}
	ptr := int64(key + valuePointerLen + entryOverhead)
	c.disk += ptr + int64(key+value+entryOverhead) // write-ahead log and value log
	c.lsm += ptr
}

// close releases the directory free reads, if it holds one.
func (s *space) close() {
	if s != nil && s.closeDir != nil {
		s.closeDir()
		s.closeDir = nil
	}
}

// plus is the cost of both writes.
func (c cost) plus(d cost) cost { return cost{c.disk + d.disk, c.lsm + d.lsm} }

// admit reserves c.disk bytes for a write about to start, or refuses it
// with ErrDiskFull when the filesystem would then keep less than it must.
// Every admit that returns nil is followed by release(c) once the write is
// done (or failed).
func (s *space) admit(c cost) error {
	if s == nil {
		return nil
	}
	if s.since.Load() >= measureEvery {
		s.measure()
	}
	inflight := s.inflight.Add(c.disk)
	free, err := s.free(s.dir)
	if err != nil {
		s.inflight.Add(-c.disk)
		return fmt.Errorf("badgerdb: free space of %s: %w", s.dir, err)
	}
	tables := s.measured.Load() + s.pending.Load()
	if need := s.reserve + tables + inflight; free < need {
		s.inflight.Add(-c.disk)
		return s.fullError(free, need, tables, inflight)
	}
	s.inflightLSM.Add(c.lsm)
	s.pending.Add(c.lsm)
	s.since.Add(c.lsm)
	return nil
}

// release ends what admit(c) reserved: the write is on the disk (or failed),
// and statfs sees what it allocated.
func (s *space) release(c cost) {
	if s != nil {
		s.inflight.Add(-c.disk)
		s.inflightLSM.Add(-c.lsm)
	}
}

// measure sets the bound from the disk: the table bytes from Badger's
// levels, and as pending what the memtables' write-ahead logs hold (the
// LSM bytes admitted before are in one or the other, or in a write still
// under way, counted too) plus what is admitted meanwhile. The logs are
// read first: a memtable Badger flushes in between is then counted twice
// (its log is deleted after its table is in the levels), never missed. A
// failed read of the directory keeps the bound as it was.
func (s *space) measure() {
	if !s.measuring.CompareAndSwap(false, true) {
		return // another admit is measuring; the bound stands meanwhile
	}
	defer s.measuring.Store(false)
	since, pending, under := s.since.Load(), s.pending.Load(), s.inflightLSM.Load()
	wal, err := walBytes(s.dir)
	if err != nil {
		return
	}
	s.measured.Store(s.tables())
	s.pending.Add(wal + under - pending)
	s.since.Add(-since)
}

// restoreChunk is the disk a long run of writes (a restore) asks the guard
// for at a time.
const restoreChunk = 8 << 20

// chunkedAdmit asks the guard for a long run of small writes a chunk at a
// time instead of one statfs each. A write batch writes behind its Sets,
// so the two newest chunks stay admitted (counted as under way) until the
// run is done; a chunk's LSM share is counted as its whole size, an upper
// bound.
type chunkedAdmit struct {
	space *space
	held  []cost // admitted, not released, oldest first
	left  int64  // disk bytes left in the newest chunk
}

// add counts c against the admitted chunk, asking for the next when it is
// used up; ErrDiskFull when the guard refuses it.
func (g *chunkedAdmit) add(c cost) error {
	if c.disk <= g.left {
		g.left -= c.disk
		return nil
	}
	n := max(restoreChunk, c.disk)
	chunk := cost{disk: n, lsm: n}
	if err := g.space.admit(chunk); err != nil {
		return err
	}
	g.held = append(g.held, chunk)
	if len(g.held) > 2 {
		g.space.release(g.held[0])
		g.held = g.held[1:]
	}
	g.left = n - c.disk
	return nil
}

// done releases what is still admitted: the run's writes are done.
func (g *chunkedAdmit) done() {
	for _, c := range g.held {
		g.space.release(c)
	}
	g.held = nil
}

// openCheck is what Open asks before Badger writes anything: that the
// filesystem keeps the reserve and the tables free. Badger is not open
// yet, so the tables are measured as the table files in dir; a directory
// not made yet (a new world) has none, and the nearest directory above it
// that exists is on the filesystem it will be made on.
func (s *space) openCheck() error {
	tables, err := tableFileBytes(s.dir)
	if err != nil {
		return err
	}
	wal, err := walBytes(s.dir)
	if err != nil {
		return err
	}
	s.measured.Store(tables)
	s.pending.Store(wal)
	tables += wal
	at := s.dir
	for {
		if _, err := os.Stat(at); err == nil || filepath.Dir(at) == at {
			break
		}
		at = filepath.Dir(at)
	}
	free, err := s.free(at)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", at, err)
	}
	if need := s.reserve + tables; free < need {
		return s.fullError(free, need, tables, 0)
	}
	return nil
}

// tableFileBytes sums the sizes of the table files (*.sst) in dir; 0 when
// dir does not exist.
func tableFileBytes(dir string) (int64, error) {
	return sumFiles(dir, ".sst", func(info fs.FileInfo) int64 { return info.Size() })
}

// walBytes sums what the memtables' write-ahead logs (*.mem) in dir hold:
// their allocated bytes, for Badger makes each at twice memTableSize with
// ftruncate and writes into it from the start; 0 when dir does not exist.
func walBytes(dir string) (int64, error) {
	return sumFiles(dir, ".mem", allocated)
}

// sumFiles sums size over the files in dir named with suffix.
func sumFiles(dir, suffix string, size func(fs.FileInfo) int64) (int64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // flushed or compacted away meanwhile
		}
		if err != nil {
			return 0, err
		}
		n += size(info)
	}
	return n, nil
}

// fullError is the ErrDiskFull of a refused write.
func (s *space) fullError(free, need, tables, inflight int64) error {
	return fmt.Errorf("%w: %s has %s free, less than the %s the store must keep free (a reserve of %s for Badger's own writes, %s for compacting its tables, %s for writes under way); free space on that filesystem, then reopen the world",
		ErrDiskFull, s.dir, sizeText(free), sizeText(need), sizeText(s.reserve), sizeText(tables), sizeText(inflight))
}

// noSpace gives err (a write the operating system refused) as ErrDiskFull
// when its cause is ENOSPC, with the free bytes now; other errors as they
// are.
func (s *space) noSpace(err error) error {
	if err == nil || s == nil || !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrDiskFull) {
		return err
	}
	free, ferr := s.free(s.dir)
	if ferr != nil {
		return fmt.Errorf("%w: %s: %w", ErrDiskFull, s.dir, err)
	}
	return fmt.Errorf("%w: %s has %s free: %w", ErrDiskFull, s.dir, sizeText(free), err)
}

// sizeText is n bytes as a person reads it, with the exact count.
func sizeText(n int64) string {
	const mib = 1 << 20
	switch {
	case n >= mib || n <= -mib:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/mib, n)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
