package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// buggyCounter is a copy of the counter example whose state schema caps
// the count at 100: an event that takes a count past it makes the step's
// state fail validation, a business fault.
func buggyCounter(t *testing.T) string {
	t.Helper()
	src := built.Path(t, "counter")
	dst := filepath.Join(t.TempDir(), "counter")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	capped := false
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "schemas.json" {
			s := string(b)
			b = []byte(strings.Replace(s, `"count": {"type": "integer"}`, `"count": {"type": "integer", "maximum": 100}`, 1))
			capped = string(b) != s
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !capped {
		t.Fatal("the counter example's schemas.json changed shape; cannot cap the count")
	}
	return dst
}

type failedRow struct {
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	Input     uint64          `json:"input"`
	FaultSeq  uint64          `json:"fault_seq"`
	Reason    string          `json:"reason"`
	Class     string          `json:"class"`
	Skipped   uint64          `json:"skipped"`
	Parked    uint64          `json:"parked"`
	Retryable bool            `json:"retryable"`
}

type failedList struct {
	Failed []failedRow `json:"failed"`
	Next   string      `json:"next"`
}

// TestFailedCommand: a workflow faults on an input; `aosd failed ls` lists
// the failed instances (paged); a retry with the same code fails again and
// exits 1; a recover naming an old fault is refused (exit 1, nothing
// journaled); after applying fixed code a retry succeeds and reset deletes
// a cell; the timeline and the journal show the recovers. Direct (every
// command replays the journal) and through a daemon (restarted at the end).
func TestFailedCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", buggyCounter(t))
		ok(t, w, "send", countEv, `{"key":"a","by":5}`)
		ok(t, w, "send", countEv, `{"key":"a","by":200}`)
		ok(t, w, "send", countEv, `{"key":"a","by":1}`) // parked: a is failed
		ok(t, w, "send", countEv, `{"key":"b","by":300}`)

		var all failedList
		jsonOut(t, w, &all, "failed", "ls")
		if len(all.Failed) != 2 || all.Next != "" {
			t.Fatalf("failed ls: %+v", all)
		}
		a := all.Failed[0]
		if a.Workflow != counterWF || string(a.Key) != `"a"` || a.Class != "business" || a.Skipped != 0 || a.Parked != 1 || !a.Retryable ||
			!strings.Contains(a.Reason, "com.example/CounterState@1") {
			t.Fatalf("failed row a: %+v", a)
		}
		if out := ok(t, w, "failed", counterWF); !strings.Contains(out, "FAULT") || !strings.Contains(out, "2 failed instance(s)") {
			t.Fatalf("failed ls (text):\n%s", out)
		}
		var p1, p2 failedList
		jsonOut(t, w, &p1, "failed", "ls", "--limit", "1")
		jsonOut(t, w, &p2, "failed", "ls", "--limit", "1", "--after", p1.Next)
		if len(p1.Failed) != 1 || p1.Next == "" || len(p2.Failed) != 1 || p2.Next != "" || string(p2.Failed[0].Key) != `"b"` {
			t.Fatalf("pages: %+v then %+v", p1, p2)
		}
		if out := ok(t, w, "failed", "ls", "--limit", "1"); !strings.Contains(out, "--after "+p1.Next) {
			t.Fatalf("a page with more does not say how to go on:\n%s", out)
		}

		// Retry with the same code: journaled, failed again, exit 1.
		r := aosd(t, w, "failed", "retry", counterWF, "a")
		if r.code != 1 || !strings.Contains(r.stderr, "failed again") || !strings.Contains(r.stdout, "status failed") {
			t.Fatalf("retry with the buggy code: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		height := getStatus(t, w).JournalHeight
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"failed", "retry", counterWF, "a", "--fault", fmt.Sprint(a.FaultSeq)}, 1, fmt.Sprintf("not %d", a.FaultSeq)},
			{[]string{"failed", "skip", counterWF, "nobody"}, 1, "is not failed"},
			{[]string{"failed", "reset", counterWF}, 1, "give a key"},
			{[]string{"failed", "reset", "com.example/nope@1", "a"}, 1, "unknown workflow"},
			{[]string{"failed", "retry"}, 2, "WORKFLOW"},
			{[]string{"failed", "ls", counterWF, "extra"}, 2, "ls [WORKFLOW]"},
			{[]string{"failed", "ls", "--limit", "-1"}, 2, "negative"},
		} {
			r := aosd(t, w, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Errorf("aosd %v: exit %d, stderr %q; want exit %d and %q", c.args, r.code, r.stderr, c.code, c.want)
			}
		}
		if h := getStatus(t, w).JournalHeight; h != height {
			t.Fatalf("refused recovers journaled %d records", h-height)
		}

		ok(t, w, "apply", built.Path(t, "counter")) // the fix; failed instances do not block it
		if out := ok(t, w, "failed", "retry", counterWF, "a"); !strings.Contains(out, "status completed") ||
			!strings.Contains(out, "1 parked event(s) delivered after it") {
			t.Fatalf("retry with the fixed code:\n%s", out)
		}
		if out := ok(t, w, "failed", "reset", counterWF, `"b"`); !strings.Contains(out, "reset of workflow") {
			t.Fatalf("reset:\n%s", out)
		}
		jsonOut(t, w, &all, "failed", "ls")
		if len(all.Failed) != 0 {
			t.Fatalf("failed after recovering: %+v", all)
		}
		if d != nil { // the recovers are in the journal: a restarted daemon replays them
			d.stop(t, w)
			startDaemon(t, w)
		}
		var show struct {
			State map[string]int `json:"state"`
		}
		jsonOut(t, w, &show, "cells", "show", counterWF, "a")
		if show.State["count"] != 206 {
			t.Fatalf("a after the retry: %+v, want 5+200+1 (the parked +1 delivered after the retried input)", show)
		}
		if r := aosd(t, w, "cells", "show", counterWF, "b"); r.code != 1 || !strings.Contains(r.stderr, "no such cell") {
			t.Fatalf("b after the reset: exit %d %s", r.code, r.stderr)
		}
		if out := ok(t, w, "trace", counterWF, "a"); !strings.Contains(out, "recover") || !strings.Contains(out, "retry of fault") {
			t.Fatalf("trace of a:\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(ok(t, w, "journal", "--json", "--kind", "recover")), "\n")
		if len(lines) != 3 {
			t.Fatalf("journal --kind recover: %d lines\n%s", len(lines), lines)
		}
		if out := ok(t, w, "journal", "--kind", "recover"); !strings.Contains(out, "reset") {
			t.Fatalf("journal --kind recover:\n%s", out)
		}
	})
}
