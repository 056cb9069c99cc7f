package badgerdb_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aos-kernel/aos/journal/journaltest"
)

// crashDirEnv tells a re-executed test binary to act as the crash child and
// where the world directory is.
const crashDirEnv = "AOS_JOURNAL_CRASH_DIR"

// TestJournalCrashChild is the child half of TestJournalSurvivesKill. It
// appends frames forever and prints "ack <seq>" after each Append returns,
// i.e. after the frame is durable. The parent SIGKILLs it.
func TestJournalCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestJournalSurvivesKill")
	}
	db := openDisk(t, dir)
	defer db.Close()
	j := db.Journal()
	fmt.Printf("ready %d\n", j.Height())
	rng := rand.New(rand.NewPCG(j.Height(), 7))
	for i := 0; i < 1_000_000; i++ {
		n := 1 + rng.IntN(50)
		if err := j.Append(journaltest.Recs(j.Height()+1, n)); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(3)
		}
		fmt.Printf("ack %d\n", j.Height())
	}
}

// TestJournalSurvivesKill kills a child process mid-append several times and
// checks after each kill that every acknowledged seq is present, gap-free,
// with the right contents, and that the journal keeps going from there.
func TestJournalSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	seed := uint64(20261123)
	rng := rand.New(rand.NewPCG(seed, seed))
	var acked uint64
	for round := range 4 {
		wantAcks := 20 + rng.IntN(200)
		acked = max(acked, runAndKill(t, dir, wantAcks, acked))

		db := openDisk(t, dir)
		j := db.Journal()
		h := j.Height()
		if h < acked {
			db.Close()
			t.Fatalf("round %d: height after kill = %d, but seq %d was acknowledged", round, h, acked)
		}
		journaltest.CheckRun(t, journaltest.ReadAll(t, j, 1), 1, h)
		t.Logf("round %d: killed after %d acks; acked through %d, recovered height %d", round, wantAcks, acked, h)
		acked = h // everything present now is the base the next child continues from
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runAndKill starts the child, reads wantAcks acknowledgements, SIGKILLs it
// and returns the highest acknowledged seq.
func runAndKill(t *testing.T, dir string, wantAcks int, base uint64) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestJournalCrashChild$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait() // killed: its error is expected
	}()
	sc := bufio.NewScanner(out)
	var last uint64
	acks := 0
	for acks < wantAcks && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ready "):
			h, _ := strconv.ParseUint(strings.TrimPrefix(line, "ready "), 10, 64)
			if h != base {
				t.Fatalf("child opened at height %d, parent saw %d", h, base)
			}
		case strings.HasPrefix(line, "ack "):
			seq, err := strconv.ParseUint(strings.TrimPrefix(line, "ack "), 10, 64)
			if err != nil || seq <= last {
				t.Fatalf("child printed %q after ack %d", line, last)
			}
			last = seq
			acks++
		default:
			t.Fatalf("child: %s", line)
		}
	}
	if acks < wantAcks {
		t.Fatalf("child stopped after %d acks (want %d): %v", acks, wantAcks, sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Lines already in the pipe were acknowledged too. Drain to EOF before
	// Wait, which closes the pipe.
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			if seq, err := strconv.ParseUint(s, 10, 64); err == nil && seq > last {
				last = seq
			}
		}
	}
	return last
}
