package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// TestSendParkedThenDelivered: against `aosd serve`, an event for a failed
// instance is journaled and parked, and `aosd send` says so (text and
// JSON); `failed ls`, `cells show` and `status` count it; `aosd failed skip`
// delivers the parked events in order after dropping the failed input, and
// `--drop-parked` drops them instead, saying how many. A restarted daemon
// replays all of it to the same cells.
func TestSendParkedThenDelivered(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := startDaemon(t, w)
	ok(t, w, "apply", buggyCounter(t))
	ok(t, w, "send", countEv, `{"key":"a","by":200}`) // past the cap: a fails
	out := ok(t, w, "send", countEv, `{"key":"a","by":1}`)
	if !strings.Contains(out, "journaled at seq") || !strings.Contains(out, `parked for workflow `+counterWF+` key "a"`) {
		t.Fatalf("send for a failed instance:\n%s", out)
	}
	var sent struct {
		Seq    uint64 `json:"seq"`
		Parked []struct {
			Workflow string          `json:"workflow"`
			Key      json.RawMessage `json:"key"`
		} `json:"parked"`
	}
	jsonOut(t, w, &sent, "send", countEv, `{"key":"a","by":2}`)
	if sent.Seq == 0 || len(sent.Parked) != 1 || sent.Parked[0].Workflow != counterWF || string(sent.Parked[0].Key) != `"a"` {
		t.Fatalf("send --json: %+v, want the seq and a parked for %s a", sent, counterWF)
	}
	if out := ok(t, w, "send", countEv, `{"key":"c","by":3}`); strings.Contains(out, "parked") {
		t.Fatalf("send for a healthy instance says parked:\n%s", out)
	}

	var fl failedList
	jsonOut(t, w, &fl, "failed", "ls")
	if len(fl.Failed) != 1 || fl.Failed[0].Parked != 2 || fl.Failed[0].Skipped != 0 {
		t.Fatalf("failed ls: %+v, want a with 2 parked", fl)
	}
	var cell struct {
		Status string `json:"status"`
		Parked int    `json:"parked"`
	}
	jsonOut(t, w, &cell, "cells", "show", counterWF, "a")
	if cell.Status != "failed" || cell.Parked != 2 {
		t.Fatalf("cells show a: %+v", cell)
	}
	if out := ok(t, w, "status"); !strings.Contains(out, "parked events") || !strings.Contains(out, "failed 1") {
		t.Fatalf("status:\n%s", out)
	}

	out = ok(t, w, "failed", "skip", counterWF, "a")
	if !strings.Contains(out, "2 parked event(s) delivered after it") || !strings.Contains(out, "status completed") {
		t.Fatalf("failed skip:\n%s", out)
	}
	var show struct {
		State map[string]int `json:"state"`
	}
	jsonOut(t, w, &show, "cells", "show", counterWF, "a")
	if show.State["count"] != 3 {
		t.Fatalf("a after the skip: %+v, want 1+2 (the failed 200 dropped, the parked events delivered)", show)
	}

	// --drop-parked: the one explicit way to lose them, counted.
	ok(t, w, "send", countEv, `{"key":"b","by":500}`)
	ok(t, w, "send", countEv, `{"key":"b","by":4}`)
	var rec struct {
		Delivered int `json:"delivered"`
		Dropped   int `json:"dropped"`
	}
	jsonOut(t, w, &rec, "failed", "skip", counterWF, "b", "--drop-parked")
	if rec.Dropped != 1 || rec.Delivered != 0 {
		t.Fatalf("skip --drop-parked: %+v, want 1 dropped", rec)
	}
	if out := ok(t, w, "journal", "--kind", "recover"); !strings.Contains(out, "2 parked delivered") || !strings.Contains(out, "1 parked dropped") {
		t.Fatalf("journal --kind recover:\n%s", out)
	}
	if r := aosd(t, w, "failed", "ls", "--drop-parked"); r.code != 2 {
		t.Fatalf("failed ls --drop-parked: exit %d, want a usage error", r.code)
	}

	d.stop(t, w)
	startDaemon(t, w)
	jsonOut(t, w, &show, "cells", "show", counterWF, "a")
	if show.State["count"] != 3 {
		t.Fatalf("a after a restart: %+v", show)
	}
	if r := aosd(t, w, "cells", "show", counterWF, "b"); r.code != 1 || !strings.Contains(r.stderr, "no such cell") {
		t.Fatalf("b after skip --drop-parked: exit %d %s%s, want no cell (its parked event dropped)", r.code, r.stdout, r.stderr)
	}
}

// TestModulesCommand: `aosd modules` lists the world's modules with their
// status (direct and through a daemon), and a resume of a module that is
// not set aside is refused (exit 1), journaling nothing.
func TestModulesCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		ok(t, w, "apply", built.Path(t, "counter"))
		var page struct {
			Modules []struct {
				Name      string   `json:"name"`
				Kind      string   `json:"kind"`
				Status    string   `json:"status"`
				Workflows []string `json:"workflows"`
				Waiting   int      `json:"waiting"`
			} `json:"modules"`
		}
		jsonOut(t, w, &page, "modules")
		if len(page.Modules) != 1 || page.Modules[0].Name != "com.example/counter@1" || page.Modules[0].Status != "running" ||
			len(page.Modules[0].Workflows) != 1 || page.Modules[0].Workflows[0] != counterWF {
			t.Fatalf("modules --json: %+v", page)
		}
		if out := ok(t, w, "modules", "ls"); !strings.Contains(out, "com.example/counter@1") || !strings.Contains(out, "1 module(s), 0 set aside") {
			t.Fatalf("modules:\n%s", out)
		}
		height := getStatus(t, w).JournalHeight
		if r := aosd(t, w, "modules", "resume", "com.example/counter@1"); r.code != 1 || !strings.Contains(r.stderr, "not set aside") {
			t.Fatalf("resume of a running module: exit %d %s", r.code, r.stderr)
		}
		if r := aosd(t, w, "modules", "resume"); r.code != 2 {
			t.Fatalf("resume without a module: exit %d, want 2", r.code)
		}
		if h := getStatus(t, w).JournalHeight; h != height {
			t.Fatalf("a refused resume journaled %d records", h-height)
		}
	})
}
