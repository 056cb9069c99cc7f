// Package tmpfs mounts small tmpfs filesystems for tests that must fill a
// disk for real: a store whose filesystem runs out of space, as no fault
// wrapper can imitate (Badger writes through mmap, and a full disk faults
// the write instead of failing it).
//
// Mounting needs root (CAP_SYS_ADMIN). Without it Mount skips the test with
// a loud reason on stderr, except under CI=true, where it fails the test:
// CI must run what this package guards. It imports nothing of this module.
//
// Its functions exist on Linux only.
package tmpfs
