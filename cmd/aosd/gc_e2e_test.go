package main_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// TestGCCommand: `aosd gc` collects beside the world (directly and through
// a daemon) and every cell still reads back; bad flags are usage errors.
func TestGCCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		for _, k := range []string{"a", "b", "c"} {
			ok(t, w, "send", "com.example/CountEvent@1", `{"key":"`+k+`","by":2}`)
		}
		before := ok(t, w, "cells", "ls", "com.example/counter.step@1", "--json")
		for _, bad := range [][]string{
			{"gc", "--keep-snapshots", "0"},
			{"gc", "--archive", filepath.Join(t.TempDir(), "a.aosj")},
			{"gc", "extra"},
		} {
			if r := aosd(t, w, bad...); r.code != 2 {
				t.Fatalf("aosd %v: exit %d, want 2 (usage)\n%s%s", bad, r.code, r.stdout, r.stderr)
			}
		}
		var res struct {
			Marked        int      `json:"marked"`
			KeptObjects   int      `json:"kept_objects"`
			FreedObjects  int      `json:"freed_objects"`
			SnapshotsKept []uint64 `json:"snapshots_kept"`
			Journal       *struct {
				Records int `json:"records"`
			} `json:"journal"`
		}
		jsonOut(t, w, &res, "gc")
		if res.Marked == 0 || res.KeptObjects < res.Marked || res.Journal != nil || res.SnapshotsKept == nil {
			t.Fatalf("gc: %+v", res)
		}
		// Nothing is garbage the second time round.
		jsonOut(t, w, &res, "gc", "--drop-journal")
		if res.FreedObjects != 0 || res.Journal == nil || res.Journal.Records != 0 {
			t.Fatalf("second gc (no snapshot to drop before): %+v", res)
		}
		if after := ok(t, w, "cells", "ls", "com.example/counter.step@1", "--json"); after != before {
			t.Fatalf("cells changed across gc:\n%s\n%s", before, after)
		}
		if out := ok(t, w, "gc"); !strings.Contains(out, "freed") {
			t.Fatalf("gc table:\n%s", out)
		}
	})
}
