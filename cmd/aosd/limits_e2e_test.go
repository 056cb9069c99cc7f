package main_test

import (
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// TestLimitsCommand: `aosd limits set` journals a change that status and
// `aosd limits` show, with and without a daemon, that survives a restart;
// bad input is a usage error that journals nothing.
func TestLimitsCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		var before struct {
			Limits map[string]int `json:"limits"`
		}
		jsonOut(t, w, &before, "limits")
		if before.Limits["max_steps_per_input"] != 10_000 || before.Limits["max_effects"] != 16 {
			t.Fatalf("default limits: %v", before.Limits)
		}
		height := getStatus(t, w).JournalHeight
		for _, bad := range [][]string{
			{"limits", "set", "max_stepz_per_input=5"},
			{"limits", "set", "max_effects=-1"},
			{"limits", "set", "max_effects"},
			{"limits", "set"},
			{"limits", "frobnicate"},
		} {
			if r := aosd(t, w, bad...); r.code != 2 {
				t.Fatalf("aosd %v: exit %d, want 2 (usage)\n%s%s", bad, r.code, r.stdout, r.stderr)
			}
		}
		if h := getStatus(t, w).JournalHeight; h != height {
			t.Fatalf("refused changes journaled %d records", h-height)
		}
		out := ok(t, w, "limits", "set", "max_steps_per_input=123", "max_cascade_depth=9")
		if !strings.Contains(out, "journaled at seq") || !strings.Contains(out, "123") {
			t.Fatalf("limits set printed:\n%s", out)
		}
		if out := ok(t, w, "limits", "set", "max_steps_per_input=123"); !strings.Contains(out, "limits unchanged") {
			t.Fatalf("same limits again:\n%s", out)
		}
		if d != nil { // the change is in the world, not in the daemon's memory
			d.stop(t, w)
			startDaemon(t, w)
		}
		var st struct {
			JournalHeight uint64         `json:"journal_height"`
			Limits        map[string]int `json:"limits"`
		}
		jsonOut(t, w, &st, "status")
		if st.Limits["max_steps_per_input"] != 123 || st.Limits["max_cascade_depth"] != 9 || st.Limits["max_effects"] != 16 {
			t.Fatalf("status limits after restart: %v", st.Limits)
		}
		if st.JournalHeight != height+1 {
			t.Fatalf("height %d, want one config record after %d", st.JournalHeight, height)
		}
	})
}
