package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aos-kernel/aos/examples/built"
)

// openPTY opens a pseudo-terminal: its controller side, read by the test,
// and its terminal side, given to aosd as stderr.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock %s: %v", ptmx.Name(), err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("number of %s: %v", ptmx.Name(), err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Skipf("open the terminal side of %s: %v", ptmx.Name(), err)
	}
	return ptmx, pts
}

// runOnTerminal runs an aosd command in this process with stderr on a
// terminal and returns its exit code and what it drew there.
func runOnTerminal(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ptmx, pts := openPTY(t)
	defer ptmx.Close()
	drawn := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, ptmx) // ends with EIO once the terminal side is closed
		drawn <- b.String()
	}()
	code := run(context.Background(), args, nil, io.Discard, pts)
	pts.Close()
	return code, <-drawn
}

// mustRun runs an aosd command in this process and fails the test unless
// it exits 0.
func mustRun(t *testing.T, args ...string) {
	t.Helper()
	var errb bytes.Buffer
	if code := run(context.Background(), args, nil, io.Discard, &errb); code != exitOK {
		t.Fatalf("aosd %v: exit %d\n%s", args, code, errb.String())
	}
}

// TestProgressOnTerminal: replay draws the bars of its replays on a
// terminal, and nothing with --json; an ordinary command's short replay
// at open draws nothing.
func TestProgressOnTerminal(t *testing.T) {
	w := filepath.Join(t.TempDir(), "world")
	mustRun(t, "init", "--world", w)
	mustRun(t, "apply", built.Path(t, "counter"), "--world", w)
	mustRun(t, "send", "com.example/CountEvent@1", `{"key":"a","by":1}`, "--world", w)
	mustRun(t, "snapshot", "--world", w)
	mustRun(t, "send", "com.example/CountEvent@1", `{"key":"a","by":2}`, "--world", w)

	code, drawn := runOnTerminal(t, "replay", "--verify", "--world", w)
	for _, label := range []string{"replay 3 / 3", "verify from genesis", "verify from snapshot"} {
		if code != exitOK || !strings.Contains(drawn, label) {
			t.Errorf("replay --verify on a terminal: exit %d, no %q in %q", code, label, drawn)
		}
	}
	for _, args := range [][]string{{"replay", "--verify", "--json"}, {"status"}} {
		if code, drawn := runOnTerminal(t, append(args, "--world", w)...); code != exitOK || drawn != "" {
			t.Errorf("aosd %v on a terminal: exit %d, drew %q; want nothing", args, code, drawn)
		}
	}
	mustRun(t, "journal", "check", "--world", w)
}
