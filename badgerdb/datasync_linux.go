package badgerdb

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data, and its size when that changed, to the device:
// fdatasync(2), which skips the inode's times.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
