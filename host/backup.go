package host

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aos-kernel/aos/badgerdb"
)

// BackupFormat names the world backup format: a gzip stream holding one
// JSON line (backupHeader: the format and the world directory's own files)
// and then the store's consistent copy (badgerdb.Backup: every key and
// value of one read transaction, checksummed). `aosd backup` writes it, GET
// /v1/backup streams it, `aosd restore` reads it (docs/operations.md).
const BackupFormat = "aos-backup/1"

// backupHeader is a backup's first line.
type backupHeader struct {
	Format string `json:"format"`
	// Files are the world directory's own files by name (token,
	// executor.key, executors.json, ...), as they were when the backup
	// began.
	Files map[string][]byte `json:"files"`
}

// maxBackupHeader bounds a backup's first line.
const maxBackupHeader = 16 << 20

// BackupInfo is what `aosd backup` and `aosd restore` report (--json).
type BackupInfo struct {
	// File is the backup file; Bytes its size.
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
	// World is the restored world directory (restore only).
	World string `json:"world,omitempty"`
	// StoreKeys and StoreBytes count the store's keys and their bytes.
	StoreKeys  uint64 `json:"store_keys"`
	StoreBytes uint64 `json:"store_bytes"`
	// JournalFirst and JournalHeight are the journal's first and last seq
	// in the copy: every record acknowledged before the backup began is at
	// or below JournalHeight.
	JournalFirst  uint64 `json:"journal_first"`
	JournalHeight uint64 `json:"journal_height"`
	// Files are the world directory's files the backup holds.
	Files []string `json:"files"`
	// Daemon says the backup was taken through a running daemon (the world
	// kept serving); false: from the store of a world no daemon served.
	Daemon bool `json:"daemon"`
}

// worldFiles reads the world directory's own files: its regular files but
// daemon.json (which names a process, not the world) and temporary files.
// The store and the wasm cache are directories and are not among them.
func worldFiles(d Dir) (map[string][]byte, error) {
	ents, err := os.ReadDir(string(d))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() || !keptFile(e.Name()) {
			continue
		}
		b, err := os.ReadFile(d.Path(e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	return files, nil
}

// keptFile says whether a world directory's file belongs in a backup.
func keptFile(name string) bool {
	return name != DaemonInfoFile && !strings.HasSuffix(name, ".tmp") && name != StoreDir && name != WasmCacheDir &&
		filepath.Base(name) == name && filepath.IsLocal(name)
}

// WriteBackup writes a backup of the world in d, whose store is db, to w
// (BackupFormat). The world may be serving meanwhile.
func WriteBackup(d Dir, db *badgerdb.DB, w io.Writer) error {
	files, err := worldFiles(d)
	if err != nil {
		return fmt.Errorf("backup: read the world's files: %w", err)
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	hdr, err := json.Marshal(backupHeader{Format: BackupFormat, Files: files})
	if err != nil {
		return err
	}
	if _, err := zw.Write(append(hdr, '\n')); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	if _, err := db.Backup(zw); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}

// openBackup reads a backup's header from r and returns the reader
// positioned at its store copy (badgerdb.ReadBackup stops at its end).
func openBackup(r io.Reader) (backupHeader, *bufio.Reader, *gzip.Reader, error) {
	var hdr backupHeader
	zr, err := gzip.NewReader(r)
	if err != nil {
		return hdr, nil, nil, fmt.Errorf("%w: not gzip (%v)", ErrBadBackup, err)
	}
	br := bufio.NewReaderSize(zr, 1<<20)
	line, err := br.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) && len(line) < maxBackupHeader {
		var more []byte
		more, err = br.ReadSlice('\n')
		line = append(append([]byte(nil), line...), more...)
	}
	if err != nil {
		return hdr, nil, nil, fmt.Errorf("%w: no header line (%v)", ErrBadBackup, err)
	}
	if err := json.Unmarshal(line, &hdr); err != nil || hdr.Format != BackupFormat {
		return hdr, nil, nil, fmt.Errorf("%w: the header is not an %s header", ErrBadBackup, BackupFormat)
	}
	for name := range hdr.Files {
		if !keptFile(name) {
			return hdr, nil, nil, fmt.Errorf("%w: the header names a file %q that is not a world file", ErrBadBackup, name)
		}
	}
	return hdr, br, zr, nil
}

// endBackup checks that nothing follows the store copy and that the gzip
// stream is whole (its own checksum).
func endBackup(br *bufio.Reader, zr *gzip.Reader) error {
	if n, err := io.Copy(io.Discard, br); err != nil {
		return fmt.Errorf("%w: after the store's copy: %v", ErrBadBackup, err)
	} else if n > 0 {
		return fmt.Errorf("%w: %d bytes after the store's copy", ErrBadBackup, n)
	}
	if err := zr.Close(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadBackup, err)
	}
	return nil
}

// ErrBadBackup reports a file that is not a whole, intact world backup.
var ErrBadBackup = badgerdb.ErrBadBackup

func backupInfoOf(path string, size int64, hdr backupHeader, info badgerdb.BackupInfo) *BackupInfo {
	out := &BackupInfo{File: path, Bytes: size, StoreKeys: info.Keys, StoreBytes: info.Bytes,
		JournalFirst: info.First, JournalHeight: info.Height, Files: []string{}}
	for name := range hdr.Files {
		out.Files = append(out.Files, name)
	}
	slices.Sort(out.Files)
	return out
}

// ReadBackupFile reads and checks a whole backup file (its checksum
// included) and says what it holds.
func ReadBackupFile(path string) (*BackupInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hdr, br, zr, err := openBackup(f)
	var info badgerdb.BackupInfo
	if err == nil {
		info, err = badgerdb.ReadBackup(br, func(key, value []byte) error { return nil })
	}
	if err == nil {
		err = endBackup(br, zr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return backupInfoOf(path, st.Size(), hdr, info), nil
}

// Backup writes a backup of the world in d to the new file path: through
// its daemon when one serves it (the world keeps serving: the copy is one
// consistent read of its store), else from its store, opened alone. The
// file is written under a temporary name, synced, read back whole and
// checked, and only then linked at path; an existing path is refused.
func Backup(ctx context.Context, d Dir, opt ConnectOptions, path string) (*BackupInfo, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if err := refusePostgres(d, "backup"); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s exists: a backup never overwrites a file; choose a new one", path)
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s: the directory %s does not exist", path, filepath.Dir(path))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if found.client != nil {
		err = found.client.Backup(ctx, tmp)
	} else {
		var st *store
		if st, err = openStoreAt(d.Store(), opt.Store); err != nil {
			tmp.Close()
			return nil, found.openError(d, opt, err)
		}
		err = WriteBackup(d, st.bdb, tmp)
		err = errors.Join(err, st.close())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	info, err := ReadBackupFile(tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("backup: the file written does not read back: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	info.File, info.Daemon = path, found.client != nil
	return info, nil
}

// Restore makes a new world directory dir (which must not exist, or be
// empty) from the backup file path: the world's files and its store,
// restored in a temporary directory beside dir and renamed into place once
// whole, so a failed restore leaves nothing. The store opens as one closed
// cleanly at the backup's journal height. The restored world is the same
// world as the one backed up: the same journal, token and keys.
func Restore(path, dir string) (*BackupInfo, error) {
	if err := refusePostgres(Dir(dir), "restore"); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: restore makes a new world directory; choose a new or empty one", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("restore: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".restoring-*")
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	hdr, br, zr, err := openBackup(f)
	var restored badgerdb.BackupInfo
	if err == nil {
		restored, err = badgerdb.Restore(filepath.Join(tmp, StoreDir), br)
	}
	if err == nil {
		err = endBackup(br, zr)
	}
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", path, err)
	}
	for name, b := range hdr.Files {
		if err := writeNew(filepath.Join(tmp, name), b); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	done = true
	if err := syncDir(parent); err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	info := backupInfoOf(path, st.Size(), hdr, restored)
	info.World = dir
	return info, nil
}

// ErrPostgresBackup reports a backup or restore asked of a world on
// PostgreSQL: its database is backed up with PostgreSQL's own tools.
var ErrPostgresBackup = errors.New("host: a world on PostgreSQL is backed up with PostgreSQL's tools, not aosd backup")

// refusePostgres refuses what for a world on PostgreSQL, pointing at
// pg_dump and point-in-time recovery (docs/postgres.md).
func refusePostgres(d Dir, what string) error {
	pc, err := d.Postgres()
	if err != nil || pc == nil {
		return err
	}
	return fmt.Errorf("%w: %s: %s keeps the world's journal, objects, token and keys in %s; "+
		"back it up with pg_dump --schema=%s (or a base backup and WAL archive for point-in-time recovery) and restore with pg_restore or PostgreSQL's recovery; docs/postgres.md says how",
		ErrPostgresBackup, what, d, pc.where(), pc.schema())
}

// syncDir makes a directory's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
