//go:build !linux

package badgerdb

// releaseMapped does nothing where madvise(MADV_PAGEOUT) is not available.
func releaseMapped(string) int64 { return 0 }
