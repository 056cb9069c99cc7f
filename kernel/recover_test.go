package kernel_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

const counterWF = "com.test/counter@1"

// fixedCounterManifest is counterManifest with the counter's module bound
// to fixed code under a new identity: by 13 counts like any other number.
var fixedCounterManifest = strings.Replace(counterManifest,
	`"builtin":"test/counter","identity":"test/counter@1"`,
	`"builtin":"test/counter_fixed","identity":"test/counter_fixed@1"`, 1)

// auditOnlyManifest drops the counter workflow (its failed instances stay).
const auditOnlyManifest = `[
 {"$kind":"defschema","name":"com.test/Total@1","schema":{"type":"object","properties":{"key":{"type":"string"},"count":{"type":"integer"}},"required":["key","count"]}},
 {"$kind":"defschema","name":"com.test/AuditState@1","schema":{"type":"object","properties":{"seen":{"type":"integer"}}}},
 {"$kind":"defmodule","name":"com.test/audit_mod@1","runtime":{"kind":"builtin","builtin":"test/audit","identity":"test/audit@1"}},
 {"$kind":"defworkflow","name":"com.test/audit@1","state":"com.test/AuditState@1","event":"com.test/Total@1","effects_emitted":[],"impl":{"module":"com.test/audit_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[{"event":"com.test/Total@1","workflow":"com.test/audit@1"}]}}
]`

// newRecoverHarness is an on-disk world with the counter applied and the
// fixed counter code linked (so a reopened world can replay it).
func newRecoverHarness(t *testing.T, extra func(*kernel.Config)) *harness {
	t.Helper()
	h := newHarnessWith(t, 41, true, func(h *harness) {
		h.builtins.MustRegister("test/counter_fixed", "test/counter_fixed@1", "step", func(in *modules.Input) (*modules.Output, error) {
			s, ev := stateCount(in.State), decodeCount(in.Event.Value)
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": s.Count + ev.By})}, nil
		})
		h.extra = extra
	})
	mustApply(t, h, counterManifest)
	return h
}

func mustSend(t *testing.T, h *harness, key string, by int) uint64 {
	t.Helper()
	seqs, err := h.w.Submit(context.Background(), countEvent(key, by))
	if err != nil {
		t.Fatal(err)
	}
	return seqs[0]
}

func ckey(k string) []byte { return schemas.MustMarshal(k) }

// failedOf is the failed instance of the counter at key.
func failedOf(t *testing.T, h *harness, wf, key string) kernel.FailedInfo {
	t.Helper()
	var k []byte
	if key != "" {
		k = ckey(key)
	}
	fi, err := h.w.FailedInstance(context.Background(), wf, k)
	if err != nil {
		t.Fatalf("failed instance %s %s: %v", wf, key, err)
	}
	return *fi
}

// countOf is the counter's count at key, or -1 when it has no cell.
func countOf(t *testing.T, h *harness, key string) int {
	t.Helper()
	v, err := h.w.Cell(context.Background(), counterWF, ckey(key))
	if errors.Is(err, kernel.ErrNoCell) || (err == nil && !v.Exists) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Count int `json:"count"`
	}
	if err := schemas.UnmarshalTrusted(v.State, &c); err != nil {
		t.Fatalf("state %s: %v", stateJSON(v), err)
	}
	return c.Count
}

// reopenSame reopens the world (replaying the journal) and requires that
// replay journaled nothing new.
func reopenSame(t *testing.T, h *harness) {
	t.Helper()
	before := allRecords(t, h.w)
	h.reopen()
	after := allRecords(t, h.w)
	if len(after) != len(before) {
		t.Fatalf("reopen journaled %d records", len(after)-len(before))
	}
}

func recoverRecs(t *testing.T, h *harness) []records.RecoverRec {
	t.Helper()
	var out []records.RecoverRec
	for _, r := range recordsOf(t, h.w, journal.KindRecover) {
		var rr records.RecoverRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			t.Fatal(err)
		}
		out = append(out, rr)
	}
	return out
}

// stepConsuming is the step record that consumed input seq.
func stepConsuming(t *testing.T, h *harness, input uint64) *records.StepRec {
	t.Helper()
	for _, r := range recordsOf(t, h.w, journal.KindStep) {
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			t.Fatal(err)
		}
		if s.Input == input {
			return &s
		}
	}
	return nil
}

// TestRecoverRetryAfterFix: the operator's path out of a bug. An input that
// makes the step fault fails the instance; a later event is parked for it;
// a retry with the same code fails again with a new fault (the parked event
// parked again behind it, and the old fault seq is then stale); after
// applying fixed code a retry delivers the failed input to it and then the
// parked event, the steps succeed, the retried step consumes the recover
// record, and a reopened world replays all of it to the same state.
func TestRecoverRetryAfterFix(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 3)
	bad := mustSend(t, h, "k", 13)
	parked := mustSend(t, h, "k", 2) // parked: the instance is failed
	mustSend(t, h, "other", 4)

	fi := failedOf(t, h, counterWF, "k")
	if fi.Input != bad || fi.Class != "business" || fi.Skipped != 0 || fi.Parked != 1 || !fi.Retryable ||
		fi.InputSchema != "com.test/CountEvent@1" || !strings.Contains(fi.Reason, "unlucky") || string(records.KeyJSON(fi.Key)) != `"k"` {
		t.Fatalf("failed info %+v: want input %d, business, 1 parked, retryable", fi, bad)
	}

	// Retry with the buggy code: it fails again, with a new fault.
	res, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverRetry, fi.FaultSeq)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != kernel.StatusFailed || res.FaultSeq <= res.Seq || !strings.Contains(res.Reason, "unlucky") {
		t.Fatalf("retry with the old code: %+v, want failed again after the recover record", res)
	}
	again := failedOf(t, h, counterWF, "k")
	if again.FaultSeq != res.FaultSeq || again.Input != res.Seq || again.Skipped != 0 || again.Parked != 1 || res.Delivered != 1 {
		t.Fatalf("after the failed retry: %+v (result %+v); want fault %d on input %d (the recover record), the 1 parked event parked again",
			again, res, res.FaultSeq, res.Seq)
	}
	height := h.w.Journal().Height()
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverRetry, fi.FaultSeq); !errors.Is(err, kernel.ErrStaleFault) {
		t.Fatalf("recover with the old fault seq: %v, want ErrStaleFault", err)
	} else if !strings.Contains(err.Error(), fmt.Sprint(res.FaultSeq)) {
		t.Errorf("stale refusal %q does not name the current fault %d", err, res.FaultSeq)
	}
	if h.w.Journal().Height() != height {
		t.Fatal("a stale recover journaled something")
	}

	// Fix the code (failed instances do not block apply), then retry.
	mustApply(t, h, fixedCounterManifest)
	res2, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverRetry, res.FaultSeq)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Status != kernel.StatusCompleted || res2.FaultSeq != 0 || res2.Delivered != 1 || res2.Dropped != 0 {
		t.Fatalf("retry with the fixed code: %+v", res2)
	}
	if got := countOf(t, h, "k"); got != 18 {
		t.Fatalf("count after the retry %d, want 3+13+2 (the parked +2 delivered after the retried input)", got)
	}
	if s := stepConsuming(t, h, res2.Seq); s == nil || s.Workflow != counterWF || !bytes.Equal(s.Key, ckey("k")) {
		t.Fatalf("no step of k consumes the recover record %d (%+v)", res2.Seq, s)
	}
	if s := stepConsuming(t, h, parked); s == nil || !bytes.Equal(s.Key, ckey("k")) {
		t.Fatalf("no step of k consumes the parked event %d (%+v)", parked, s)
	}
	recs := recoverRecs(t, h)
	if len(recs) != 2 || recs[1].Action != kernel.RecoverRetry || recs[1].Fault != res.FaultSeq || recs[1].Input != res.Seq || recs[1].Parked != 1 ||
		recs[0].Fault != fi.FaultSeq || recs[0].Input != bad || recs[0].Skipped != 0 || recs[0].Parked != 1 || recs[0].DropParked || recs[1].DropParked {
		t.Fatalf("recover records %+v", recs)
	}
	mustSend(t, h, "k", 1)
	if _, err := h.w.FailedInstance(ctx, counterWF, ckey("k")); !errors.Is(err, kernel.ErrNotFailed) {
		t.Fatalf("FailedInstance of a recovered instance: %v", err)
	}

	reopenSame(t, h)
	if got := countOf(t, h, "k"); got != 19 {
		t.Fatalf("count after replay %d, want 19", got)
	}
	if got := countOf(t, h, "other"); got != 4 {
		t.Fatalf("other after replay %d", got)
	}
	rows, next, err := h.w.Failed(ctx, "", 0, "")
	if err != nil || len(rows) != 0 || next != "" {
		t.Fatalf("failed after replay: %v %q %v", rows, next, err)
	}
	tr, err := records.Trace(ctx, h.w.Journal(), counterWF, ckey("k"))
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range tr {
		if e.Kind == journal.KindRecover {
			actions = append(actions, fmt.Sprintf("%s@%d", e.Action, e.Fault))
		}
	}
	if want := []string{fmt.Sprintf("retry@%d", fi.FaultSeq), fmt.Sprintf("retry@%d", res.FaultSeq)}; fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("trace recovers %v, want %v", actions, want)
	}
}

// TestRecoverResetAndSkip: reset deletes the cell and the next event starts
// from no state; skip keeps the state; both discard the failed input, and
// both survive replay.
func TestRecoverResetAndSkip(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	for _, k := range []string{"r", "s"} {
		mustSend(t, h, k, 3)
		mustSend(t, h, k, 13)
	}
	r, s := failedOf(t, h, counterWF, "r"), failedOf(t, h, counterWF, "s")
	if res, err := h.w.Recover(ctx, counterWF, ckey("r"), kernel.RecoverReset, r.FaultSeq); err != nil || res.Status != kernel.StatusCompleted {
		t.Fatalf("reset: %+v %v", res, err)
	}
	if got := countOf(t, h, "r"); got != -1 {
		t.Fatalf("after reset the cell holds %d, want no cell", got)
	}
	if _, err := h.w.Recover(ctx, counterWF, ckey("s"), kernel.RecoverSkip, s.FaultSeq); err != nil {
		t.Fatalf("skip: %v", err)
	}
	if got := countOf(t, h, "s"); got != 3 {
		t.Fatalf("after skip the count is %d, want the state kept (3)", got)
	}
	mustSend(t, h, "r", 2)
	mustSend(t, h, "s", 2)
	if r, s := countOf(t, h, "r"), countOf(t, h, "s"); r != 2 || s != 5 {
		t.Fatalf("after the next event: r %d (want 2, from no state), s %d (want 5)", r, s)
	}
	reopenSame(t, h)
	if r, s := countOf(t, h, "r"), countOf(t, h, "s"); r != 2 || s != 5 {
		t.Fatalf("after replay: r %d, s %d", r, s)
	}
	st, err := h.w.Status(ctx)
	if err != nil || st.Instances.Failed != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
}

// TestRecoverRefused: every recover that does not answer an instance's
// current fault with a known action is refused with a clear error and
// journals nothing; a retry the current manifest cannot run is refused
// while skip still works.
func TestRecoverRefused(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "ok", 1)
	mustSend(t, h, "k", 13)
	fi := failedOf(t, h, counterWF, "k")
	cases := []struct {
		name, wf, key, action string
		fault                 uint64
		want                  error
		says                  string
	}{
		{"bad action", counterWF, "k", "restart", fi.FaultSeq, kernel.ErrInvalid, `unknown recover action "restart"`},
		{"no fault seq", counterWF, "k", kernel.RecoverRetry, 0, kernel.ErrInvalid, "must name the fault"},
		{"stale fault seq", counterWF, "k", kernel.RecoverRetry, fi.FaultSeq - 1, kernel.ErrStaleFault, fmt.Sprintf("seq %d, not %d", fi.FaultSeq, fi.FaultSeq-1)},
		{"later fault seq", counterWF, "k", kernel.RecoverReset, fi.FaultSeq + 5, kernel.ErrStaleFault, "not"},
		{"not failed", counterWF, "ok", kernel.RecoverRetry, fi.FaultSeq, kernel.ErrNotFailed, `key "ok" is completed`},
		{"unknown key", counterWF, "nobody", kernel.RecoverSkip, fi.FaultSeq, kernel.ErrNotFailed, "is completed"},
		{"unknown workflow", "com.test/nope@1", "k", kernel.RecoverRetry, fi.FaultSeq, kernel.ErrInvalid, "unknown workflow"},
	}
	height := h.w.Journal().Height()
	for _, tc := range cases {
		_, err := h.w.Recover(ctx, tc.wf, ckey(tc.key), tc.action, tc.fault)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	if h.w.Journal().Height() != height {
		t.Fatalf("refused recovers journaled %d records", h.w.Journal().Height()-height)
	}

	// The workflow leaves the manifest: its failed instance is still listed,
	// cannot be retried, and can be skipped.
	mustApply(t, h, auditOnlyManifest)
	fi = failedOf(t, h, counterWF, "k")
	if fi.Retryable || !strings.Contains(fi.RetryBlocked, "not in the current manifest") {
		t.Fatalf("failed info of a removed workflow %+v", fi)
	}
	height = h.w.Journal().Height()
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverRetry, fi.FaultSeq); !errors.Is(err, kernel.ErrNotRetryable) ||
		!strings.Contains(err.Error(), "reset or skip") {
		t.Fatalf("retry of a removed workflow: %v", err)
	}
	if h.w.Journal().Height() != height {
		t.Fatal("a refused retry journaled something")
	}
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); err != nil {
		t.Fatalf("skip of a removed workflow's instance: %v", err)
	}
	// Duplicate: the same recover again finds nothing failed.
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); !errors.Is(err, kernel.ErrInvalid) {
		t.Fatalf("duplicate recover: %v, want refused (the workflow is gone and nothing of it is failed)", err)
	}
	if _, _, err := h.w.Failed(ctx, counterWF, 0, ""); !errors.Is(err, kernel.ErrInvalid) {
		t.Fatalf("listing a workflow that is gone and has no failed instance: %v", err)
	}
	reopenSame(t, h)
}

// TestRecoverDuplicate: the second of two identical recovers is refused as
// not failed; the first one's record is the only one.
func TestRecoverDuplicate(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 13)
	fi := failedOf(t, h, counterWF, "k")
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); err != nil {
		t.Fatal(err)
	}
	height := h.w.Journal().Height()
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); !errors.Is(err, kernel.ErrNotFailed) {
		t.Fatalf("second recover: %v, want ErrNotFailed", err)
	}
	if h.w.Journal().Height() != height || len(recoverRecs(t, h)) != 1 {
		t.Fatal("the duplicate recover journaled something")
	}
}

// TestRecoverEnvironmentalRetry: a step the wall-clock limit stopped is an
// environmental fault that replay adopts without running; its input is kept
// all the same, so a retry (once the host behaves) runs it, and a reopened
// world replays the adopted fault, the recover and the retried step.
func TestRecoverEnvironmentalRetry(t *testing.T) {
	ctx := context.Background()
	f := &fakeWasm{hang: 7}
	h := newWasmHarness(t, f)
	applyDir(t, h, wasmCounterManifest(t, "counter code"))
	mustSend(t, h, "slow", 7)
	fi := failedOf(t, h, counterWF, "slow")
	if fi.Class != kernel.FaultEnvironmental || !fi.Retryable {
		t.Fatalf("failed info %+v", fi)
	}
	reopenSame(t, h) // the fault is adopted by replay: the input must still be kept
	if again := failedOf(t, h, counterWF, "slow"); !reflect.DeepEqual(again, fi) {
		t.Fatalf("after replay %+v, live %+v", again, fi)
	}
	f.mu.Lock()
	f.hang = 0
	f.mu.Unlock()
	res, err := h.w.Recover(ctx, counterWF, ckey("slow"), kernel.RecoverRetry, fi.FaultSeq)
	if err != nil || res.Status != kernel.StatusCompleted {
		t.Fatalf("retry: %+v %v", res, err)
	}
	if v := cellOf(t, h, "slow"); stateJSON(v) != `{"count":7}` {
		t.Fatalf("state after retry %s", stateJSON(v))
	}
	reopenSame(t, h)
	if v := cellOf(t, h, "slow"); stateJSON(v) != `{"count":7}` || v.Status != kernel.StatusCompleted {
		t.Fatalf("after replay: %s %s", v.Status, stateJSON(v))
	}
}

// TestRecoverBudgetRetry: an instance cut off by the work budget keeps the
// input it was cut off at (replay rebuilds it from the budget fault), the
// rest of its mailbox is parked behind it, and a retry under a larger
// budget delivers that input and then the parked events. A retry under the
// budget that cut it off is cut off again, as bounded as the first run.
func TestRecoverBudgetRetry(t *testing.T) {
	ctx := context.Background()
	steps := 10 // what the world asks for when it opens
	h := newRecoverHarness(t, func(c *kernel.Config) { c.Limits = kernel.Limits{MaxStepsPerInput: steps, MaxDomainEvents: 100} })
	// by 17 emits 100 Total events to the unkeyed audit: 1 counter step
	// and 9 audit steps fit the budget.
	mustSend(t, h, "k", 17)
	const audit = "com.test/audit@1"
	fi := failedOf(t, h, audit, "")
	if fi.Class != kernel.FaultBudget || fi.Skipped != 0 || fi.Parked != 90 || !fi.Retryable || string(records.KeyJSON(fi.Key)) != "null" {
		t.Fatalf("failed info %+v: want a budget fault with 90 parked", fi)
	}
	reopenSame(t, h)
	if again := failedOf(t, h, audit, ""); !reflect.DeepEqual(again, fi) {
		t.Fatalf("after replay %+v, live %+v", again, fi)
	}
	// Under the same budget the retry runs 10 steps and is cut off again,
	// the rest parked again: a retry is one more bounded input.
	res, err := h.w.Recover(ctx, audit, nil, kernel.RecoverRetry, fi.FaultSeq)
	if err != nil || res.Status != kernel.StatusFailed || res.Delivered != 90 {
		t.Fatalf("retry under the same budget: %+v %v", res, err)
	}
	fi = failedOf(t, h, audit, "")
	if fi.Class != kernel.FaultBudget || fi.Parked != 80 {
		t.Fatalf("after the retry under the same budget: %+v, want a budget fault with 80 parked", fi)
	}
	steps = 1000
	if _, err := h.w.SetLimits(ctx, kernel.Limits{MaxStepsPerInput: steps}); err != nil {
		t.Fatal(err)
	}
	res, err = h.w.Recover(ctx, audit, nil, kernel.RecoverRetry, fi.FaultSeq)
	if err != nil || res.Status != kernel.StatusCompleted || res.Delivered != 80 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	v, err := h.w.Cell(ctx, audit, nil)
	if err != nil || stateJSON(v) != `{"seen":100}` {
		t.Fatalf("audit after retry: %s %v, want all 100 Total events seen", stateJSON(v), err)
	}
	reopenSame(t, h)
	if v, err := h.w.Cell(ctx, audit, nil); err != nil || stateJSON(v) != `{"seen":100}` {
		t.Fatalf("audit after replay: %+v %v", v, err)
	}
}

// twinManifest routes every count event to two keyed workflows on the same
// code, so one bad event fails two instances.
var twinManifest = strings.Replace(counterManifest,
	` {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[`,
	` {"$kind":"defworkflow","name":"com.test/twin@1","state":"com.test/CountState@1","event":"com.test/CountEvent@1","key_schema":"com.test/Key@1","effects_emitted":[],"impl":{"module":"com.test/counter_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/counter","routing":{"subscriptions":[
   {"event":"com.test/CountEvent@1","workflow":"com.test/twin@1","key_field":"key"},`, 1)

// listAll pages through Failed with limit.
func listAll(t *testing.T, h *harness, wf string, limit int, between func(page int)) []kernel.FailedInfo {
	t.Helper()
	var out []kernel.FailedInfo
	after := ""
	for page := 0; ; page++ {
		rows, next, err := h.w.Failed(context.Background(), wf, limit, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) > limit {
			t.Fatalf("page of %d rows, limit %d", len(rows), limit)
		}
		out = append(out, rows...)
		if next == "" {
			return out
		}
		if len(rows) != limit {
			t.Fatalf("a page of %d rows (limit %d) has a next page", len(rows), limit)
		}
		if between != nil {
			between(page)
		}
		after = next
	}
}

// TestFailedPaging: the failed instances page in (workflow, key) order,
// each once, across pages of any size, filtered by workflow or not, and a
// recover between pages does not disturb the cursor.
func TestFailedPaging(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustApply(t, h, twinManifest)
	const n = 11
	for i := range n {
		mustSend(t, h, fmt.Sprintf("k%02d", i), 13)
		mustSend(t, h, fmt.Sprintf("fine%02d", i), 1)
	}
	var want []string
	for _, wf := range []string{counterWF, "com.test/twin@1"} {
		for i := range n {
			want = append(want, fmt.Sprintf(`%s "k%02d"`, wf, i))
		}
	}
	names := func(rows []kernel.FailedInfo) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Workflow+" "+string(records.KeyJSON(r.Key)))
		}
		return out
	}
	for _, limit := range []int{1, 3, 4, 22, 100} {
		if got := names(listAll(t, h, "", limit, nil)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d:\n got %v\nwant %v", limit, got, want)
		}
		if got := names(listAll(t, h, "com.test/twin@1", limit, nil)); fmt.Sprint(got) != fmt.Sprint(want[n:]) {
			t.Fatalf("twin, limit %d:\n got %v\nwant %v", limit, got, want[n:])
		}
		if got := names(listAll(t, h, counterWF, limit, nil)); fmt.Sprint(got) != fmt.Sprint(want[:n]) {
			t.Fatalf("counter, limit %d:\n got %v\nwant %v", limit, got, want[:n])
		}
	}
	if st, _ := h.w.Status(ctx); st.Instances.Failed != 2*n {
		t.Fatalf("status counts %d failed, want %d", st.Instances.Failed, 2*n)
	}

	// Recover the first row of the next page, and one already listed,
	// between pages: the listing goes on after the cursor.
	got := names(listAll(t, h, "", 5, func(page int) {
		if page != 0 {
			return
		}
		for _, k := range []string{"k00", "k05"} {
			fi := failedOf(t, h, counterWF, k)
			if _, err := h.w.Recover(ctx, counterWF, ckey(k), kernel.RecoverSkip, fi.FaultSeq); err != nil {
				t.Fatal(err)
			}
		}
	}))
	wantAfter := append(append([]string{}, want[:5]...), want[6:]...) // k05 was recovered before its page
	if fmt.Sprint(got) != fmt.Sprint(wantAfter) {
		t.Fatalf("with recovers between pages:\n got %v\nwant %v", got, wantAfter)
	}

	for _, bad := range []struct {
		limit int
		after string
	}{{-1, ""}, {0, "!!"}, {0, ""}} {
		wf := ""
		if bad.limit == 0 && bad.after == "" {
			wf = "com.test/nope@1"
		}
		if _, _, err := h.w.Failed(ctx, wf, bad.limit, bad.after); !errors.Is(err, kernel.ErrInvalid) {
			t.Errorf("Failed(%q, %d, %q): %v, want ErrInvalid", wf, bad.limit, bad.after, err)
		}
	}
	reopenSame(t, h)
	if got := names(listAll(t, h, "", 7, nil)); len(got) != 2*n-2 {
		t.Fatalf("after replay %d failed, want %d", len(got), 2*n-2)
	}
}

// TestRecoverOrderWorld: an instance waiting on an effect is not failed, so
// a recover of it is refused; an instance failed by a receipt its workflow
// cannot take has no delivered input to retry (refused, reset or skip
// instead), and a reset of it survives replay.
func TestRecoverOrderWorld(t *testing.T) {
	ctx := context.Background()
	h := newReceiptFaultHarness(t, false)
	const orderWF = "com.test/order@1"
	rejectOrder(t, h, "o1")
	createOrder(t, h, "o-wait")
	fi := failedOf(t, h, orderWF, "o1")
	if fi.Retryable || !strings.Contains(fi.RetryBlocked, "never reached the instance") || fi.InputSchema != "" {
		t.Fatalf("failed info %+v: want not retryable", fi)
	}
	height := h.w.Journal().Height()
	if _, err := h.w.Recover(ctx, orderWF, ckey("o-wait"), kernel.RecoverSkip, fi.FaultSeq); !errors.Is(err, kernel.ErrNotFailed) ||
		!strings.Contains(err.Error(), "is waiting") {
		t.Fatalf("recover of a waiting instance: %v, want ErrNotFailed saying it is waiting", err)
	}
	if _, err := h.w.Recover(ctx, orderWF, ckey("o1"), kernel.RecoverRetry, fi.FaultSeq); !errors.Is(err, kernel.ErrNotRetryable) {
		t.Fatalf("retry of an undelivered receipt: %v, want ErrNotRetryable", err)
	}
	if h.w.Journal().Height() != height {
		t.Fatal("refused recovers journaled something")
	}
	if _, err := h.w.Recover(ctx, orderWF, ckey("o1"), kernel.RecoverReset, fi.FaultSeq); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.Cell(ctx, orderWF, ckey("o1")); !errors.Is(err, kernel.ErrNoCell) {
		t.Fatalf("cell after reset: %v, want none", err)
	}
	reopenSame(t, h)
	if _, err := h.w.Cell(ctx, orderWF, ckey("o1")); !errors.Is(err, kernel.ErrNoCell) {
		t.Fatalf("cell after replay: %v, want none", err)
	}
	if v, err := h.w.Cell(ctx, orderWF, ckey("o-wait")); err != nil || v.Status != kernel.StatusWaiting {
		t.Fatalf("o-wait after replay: %+v %v", v, err)
	}
}

// TestRecoverLeavesIntentsSettled: the intents an instance had in flight
// when it failed were settled then; a recover does not reopen them, so
// their receipts are dropped.
func TestRecoverLeavesIntentsSettled(t *testing.T) {
	ctx := context.Background()
	kr := receipts.NewKeyring()
	if err := kr.Add("payments", executorKey.Public().(ed25519.PublicKey), paymentEffects); err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, 9, true, func(h *harness) {
		// orderStep, but a second Created with amount 13 faults.
		h.builtins.MustRegister("test/order", "test/order@1", "step", func(in *modules.Input) (*modules.Output, error) {
			ev := decodeMap(nil, in.Event.Value)
			if v, ok := ev["$value"].(map[string]any); ok && ev["$tag"] == "Created" && in.State != nil && toInt(v["amount"]) == 13 {
				return nil, errors.New("amount 13 refused")
			}
			return orderStep(in)
		})
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
	mustApply(t, h, orderManifest)
	createOrder(t, h, "o2")
	its, err := h.w.PendingIntents(ctx)
	if err != nil || len(its) != 1 {
		t.Fatalf("pending %v %v", its, err)
	}
	if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/OrderCreated@1", JSON: []byte(`{"order_id":"o2","amount":13}`)}); err != nil {
		t.Fatal(err)
	}
	fi := failedOf(t, h, "com.test/order@1", "o2")
	if p, _ := h.w.PendingIntents(ctx); len(p) != 0 {
		t.Fatalf("intents still pending after the fault: %v", p)
	}
	res, err := h.w.Recover(ctx, "com.test/order@1", ckey("o2"), kernel.RecoverSkip, fi.FaultSeq)
	if err != nil || res.Status != kernel.StatusCompleted {
		t.Fatalf("skip: %+v %v", res, err)
	}
	if p, _ := h.w.PendingIntents(ctx); len(p) != 0 {
		t.Fatalf("the recover reopened intents: %v", p)
	}
	if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(its[0], receipts.StatusOK, map[string]any{"charge_id": "late"})); !errors.Is(err, kernel.ErrReceiptDropped) {
		t.Fatalf("receipt for an intent settled at the failure: %v, want dropped", err)
	}
	reopenSame(t, h)
}

// TestFailedLimits: a page holds DefaultFailedLimit rows when no limit is
// given, and at most MaxFailedLimit whatever the limit asked.
func TestFailedLimits(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 5, false)
	mustApply(t, h, counterManifest)
	evs := make([]kernel.Event, kernel.MaxFailedLimit+1)
	for i := range evs {
		evs[i] = countEvent(fmt.Sprintf("k%05d", i), 13)
	}
	if _, err := h.w.Submit(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	rows, next, err := h.w.Failed(ctx, "", 0, "")
	if err != nil || len(rows) != kernel.DefaultFailedLimit || next == "" {
		t.Fatalf("default page: %d rows, next %q, %v", len(rows), next, err)
	}
	rows, next, err = h.w.Failed(ctx, "", 5*kernel.MaxFailedLimit, "")
	if err != nil || len(rows) != kernel.MaxFailedLimit || next == "" {
		t.Fatalf("big page: %d rows, next %q, %v", len(rows), next, err)
	}
	rows, next, err = h.w.Failed(ctx, "", 0, next)
	if err != nil || len(rows) != 1 || next != "" || string(records.KeyJSON(rows[0].Key)) != fmt.Sprintf(`"k%05d"`, kernel.MaxFailedLimit) {
		t.Fatalf("last page: %+v, next %q, %v", rows, next, err)
	}
}
