package badgerdb

import (
	"io/fs"
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
	size := int64(st.Frsize)
	if size == 0 {
		size = int64(st.Bsize)
	}
	return int64(st.Bavail) * size, nil
}

// allocated is the bytes the filesystem holds for a file: its 512-byte
// blocks, fewer than its size where it is sparse.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
