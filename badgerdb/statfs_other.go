//go:build !linux

package badgerdb

import (
	"io/fs"
	"math"
)

// freeSpace is not measured where statfs(2) is not used: the guard admits
// every write there (docs/limits.md says so).
func freeSpace(string) (int64, error) { return math.MaxInt64, nil }

// dirFreeSpace is freeSpace, holding nothing.
func dirFreeSpace(string) (func(string) (int64, error), func(), error) {
	return freeSpace, func() {}, nil
}

// allocated is a file's size where its blocks are not read.
func allocated(info fs.FileInfo) int64 { return info.Size() }
