package kernel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// TestScenarios runs testdata/scenarios/*.txt. Regenerate expectations with
// `go test ./kernel -run TestScenarios -rewrite` only when the change is understood.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		h := newHarness(t, 1, false)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

func arg(d *datadriven.TestData, name string) string {
	for _, a := range d.CmdArgs {
		if a.Key == name && len(a.Vals) > 0 {
			return a.Vals[0]
		}
	}
	return ""
}

func keyArg(t *testing.T, d *datadriven.TestData) []byte {
	k := arg(d, "key")
	if k == "" {
		return nil
	}
	v, err := schemas.DecodeJSON([]byte(k))
	if err != nil {
		v = k
	}
	return schemas.MustMarshal(v)
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	switch d.Cmd {
	case "apply":
		res, err := h.applyJSON(d.Input)
		if err != nil {
			var sb strings.Builder
			fmt.Fprintf(&sb, "error: %v\n", err)
			if res != nil {
				for _, b := range res.BlockedBy {
					fmt.Fprintf(&sb, "blocked by %s %s key=%s %s\n", b.Kind, b.Workflow, b.Key, b.Status)
				}
			}
			return sb.String()
		}
		return fmt.Sprintf("applied=%v unchanged=%v added=%v changed=%v removed=%v\n",
			res.Applied, res.Unchanged, res.Diff.Added, res.Diff.Changed, res.Diff.Removed)
	case "send":
		var sb strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			seq, err := h.send(arg(d, "schema"), line)
			if err != nil {
				fmt.Fprintf(&sb, "error: %v\n", err)
				continue
			}
			fmt.Fprintf(&sb, "seq %d\n", seq)
		}
		return sb.String()
	case "journal":
		out := h.journalLines(h.lastSeen + 1)
		h.lastSeen = h.w.Journal().Height()
		return out
	case "cells":
		rows, err := h.w.Cells(ctx, arg(d, "wf"), 0)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var sb strings.Builder
		for _, r := range rows {
			v, err := h.w.Cell(ctx, arg(d, "wf"), r.Key)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			fmt.Fprintf(&sb, "%s %s %s\n", records.KeyJSON(r.Key), r.Status, stateJSON(v))
		}
		return sb.String()
	case "cell":
		v, err := h.w.Cell(ctx, arg(d, "wf"), keyArg(t, d))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return fmt.Sprintf("status=%s state=%s reason=%q\n", v.Status, stateJSON(v), v.Reason)
	case "status":
		s, err := h.w.Status(ctx)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return fmt.Sprintf("height=%d quiescent=%v running=%d waiting=%d completed=%d failed=%d inflight=%d\n",
			s.JournalHeight, s.Quiescent, s.Instances.Running, s.Instances.Waiting, s.Instances.Completed, s.Instances.Failed, s.Inflight)
	case "trace":
		es, err := records.Trace(ctx, h.w.Journal(), arg(d, "wf"), keyArg(t, d))
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var sb strings.Builder
		for _, e := range es {
			sb.WriteString(shortHashes(traceLine(e)) + "\n")
		}
		return sb.String()
	case "reopen":
		h.reopen()
		s, err := h.w.Status(ctx)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return fmt.Sprintf("reopened height=%d\n", s.JournalHeight)
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

// stateJSON is a cell's state as JSON, as the daemon shows it: null for no
// state (or a state with no JSON form).
func stateJSON(v *kernel.CellView) string {
	if v.State == nil {
		return "null"
	}
	js, err := schemas.ToJSON(v.State)
	if err != nil {
		return "null"
	}
	return string(js)
}
