package badgerdb

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// pageoutBroken is set once madvise(MADV_PAGEOUT) was refused as unknown
// (a kernel before Linux 5.4): releaseMapped stops trying.
var pageoutBroken atomic.Bool

// releaseMapped asks the kernel to reclaim the resident pages of every file
// under dir (a path with symlinks resolved, ending in a separator) that this
// process has mapped, and returns how many bytes of mappings it advised.
//
// Badger maps its tables, value log and memtable logs (MAP_SHARED), and
// reads them through the mappings, so every page a long read touched stays
// in the process's resident set, as file-backed memory, until memory runs
// short: a read of the whole journal (a verification, an export, a replay
// from genesis) held resident pages in proportion to the journal's bytes.
// MADV_PAGEOUT reclaims such pages (clean ones are dropped, dirty ones
// written back first) without changing what any later read of the mapping
// returns; on anonymous memory it only swaps, so it is harmless even for a
// range that was unmapped and reused between reading /proc/self/maps and
// the call. A later read of a reclaimed page reads it from the file again.
func releaseMapped(dir string) int64 {
	if dir == "" || pageoutBroken.Load() {
		return 0
	}
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	var advised int64
	prefix := []byte(dir)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 || !bytes.HasPrefix(f[5], prefix) {
			continue
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		start, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		end, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_PAGEOUT)
		if errno == unix.EINVAL {
			pageoutBroken.Store(true)
			return advised
		}
		if errno == 0 {
			advised += int64(end - start)
		}
	}
	return advised
}
