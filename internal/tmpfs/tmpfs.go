//go:build linux

package tmpfs

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes on a new directory under t.TempDir()
// and returns the directory. It is unmounted when the test ends (lazily if
// a process still holds a file in it).
func Mount(t testing.TB, size int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		msg := fmt.Sprintf("NO TMPFS: mounting a %d-byte tmpfs on %s failed (%v); this test needs root (CAP_SYS_ADMIN) to fill a real filesystem, and it did NOT run", size, dir, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: this is a failure)")
		}
		fmt.Fprintln(os.Stderr, "!!!", msg)
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
	return dir
}

// Resize changes the size of the tmpfs mounted on dir (mount -o remount):
// growing it frees space without touching a file. A tmpfs cannot shrink
// below what its files use.
func Resize(t testing.TB, dir string, size int64) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("resize the tmpfs on %s to %d bytes: %v", dir, size, err)
	}
}

// Free is the bytes still free on the filesystem holding dir.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	n, err := FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// FreeBytes is Free for goroutines other than the test's.
func FreeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
