package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
)

// shadowOut is the part of `aosd shadow --json` the test reads.
type shadowOut struct {
	Height uint64 `json:"height"`
	Start  uint64 `json:"start"`
	Apply  struct {
		Applied   bool              `json:"applied"`
		Unchanged bool              `json:"unchanged"`
		BlockedBy []json.RawMessage `json:"blocked_by"`
	} `json:"apply"`
	Inputs struct {
		Source    string `json:"source"`
		Events    int    `json:"events"`
		Submitted int    `json:"submitted"`
	} `json:"inputs"`
	Effects struct {
		Total    int            `json:"total"`
		ByEffect map[string]int `json:"by_effect"`
	} `json:"effects"`
	Pending struct {
		Total int `json:"total"`
	} `json:"pending"`
	Instances struct {
		Counts       map[string]int `json:"counts"`
		NotCompleted []struct {
			Status string `json:"status"`
			Reason string `json:"reason"`
			New    bool   `json:"new"`
		} `json:"not_completed"`
	} `json:"instances"`
	Allowlist []struct {
		Workflow string   `json:"workflow"`
		Removed  []string `json:"removed"`
	} `json:"allowlist"`
	Deltas []struct {
		Workflow string `json:"workflow"`
		Created  int    `json:"created"`
		Changed  int    `json:"changed"`
		Keys     []struct {
			Key    json.RawMessage `json:"key"`
			Change string          `json:"change"`
		} `json:"keys"`
	} `json:"deltas"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// aosdStdin runs aosd with stdin.
func aosdStdin(t *testing.T, world, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(aosdBin, append(args, "--world", world)...)
	cmd.Stdin = strings.NewReader(stdin)
	return runCmd(t, cmd)
}

// ordersWithoutTimer is a copy of the built orders example whose workflow
// may no longer set timers (its code still asks for one).
func ordersWithoutTimer(t *testing.T) string {
	t.Helper()
	src := built.Path(t, "orders")
	dst := filepath.Join(t.TempDir(), "orders")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "workflow.json" {
			s := string(b)
			b = []byte(strings.Replace(s, `, "sys/timer.set@1"]`, `]`, 1))
			cut = string(b) != s
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !cut {
		t.Fatal("the orders example's workflow.json changed shape; cannot drop the timer from effects_emitted")
	}
	return dst
}

// TestShadowCommand: with an order awaiting payment the world is not
// quiescent, so shadowing given events is refused (exit 3, blockers in the
// JSON); a window that starts before the order runs: under the same
// manifest it opens the charge and the timer, under one that no longer
// allows timers the order's step fails, and the table says so. Given
// events run on a quiescent counter world. No shadow changes the live
// world. Direct and through a daemon.
func TestShadowCommand(t *testing.T) {
	t.Parallel()
	withAndWithoutDaemon(t, func(t *testing.T, w string, d *daemon) {
		orders := built.Path(t, "orders")
		ok(t, w, "apply", orders)
		ok(t, w, "send", "com.example/OrderCreated@1", `{"order_id":"o1","amount_cents":500,"customer":"ann"}`)
		before := getStatus(t, w)
		if before.Inflight != 2 {
			t.Fatalf("live world: %+v, want the charge and the timer in flight", before)
		}

		r := aosdStdin(t, w, `{"schema":"com.example/OrderCreated@1","value":{"order_id":"o2","amount_cents":1,"customer":"bo"}}`+"\n",
			"shadow", orders, "--events", "-", "--json")
		var refused shadowOut
		if r.code != 3 || json.Unmarshal([]byte(r.stdout), &refused) != nil || len(refused.Apply.BlockedBy) != 3 || refused.Start != before.JournalHeight {
			t.Fatalf("shadow at the live height: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "not quiescent") {
			t.Fatalf("refusal message: %s", r.stderr)
		}

		var same shadowOut
		jsonOut(t, w, &same, "shadow", orders, "--window", "1")
		if !same.Apply.Unchanged || same.Start != 2 || same.Inputs.Source != "window" || same.Inputs.Submitted != 1 ||
			same.Effects.Total != 2 || same.Effects.ByEffect["com.example/payment.charge@1"] != 1 || same.Pending.Total != 2 ||
			same.Instances.Counts["waiting"] != 1 || len(same.Deltas) != 1 || same.Deltas[0].Created != 1 || string(same.Deltas[0].Keys[0].Key) != `"o1"` {
			t.Fatalf("shadow of the same manifest: %+v", same)
		}

		noTimer := ordersWithoutTimer(t)
		var cut shadowOut
		jsonOut(t, w, &cut, "shadow", noTimer, "--window", "1")
		if !cut.Apply.Applied || len(cut.Allowlist) != 1 || cut.Allowlist[0].Workflow != orderWF ||
			len(cut.Allowlist[0].Removed) != 1 || cut.Allowlist[0].Removed[0] != "sys/timer.set@1" ||
			cut.Effects.Total != 0 || cut.Instances.Counts["failed"] != 1 || len(cut.Instances.NotCompleted) != 1 ||
			!cut.Instances.NotCompleted[0].New || !strings.Contains(cut.Instances.NotCompleted[0].Reason, "sys/timer.set@1") {
			t.Fatalf("shadow without the timer: %+v", cut)
		}
		table := ok(t, w, "shadow", noTimer, "--window", "1")
		for _, want := range []string{"effect allowlists:", orderWF + ": - sys/timer.set@1", "failed", "new", "effects were observed, never executed"} {
			if !strings.Contains(table, want) {
				t.Errorf("table does not say %q:\n%s", want, table)
			}
		}
		if r := aosd(t, w, "shadow", orders, "--window", "1", "--events", "x.json"); r.code != 2 {
			t.Fatalf("--events with --window: exit %d, want 2 (usage)\n%s", r.code, r.stderr)
		}
		if after := getStatus(t, w); after.JournalHeight != before.JournalHeight || after.Inflight != 2 {
			t.Fatalf("the live world changed: %+v, was %+v", after, before)
		}
	})
	t.Run("events", func(t *testing.T) {
		w := newWorld(t)
		counter := built.Path(t, "counter")
		ok(t, w, "apply", counter)
		ok(t, w, "send", countEv, `{"key":"a","by":1}`)
		height := getStatus(t, w).JournalHeight
		f := filepath.Join(t.TempDir(), "events.json")
		if err := os.WriteFile(f, []byte(`[{"schema":"`+countEv+`","value":{"key":"a","by":2}},
			{"schema":"`+countEv+`","value":{"key":"b","by":1}}]`), 0o600); err != nil {
			t.Fatal(err)
		}
		var out shadowOut
		jsonOut(t, w, &out, "shadow", counter, "--events", f)
		if out.Start != height || out.Inputs.Source != "events" || out.Inputs.Submitted != 2 ||
			len(out.Deltas) != 1 || out.Deltas[0].Workflow != counterWF || out.Deltas[0].Created != 1 || out.Deltas[0].Changed != 1 {
			t.Fatalf("shadow with events: %+v", out)
		}
		if h := getStatus(t, w).JournalHeight; h != height {
			t.Fatalf("live height %d, was %d", h, height)
		}
	})
}
