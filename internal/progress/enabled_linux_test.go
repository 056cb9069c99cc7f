package progress_test

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aos-kernel/aos/internal/progress"
)

// openPTY opens a pseudo-terminal and returns its terminal side, so Enabled
// can be shown a real terminal without the test needing one.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock %s: %v", ptmx.Name(), err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("number of %s: %v", ptmx.Name(), err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the terminal side of %s: %v", ptmx.Name(), err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

func TestEnabledOnATerminalUnlessJSON(t *testing.T) {
	pts := openPTY(t)
	if !progress.Enabled(pts, false) {
		t.Errorf("Enabled(%s, json=false) = false, want true", pts.Name())
	}
	if progress.Enabled(pts, true) {
		t.Errorf("Enabled(%s, json=true) = true, want false", pts.Name())
	}
}
