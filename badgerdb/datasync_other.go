//go:build !linux

package badgerdb

import "os"

// datasync is f.Sync (fsync(2), F_FULLFSYNC on macOS) where fdatasync(2) is
// not used.
func datasync(f *os.File) error { return f.Sync() }
