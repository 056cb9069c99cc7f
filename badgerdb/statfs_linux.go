package badgerdb

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// freeSpace is statfs(2)'s available blocks of the filesystem holding dir:
// what a process without the root-reserved blocks may still allocate.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return available(&st), nil
}

// dirFreeSpace is freeSpace read with fstatfs(2) on dir, opened once:
// a statfs(2) by path looks the path up each time and costs about twice
// as much. done closes the directory.
func dirFreeSpace(dir string) (free func(string) (int64, error), done func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	fd := int(f.Fd())
	free = func(string) (int64, error) {
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil {
			return 0, err
		}
		return available(&st), nil
	}
	return free, func() { f.Close() }, nil
}

// available is what statfs counts free for an unprivileged process.
func available(st *unix.Statfs_t) int64 {
	size := int64(st.Frsize)
	if size == 0 {
		size = int64(st.Bsize)
	}
	return int64(st.Bavail) * size
}

// allocated is the bytes the filesystem holds for a file: its 512-byte
// blocks, fewer than its size where it is sparse.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
