package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// stepSeq is the seq of the step record that consumed input, or 0.
func stepSeq(t *testing.T, h *harness, input uint64) uint64 {
	t.Helper()
	for _, r := range recordsOf(t, h.w, journal.KindStep) {
		var s records.StepRec
		if err := schemas.UnmarshalTrusted(r.Body, &s); err != nil {
			t.Fatal(err)
		}
		if s.Input == input {
			return r.Seq
		}
	}
	return 0
}

// inOrder requires that the inputs were each consumed by a step, after
// the record at after, in the order given.
func inOrder(t *testing.T, h *harness, after uint64, inputs ...uint64) {
	t.Helper()
	prev := after
	for _, in := range inputs {
		s := stepSeq(t, h, in)
		if s == 0 {
			t.Fatalf("input %d was never stepped", in)
		}
		if s <= prev {
			t.Fatalf("input %d was stepped at seq %d, not after %d: the parked events were not delivered in order after %d", in, s, prev, after)
		}
		prev = s
	}
}

// ingestOne sends one counter event and returns what became of it.
func ingestOne(t *testing.T, h *harness, key string, by int) kernel.Ingested {
	t.Helper()
	res, err := h.w.Ingest(context.Background(), countEvent(key, by))
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// parkedFor is the answer's parked list for one counter instance.
func parkedFor(key string) []kernel.Target {
	return []kernel.Target{{Workflow: counterWF, Key: ckey(key)}}
}

// TestParkedEventsSurviveRestartAndSnapshot: events for a failed instance
// are journaled and parked for it, in journal order (the answer says so);
// the parked list survives a restart from a snapshot and from genesis (which
// recomputes the snapshot, parked events included, byte for byte); and a
// retry under fixed code delivers the failed input, then the parked events,
// in the order they were journaled.
func TestParkedEventsSurviveRestartAndSnapshot(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 3)
	mustSend(t, h, "k", 13)
	var parked []uint64
	for _, by := range []int{1, 2, 3} {
		res := ingestOne(t, h, "k", by)
		if !reflect.DeepEqual(res.Parked, parkedFor("k")) {
			t.Fatalf("event for the failed instance: parked %+v, want the instance", res.Parked)
		}
		parked = append(parked, res.Seq)
	}
	if res := ingestOne(t, h, "other", 1); res.Parked != nil {
		t.Fatalf("event for a healthy instance parked for %+v", res.Parked)
	}
	fi := failedOf(t, h, counterWF, "k")
	if fi.Parked != 3 || fi.Skipped != 0 || fi.ParkedBlocked != "" {
		t.Fatalf("failed info %+v: want 3 parked, none skipped", fi)
	}
	if cv := cellOf(t, h, "k"); cv.Parked != 3 || cv.Status != kernel.StatusFailed {
		t.Fatalf("cell %+v: want failed with 3 parked", cv)
	}
	if st, err := h.w.Status(ctx); err != nil || st.Parked != 3 || st.Instances.Failed != 1 {
		t.Fatalf("status %+v %v: want 3 parked events, 1 failed", st, err)
	}

	if _, err := h.w.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	parked = append(parked, ingestOne(t, h, "k", 4).Seq)
	reopenSame(t, h)
	if h.w.OpenInfo().Snapshot == 0 {
		t.Fatal("reopened without the snapshot")
	}
	if fi := failedOf(t, h, counterWF, "k"); fi.Parked != 4 {
		t.Fatalf("after reopening from the snapshot: %+v, want 4 parked", fi)
	}
	h.extra = func(c *kernel.Config) { c.FromGenesis, c.VerifySnapshots = true, true }
	reopenSame(t, h)
	if n := h.w.VerifiedSnapshots(); n != 1 {
		t.Fatalf("replay from genesis verified %d snapshots, want the 1 (parked events included)", n)
	}
	if fi := failedOf(t, h, counterWF, "k"); fi.Parked != 4 {
		t.Fatalf("after replay from genesis: %+v, want 4 parked", fi)
	}
	h.extra = nil

	mustApply(t, h, fixedCounterManifest)
	res, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverRetry, fi.FaultSeq)
	if err != nil || res.Status != kernel.StatusCompleted || res.Delivered != 4 || res.Dropped != 0 {
		t.Fatalf("retry: %+v %v, want completed with 4 delivered", res, err)
	}
	if got := countOf(t, h, "k"); got != 3+13+1+2+3+4 {
		t.Fatalf("count %d after the retry, want %d: every parked event delivered", got, 3+13+1+2+3+4)
	}
	inOrder(t, h, res.Seq, append([]uint64{res.Seq}, parked...)...)
	if cv := cellOf(t, h, "k"); cv.Parked != 0 {
		t.Fatalf("after the retry %d events are still parked", cv.Parked)
	}
	reopenSame(t, h)
	if got := countOf(t, h, "k"); got != 26 {
		t.Fatalf("count after replay %d, want 26", got)
	}
}

// TestParkedDeliveredAfterSkipAndReset: skip keeps the state and delivers
// the parked events after dropping the failed input; reset deletes the cell
// and delivers them to a fresh one; both in journal order, and replay agrees.
func TestParkedDeliveredAfterSkipAndReset(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	parked := map[string][]uint64{}
	for _, k := range []string{"r", "s"} {
		mustSend(t, h, k, 3)
		mustSend(t, h, k, 13)
		parked[k] = []uint64{mustSend(t, h, k, 2), mustSend(t, h, k, 5)}
	}
	r, s := failedOf(t, h, counterWF, "r"), failedOf(t, h, counterWF, "s")
	rr, err := h.w.Recover(ctx, counterWF, ckey("r"), kernel.RecoverReset, r.FaultSeq)
	if err != nil || rr.Delivered != 2 || rr.Status != kernel.StatusCompleted {
		t.Fatalf("reset: %+v %v", rr, err)
	}
	sr, err := h.w.Recover(ctx, counterWF, ckey("s"), kernel.RecoverSkip, s.FaultSeq)
	if err != nil || sr.Delivered != 2 || sr.Status != kernel.StatusCompleted {
		t.Fatalf("skip: %+v %v", sr, err)
	}
	if got := countOf(t, h, "r"); got != 2+5 {
		t.Fatalf("after reset r counts %d, want 7 (the parked events on a fresh cell)", got)
	}
	if got := countOf(t, h, "s"); got != 3+2+5 {
		t.Fatalf("after skip s counts %d, want 10 (state kept, failed input dropped, parked delivered)", got)
	}
	inOrder(t, h, rr.Seq, parked["r"]...)
	inOrder(t, h, sr.Seq, parked["s"]...)
	for _, rec := range recoverRecs(t, h) {
		if rec.Parked != 2 || rec.DropParked || rec.Skipped != 0 {
			t.Fatalf("recover record %+v: want 2 parked, not dropped", rec)
		}
	}
	reopenSame(t, h)
	if r, s := countOf(t, h, "r"), countOf(t, h, "s"); r != 7 || s != 10 {
		t.Fatalf("after replay: r %d, s %d", r, s)
	}
}

// TestParkedDroppedOnlyByDropParked: the only way parked events go is an
// operator's explicit drop, which the answer and the recover record count;
// they are never stepped, and the instance takes later events as usual.
func TestParkedDroppedOnlyByDropParked(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 3)
	mustSend(t, h, "k", 13)
	p1, p2 := mustSend(t, h, "k", 2), mustSend(t, h, "k", 4)
	fi := failedOf(t, h, counterWF, "k")
	res, err := h.w.RecoverInstance(ctx, kernel.RecoverRequest{Workflow: counterWF, Key: ckey("k"), Action: kernel.RecoverSkip,
		FaultSeq: fi.FaultSeq, DropParked: true})
	if err != nil || res.Dropped != 2 || res.Delivered != 0 || res.Status != kernel.StatusCompleted {
		t.Fatalf("skip dropping the parked events: %+v %v, want 2 dropped", res, err)
	}
	if got := countOf(t, h, "k"); got != 3 {
		t.Fatalf("count %d, want 3: the dropped events were stepped", got)
	}
	for _, p := range []uint64{p1, p2} {
		if s := stepSeq(t, h, p); s != 0 {
			t.Fatalf("dropped event %d was stepped at %d", p, s)
		}
	}
	recs := recoverRecs(t, h)
	if len(recs) != 1 || recs[0].Parked != 2 || !recs[0].DropParked {
		t.Fatalf("recover records %+v: want one saying 2 parked, dropped", recs)
	}
	mustSend(t, h, "k", 1)
	if got := countOf(t, h, "k"); got != 4 {
		t.Fatalf("count %d after the next event, want 4", got)
	}
	reopenSame(t, h)
	if got := countOf(t, h, "k"); got != 4 {
		t.Fatalf("count after replay %d, want 4", got)
	}
}

// TestParkedBoundRefusesIngress: ingress that would park more than
// max_parked_per_instance events for an instance is refused with a clear
// error naming the instance, its fault and the bound, and journals nothing;
// in a batch the events before it stand. Once the instance is recovered
// (its parked events delivered) it takes events again.
func TestParkedBoundRefusesIngress(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, func(c *kernel.Config) { c.Limits = kernel.Limits{MaxParkedPerInstance: 2} })
	mustSend(t, h, "k", 13)
	mustSend(t, h, "k", 1)
	mustSend(t, h, "k", 2)
	fi := failedOf(t, h, counterWF, "k")
	height := h.w.Journal().Height()
	_, err := h.w.Submit(ctx, countEvent("k", 3))
	if !errors.Is(err, kernel.ErrParkedFull) {
		t.Fatalf("a third parked event: %v, want ErrParkedFull", err)
	}
	for _, want := range []string{counterWF, `key "k"`, fmt.Sprintf("fault at seq %d", fi.FaultSeq), "already holds 2 parked events",
		"max_parked_per_instance 2", "nothing was journaled", "aosd failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if h.w.Journal().Height() != height {
		t.Fatal("the refused event journaled something")
	}
	seqs, err := h.w.Submit(ctx, countEvent("o", 1), countEvent("k", 3))
	if !errors.Is(err, kernel.ErrParkedFull) || !strings.Contains(err.Error(), "event 1:") || len(seqs) != 1 {
		t.Fatalf("batch: %v %v, want the first journaled and the second refused as event 1", seqs, err)
	}
	if got := countOf(t, h, "o"); got != 1 {
		t.Fatalf("the batch's first event: count %d, want 1", got)
	}
	if res, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); err != nil || res.Delivered != 2 {
		t.Fatalf("skip: %+v %v", res, err)
	}
	if res := ingestOne(t, h, "k", 3); res.Parked != nil {
		t.Fatalf("after the recover the event was parked for %+v", res.Parked)
	}
	if got := countOf(t, h, "k"); got != 1+2+3 {
		t.Fatalf("count %d, want 6", got)
	}
	reopenSame(t, h)
}

// flakyAuditManifest is the counter world with an audit that fails on a
// Total for the key "bad".
var flakyAuditManifest = strings.Replace(counterManifest,
	`"builtin":"test/audit","identity":"test/audit@1"`, `"builtin":"test/audit_flaky","identity":"test/audit_flaky@1"`, 1)

// TestEmittedEventForFullParkedFaultsEmitter: an event a step emits cannot
// be refused at ingress. When it would park one more than the bound for a
// failed target, the emitting step faults instead (the same fault on every
// replay: the parked counts are the journal's), naming the target and the
// bound; its input is kept, so once the target is recovered a retry of the
// emitter delivers it and nothing was lost.
func TestEmittedEventForFullParkedFaultsEmitter(t *testing.T) {
	ctx := context.Background()
	h := newHarnessWith(t, 43, true, func(h *harness) {
		h.builtins.MustRegister("test/audit_flaky", "test/audit_flaky@1", "step", func(in *modules.Input) (*modules.Output, error) {
			if decodeCount(in.Event.Value).Key == "bad" {
				return nil, errors.New("audit refuses bad totals")
			}
			var n int64
			if in.State != nil {
				n = toInt(decodeMap(nil, in.State)["seen"])
			}
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"seen": n + 1})}, nil
		})
		h.extra = func(c *kernel.Config) { c.Limits = kernel.Limits{MaxParkedPerInstance: 2} }
	})
	mustApply(t, h, flakyAuditManifest)
	const audit = "com.test/audit@1"
	mustSend(t, h, "bad", 10) // its Total fails the audit
	af := failedOf(t, h, audit, "")
	mustSend(t, h, "b", 10) // Totals parked for the audit: 2, the bound
	mustSend(t, h, "c", 10)
	if fi := failedOf(t, h, audit, ""); fi.Parked != 2 {
		t.Fatalf("audit %+v, want 2 parked", fi)
	}
	mustSend(t, h, "d", 10) // its Total would be the third
	df := failedOf(t, h, counterWF, "d")
	for _, want := range []string{"domain event 0 (com.test/Total@1)", audit, fmt.Sprintf("fault at seq %d", af.FaultSeq),
		"already holds 2 parked events", "max_parked_per_instance 2"} {
		if !strings.Contains(df.Reason, want) {
			t.Errorf("the emitter's fault %q does not say %q", df.Reason, want)
		}
	}
	if df.Class != "business" || !df.Retryable {
		t.Fatalf("emitter's fault %+v: want a retryable business fault", df)
	}
	if got := countOf(t, h, "d"); got != -1 {
		t.Fatalf("the faulted step's state was kept: count %d", got)
	}
	reopenSame(t, h) // replay reproduces the fault from the journal's parked counts

	if res, err := h.w.Recover(ctx, audit, nil, kernel.RecoverSkip, af.FaultSeq); err != nil || res.Delivered != 2 {
		t.Fatalf("skip the audit's bad total: %+v %v", res, err)
	}
	if res, err := h.w.Recover(ctx, counterWF, ckey("d"), kernel.RecoverRetry, df.FaultSeq); err != nil || res.Status != kernel.StatusCompleted {
		t.Fatalf("retry the emitter: %+v %v", res, err)
	}
	v, err := h.w.Cell(ctx, audit, nil)
	if err != nil || stateJSON(v) != `{"seen":3}` || countOf(t, h, "d") != 10 {
		t.Fatalf("after the recovers: audit %s %v, d %d; want every good Total seen (3) and d counted", stateJSON(v), err, countOf(t, h, "d"))
	}
	reopenSame(t, h)
}

// TestParkedRefusedWhenUndeliverable: parked events the current manifest
// cannot take (the workflow left it) make a recover that would deliver them
// refused, journaling nothing, until the operator drops them.
func TestParkedRefusedWhenUndeliverable(t *testing.T) {
	ctx := context.Background()
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 13)
	mustSend(t, h, "k", 2)
	mustApply(t, h, auditOnlyManifest)
	fi := failedOf(t, h, counterWF, "k")
	if fi.Parked != 1 || !strings.Contains(fi.ParkedBlocked, "not in the current manifest") {
		t.Fatalf("failed info %+v: want its parked event blocked", fi)
	}
	height := h.w.Journal().Height()
	_, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq)
	if !errors.Is(err, kernel.ErrParkedUndeliverable) || !strings.Contains(err.Error(), "drop") {
		t.Fatalf("skip delivering an undeliverable parked event: %v, want ErrParkedUndeliverable saying to drop them", err)
	}
	if h.w.Journal().Height() != height {
		t.Fatal("the refused recover journaled something")
	}
	res, err := h.w.RecoverInstance(ctx, kernel.RecoverRequest{Workflow: counterWF, Key: ckey("k"), Action: kernel.RecoverSkip,
		FaultSeq: fi.FaultSeq, DropParked: true})
	if err != nil || res.Dropped != 1 {
		t.Fatalf("skip dropping them: %+v %v", res, err)
	}
	reopenSame(t, h)
}

// TestLegacyJournalSkipsFailedEvents: a journal written before parking (its
// limits have no max_parked_per_instance) replays as it ran: an event for a
// failed instance was skipped, and its recover says so. Opening it journals
// the current limits once, with parking on, and from there events for a
// failed instance are parked; the journal check accepts both halves.
func TestLegacyJournalSkipsFailedEvents(t *testing.T) {
	ctx := context.Background()
	// Today's kernel writes the journal; it is then made the one a kernel
	// before parking wrote: limits without the bound, the event skipped
	// (the recover counts it), the step that took it after the recover
	// gone.
	h := newRecoverHarness(t, nil)
	mustSend(t, h, "k", 13)
	mustSend(t, h, "k", 2)
	fi := failedOf(t, h, counterWF, "k")
	if _, err := h.w.Recover(ctx, counterWF, ckey("k"), kernel.RecoverSkip, fi.FaultSeq); err != nil {
		t.Fatal(err)
	}
	recs := allRecords(t, h.w)
	var legacy []journal.Record
records:
	for _, r := range recs {
		switch r.Kind {
		case journal.KindManifest:
			var mr records.ManifestRec
			if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
				t.Fatal(err)
			}
			mr.Limits.MaxParkedPerInstance = 0
			r.Body = schemas.MustMarshal(&mr)
		case journal.KindRecover:
			var rr records.RecoverRec
			if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
				t.Fatal(err)
			}
			rr.Skipped, rr.Parked = 1, 0
			r.Body = schemas.MustMarshal(&rr)
			legacy = append(legacy, r)
			break records
		}
		legacy = append(legacy, r)
	}
	j := journal.NewMemory()
	if err := j.Append(legacy); err != nil {
		t.Fatal(err)
	}
	stores := kernel.Stores{CAS: cas.NewMemory(), Journal: j}
	w, err := kernel.Open(stores, kernel.Config{Builtins: h.builtins})
	if err != nil {
		t.Fatalf("open the journal from before parking: %v", err)
	}
	defer w.Close()
	if got := j.Height(); got != uint64(len(legacy))+1 {
		t.Fatalf("opening journaled %d records, want the limits once", got-uint64(len(legacy)))
	}
	var last journal.Record
	_ = j.Read(j.Height(), func(r journal.Record) (bool, error) { last = r; return false, nil })
	var cr records.ConfigRec
	if last.Kind != journal.KindConfig || schemas.UnmarshalTrusted(last.Body, &cr) != nil || cr.Limits.MaxParkedPerInstance != 1000 {
		t.Fatalf("opening journaled %s %x, want the limits with parking on", last.Kind, last.Body)
	}
	if _, err := w.Submit(ctx, countEvent("k", 13)); err != nil {
		t.Fatal(err)
	}
	res, err := w.Ingest(ctx, countEvent("k", 5))
	if err != nil || !reflect.DeepEqual(res[0].Parked, parkedFor("k")) {
		t.Fatalf("an event for a failed instance after the upgrade: %+v %v, want it parked", res, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkJournal(t, stores)
	w2, err := kernel.Open(stores, kernel.Config{Builtins: h.builtins})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer w2.Close()
	if fi, err := w2.FailedInstance(ctx, counterWF, ckey("k")); err != nil || fi.Parked != 1 {
		t.Fatalf("after replay: %+v %v, want 1 parked", fi, err)
	}
}
