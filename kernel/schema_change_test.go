package kernel_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// State schemas of com.test/s@1, all named com.test/SState@1: a def that
// keeps its name but changes its definition is a change.
const (
	stateV1       = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	stateTagged   = `{"type":"object","properties":{"n":{"type":"integer"},"tag":{"type":"string"}},"required":["n","tag"]}`
	stateNote     = `{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"]}`
	stateRefCount = `{"type":"object","properties":{"n":{"$ref":"com.test/SCount@1"}},"required":["n"]}`
)

const schemaWorkflow = "com.test/s@1"

// schemaManifest is a world with com.test/s@1, whose state schema is state;
// extra is more defs (each followed by a comma).
func schemaManifest(state, extra string) string {
	return `[
 {"$kind":"defschema","name":"com.test/SAct@1","schema":{"type":"object","properties":{"key":{"type":"string"},"act":{"type":"string"}},"required":["key","act"]}},
 {"$kind":"defschema","name":"com.test/SEvent@1","variant":{"Act":"com.test/SAct@1","Frame":"sys/EffectStreamFrame@1","Receipt":"sys/EffectReceiptEnvelope@1"}},
 {"$kind":"defschema","name":"com.test/SState@1","schema":` + state + `},
 {"$kind":"defschema","name":"com.test/SKey@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/SFx@1","schema":{"type":"object"}},
 {"$kind":"defeffect","name":"com.test/sfx@1","params":"com.test/SFx@1","receipt":"com.test/SFx@1"},
 {"$kind":"defmodule","name":"com.test/schema_mod@1","runtime":{"kind":"builtin","builtin":"test/schema","identity":"test/schema@1"}},
 {"$kind":"defworkflow","name":"com.test/s@1","state":"com.test/SState@1","event":"com.test/SEvent@1","key_schema":"com.test/SKey@1","effects_emitted":["com.test/sfx@1"],"impl":{"module":"com.test/schema_mod@1","entrypoint":"step"}},
 ` + extra + `
 {"$kind":"manifest","name":"com.test/schema","routing":{"subscriptions":[{"event":"com.test/SAct@1","workflow":"com.test/s@1","key_field":"key"}]}}
]`
}

// otherWorkflow is a second workflow (no subscriptions) for schemaManifest's extra.
const otherWorkflow = `
 {"$kind":"defschema","name":"com.test/OState@1","schema":{"type":"object"}},
 {"$kind":"defworkflow","name":"com.test/other@1","state":"com.test/OState@1","event":"com.test/SEvent@1","key_schema":"com.test/SKey@1","effects_emitted":[],"impl":{"module":"com.test/schema_mod@1","entrypoint":"step"}},`

// schemaStep counts in "n". Act "plain" writes {n} (a state v1 accepts and
// stateTagged does not), "tagged" writes {n, tag}, "fx" also opens an
// effect; a stream frame adds 100; a receipt fails the step.
func schemaStep(in *modules.Input) (*modules.Output, error) {
	ev := decodeMap(nil, in.Event.Value)
	var n int64
	if in.State != nil {
		n = toInt(decodeMap(nil, in.State)["n"])
	}
	st := map[string]any{"n": n + 1}
	out := &modules.Output{}
	switch ev["$tag"] {
	case "Act":
		switch ev["$value"].(map[string]any)["act"] {
		case "tagged":
			st["tag"] = "t"
		case "fx":
			out.Effects = []modules.EffectOut{{Effect: "com.test/sfx@1", Params: schemas.MustMarshal(map[string]any{})}}
		}
	case "Frame":
		st["n"] = n + 100
	case "Receipt":
		return nil, errors.New("receipt refused")
	}
	out.State = schemas.MustMarshal(st)
	return out, nil
}

var schemaExecutorKey = ed25519.NewKeyFromSeed([]byte("schema-change test executor key!"))

func newSchemaHarness(t *testing.T) *harness {
	kr := receipts.NewKeyring()
	if err := kr.Add("fx", schemaExecutorKey.Public().(ed25519.PublicKey), []string{"com.test/sfx@1"}); err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, 11, true, func(h *harness) {
		h.builtins.MustRegister("test/schema", "test/schema@1", "step", schemaStep)
		h.extra = func(c *kernel.Config) { c.Keyring = kr }
	})
}

func schemaAct(t *testing.T, h *harness, key, act string) {
	t.Helper()
	if _, err := h.send("com.test/SAct@1", fmt.Sprintf(`{"key":%q,"act":%q}`, key, act)); err != nil {
		t.Fatal(err)
	}
}

func schemaCell(t *testing.T, h *harness, key string) *kernel.CellView {
	t.Helper()
	v, err := h.w.Cell(context.Background(), schemaWorkflow, schemas.MustMarshal(key))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func stateChecks(t *testing.T, h *harness) uint64 {
	t.Helper()
	n, err := h.w.StateChecks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func lastActive(t *testing.T, h *harness, key string) uint64 {
	t.Helper()
	last, ok, err := h.w.CellLastActive(context.Background(), schemaWorkflow, schemas.MustMarshal(key))
	if err != nil || !ok {
		t.Fatalf("cell %s: ok %v, err %v", key, ok, err)
	}
	return last
}

// lastManifestRec is the journal's latest manifest record.
func lastManifestRec(t *testing.T, h *harness) records.ManifestRec {
	t.Helper()
	var mr records.ManifestRec
	found := false
	for _, r := range allRecords(t, h.w) {
		if r.Kind == journal.KindManifest {
			found = true
			if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatal("no manifest record")
	}
	return mr
}

var schemaInReason = regexp.MustCompile(`com\.test/SState@1 \((sha256:[0-9a-f]{64})\)`)

// TestStateSchemaIncompatibleChange: after an apply changes the state schema
// so that old states no longer validate, an old cell's next step does not
// run; the instance fails with a journaled business fault naming the
// workflow, key, both schemas, the validation error and the way out. A cell
// first written after the apply is not checked. The epoch survives reopen,
// and replay reproduces the fault.
func TestStateSchemaIncompatibleChange(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	schemaAct(t, h, "k2", "plain")
	mustApply(t, h, schemaManifest(stateTagged, ""))
	mr := lastManifestRec(t, h)
	if mr.StateChange == nil || !slices.Equal(mr.StateChange.Workflows, []string{schemaWorkflow}) {
		t.Fatalf("manifest record state change %+v, want [%s]", mr.StateChange, schemaWorkflow)
	}
	if e, l := mr.StateChange.Epoch, lastActive(t, h, "k2"); e < l {
		t.Fatalf("epoch %d is before the last write %d made under the old schema", e, l)
	}
	h.reopen() // the epoch is rebuilt by replay

	schemaAct(t, h, "k1", "tagged")
	v := schemaCell(t, h, "k1")
	if v.Status != kernel.StatusFailed {
		t.Fatalf("old cell under an incompatible schema: status %s, state %s", v.Status, stateJSON(v))
	}
	if stateJSON(v) != `{"n":1}` {
		t.Fatalf("the failed step changed the state to %s", stateJSON(v))
	}
	for _, want := range []string{"workflow com.test/s@1", `key "k1"`, "changed the state schema from",
		"does not validate against com.test/SState@1", "tag", "reset the cell or apply a state schema that accepts it"} {
		if !strings.Contains(v.Reason, want) {
			t.Errorf("reason %q does not say %q", v.Reason, want)
		}
	}
	if m := schemaInReason.FindAllStringSubmatch(v.Reason, -1); len(m) != 2 || m[0][1] == m[1][1] {
		t.Errorf("reason %q does not name the old and the new schema by distinct hashes", v.Reason)
	}
	recs := allRecords(t, h.w)
	last := recs[len(recs)-1]
	var fr records.FaultRec
	if last.Kind != journal.KindFault || schemas.UnmarshalTrusted(last.Body, &fr) != nil {
		t.Fatalf("last record is %s, want the fault", last.Kind)
	}
	if fr.Workflow != schemaWorkflow || string(fr.Key) != string(schemas.MustMarshal("k1")) || fr.Reason != v.Reason || fr.Class != "" {
		t.Fatalf("fault record %+v", fr)
	}
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks, want 1", n)
	}

	// A cell first written after the apply is not checked, then or later.
	schemaAct(t, h, "k3", "tagged")
	schemaAct(t, h, "k3", "tagged")
	if v := schemaCell(t, h, "k3"); v.Status != kernel.StatusCompleted || stateJSON(v) != `{"n":2,"tag":"t"}` {
		t.Fatalf("new cell: %s %s %s", v.Status, stateJSON(v), v.Reason)
	}
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks after stepping a new cell, want 1", n)
	}

	// Replay reproduces the fault byte for byte and checks the same states.
	before := len(allRecords(t, h.w))
	h.reopen()
	if after := len(allRecords(t, h.w)); after != before {
		t.Fatalf("%d records after reopen, %d before", after, before)
	}
	if got := schemaCell(t, h, "k1"); got.Status != kernel.StatusFailed || got.Reason != v.Reason {
		t.Fatalf("after reopen: %s %q", got.Status, got.Reason)
	}
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks on replay, want 1", n)
	}
	// The other old cell fails on its own first step, not before.
	if got := schemaCell(t, h, "k2"); got.Status != kernel.StatusCompleted {
		t.Fatalf("k2 before its step: %s", got.Status)
	}
	schemaAct(t, h, "k2", "tagged")
	if got := schemaCell(t, h, "k2"); got.Status != kernel.StatusFailed {
		t.Fatalf("k2 after its step: %s", got.Status)
	}
}

// TestStateSchemaCompatibleChange: a change old states still satisfy (an
// added optional field) checks each old cell once, on its first step, and
// the step runs.
func TestStateSchemaCompatibleChange(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	mustApply(t, h, schemaManifest(stateNote, ""))
	schemaAct(t, h, "k1", "plain")
	if v := schemaCell(t, h, "k1"); v.Status != kernel.StatusCompleted || stateJSON(v) != `{"n":2}` {
		t.Fatalf("old cell under a compatible schema: %s %s %s", v.Status, stateJSON(v), v.Reason)
	}
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks, want 1", n)
	}
	schemaAct(t, h, "k1", "plain") // written after the apply now: not checked again
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks after the cell was rewritten, want 1", n)
	}
	h.reopen()
	if v := schemaCell(t, h, "k1"); stateJSON(v) != `{"n":3}` {
		t.Fatalf("after reopen: %s", stateJSON(v))
	}
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks on replay, want 1", n)
	}
}

// TestStateSchemaUnchanged: an apply that leaves a workflow's state schema
// alone (here it adds a workflow and a schema) starts no epoch, so its steps
// validate nothing; the new workflow has nothing to validate either.
func TestStateSchemaUnchanged(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	mustApply(t, h, schemaManifest(stateV1, otherWorkflow))
	mr := lastManifestRec(t, h)
	if mr.StateChange == nil || len(mr.StateChange.Workflows) != 0 || mr.StateChange.Epoch != 0 {
		t.Fatalf("manifest record state change %+v, want none changed", mr.StateChange)
	}
	schemaAct(t, h, "k1", "plain")
	if v := schemaCell(t, h, "k1"); v.Status != kernel.StatusCompleted || stateJSON(v) != `{"n":2}` {
		t.Fatalf("k1: %s %s %s", v.Status, stateJSON(v), v.Reason)
	}
	if n := stateChecks(t, h); n != 0 {
		t.Fatalf("%d state checks for an unchanged schema, want 0", n)
	}
}

// TestStateSchemaReferencedChange: the schema a state schema refers to is
// part of it; changing only that def is a state-schema change.
func TestStateSchemaReferencedChange(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateRefCount, `{"$kind":"defschema","name":"com.test/SCount@1","schema":{"type":"integer"}},`))
	schemaAct(t, h, "k1", "plain")
	mustApply(t, h, schemaManifest(stateRefCount, `{"$kind":"defschema","name":"com.test/SCount@1","schema":{"type":"integer","minimum":5}},`))
	if mr := lastManifestRec(t, h); mr.StateChange == nil || !slices.Equal(mr.StateChange.Workflows, []string{schemaWorkflow}) {
		t.Fatalf("manifest record state change %+v, want [%s]", mr.StateChange, schemaWorkflow)
	}
	schemaAct(t, h, "k1", "plain")
	if v := schemaCell(t, h, "k1"); v.Status != kernel.StatusFailed || !strings.Contains(v.Reason, "changed the state schema from") {
		t.Fatalf("k1: %s %q", v.Status, v.Reason)
	}
}

// TestStateSchemaChangeAcrossRemoval: a workflow's cells outlive its removal
// from the manifest; brought back with another state schema, its old cells
// are checked.
func TestStateSchemaChangeAcrossRemoval(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	mustApply(t, h, `[
 {"$kind":"defschema","name":"com.test/E@1","schema":{"type":"object"}},
 {"$kind":"manifest","name":"com.test/schema","routing":{"subscriptions":[]}}
]`)
	mustApply(t, h, schemaManifest(stateTagged, ""))
	if mr := lastManifestRec(t, h); mr.StateChange == nil || !slices.Equal(mr.StateChange.Workflows, []string{schemaWorkflow}) {
		t.Fatalf("manifest record state change %+v, want [%s]", mr.StateChange, schemaWorkflow)
	}
	schemaAct(t, h, "k1", "tagged")
	if v := schemaCell(t, h, "k1"); v.Status != kernel.StatusFailed {
		t.Fatalf("k1: %s %s", v.Status, stateJSON(v))
	}
}

// TestStateSchemaEpochCoversFrameWrites: a stream frame's stamp does not
// advance the world's logical time, so with a clock that stepped back a cell
// can be written (by the frame's step) later than st.logical at the next
// apply. The epoch must still cover it: it is at least the latest logical
// time any step ran at.
func TestStateSchemaEpochCoversFrameWrites(t *testing.T) {
	ctx := context.Background()
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "f", "fx")
	its, err := h.w.PendingIntents(ctx)
	if err != nil || len(its) != 1 {
		t.Fatalf("pending intents %v, %v", its, err)
	}
	h.clock.now = 1 << 50 // the frame is stamped far ahead...
	if _, err := h.w.SubmitFrame(ctx, receipts.SignFrame(schemaExecutorKey, receipts.Frame{World: its[0].World, Intent: its[0].Hash, Effect: its[0].Effect, Seq: 1, Executor: "fx",
		Payload: schemas.MustMarshal(map[string]any{})})); err != nil {
		t.Fatal(err)
	}
	frameWrite := lastActive(t, h, "f")
	h.clock.now = 0 // ...and the clock steps back before the receipt
	sr := receipts.Sign(schemaExecutorKey, receipts.Receipt{World: its[0].World, Intent: its[0].Hash, Effect: its[0].Effect, Executor: "fx",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{}), Attempt: 1})
	if _, err := h.w.SubmitReceipt(ctx, sr); err != nil {
		t.Fatal(err)
	}
	if v := schemaCell(t, h, "f"); v.Status != kernel.StatusFailed || stateJSON(v) != `{"n":101}` {
		t.Fatalf("cell f: %s %s %s (want failed on the receipt, state written by the frame)", v.Status, stateJSON(v), v.Reason)
	}
	if lastActive(t, h, "f") != frameWrite || frameWrite < 1<<50 {
		t.Fatalf("cell f last written at %d, frame stamped %d", lastActive(t, h, "f"), frameWrite)
	}
	mustApply(t, h, schemaManifest(stateTagged, ""))
	mr := lastManifestRec(t, h)
	if mr.StateChange == nil || mr.StateChange.Epoch < frameWrite {
		t.Fatalf("epoch %+v is before the frame's write at %d: that cell would reach the new code unchecked", mr.StateChange, frameWrite)
	}
	before := len(allRecords(t, h.w))
	h.reopen() // replay adopts the journaled epoch
	if after := len(allRecords(t, h.w)); after != before {
		t.Fatalf("%d records after reopen, %d before", after, before)
	}
}

// TestStateSchemaLegacyJournal: a manifest record without a state change
// (written before the check existed) starts no epoch on replay, so those
// journals replay as they ran. The journal is this test's own with the state
// changes stripped from its manifest records.
func TestStateSchemaLegacyJournal(t *testing.T) {
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	mustApply(t, h, schemaManifest(stateNote, ""))
	schemaAct(t, h, "k1", "plain")
	if n := stateChecks(t, h); n != 1 {
		t.Fatalf("%d state checks, want 1", n)
	}
	recs := allRecords(t, h.w)
	stripped := 0
	for i, r := range recs {
		if r.Kind != journal.KindManifest {
			continue
		}
		var mr records.ManifestRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			t.Fatal(err)
		}
		mr.StateChange = nil
		recs[i].Body = schemas.MustMarshal(&mr)
		stripped++
	}
	if stripped != 2 {
		t.Fatalf("%d manifest records, want 2", stripped)
	}
	db, err := worldstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Journal().Append(recs); err != nil {
		t.Fatal(err)
	}
	w, err := kernel.Open(db.Stores(), h.config())
	if err != nil {
		t.Fatalf("replaying a journal without state changes: %v", err)
	}
	defer w.Close()
	if n, err := w.StateChecks(context.Background()); err != nil || n != 0 {
		t.Fatalf("%d state checks replaying a journal without state changes (err %v), want 0", n, err)
	}
	v, err := w.Cell(context.Background(), schemaWorkflow, schemas.MustMarshal("k1"))
	if err != nil || stateJSON(v) != `{"n":2}` {
		t.Fatalf("k1 after replay: %v %v", v, err)
	}
}

// TestStateSchemaFaultRecovered: the ways out the fault names work. A retry
// under the same schema fails the same way; after an apply whose schema
// accepts the old state, a retry runs the step; a reset starts the cell
// afresh.
func TestStateSchemaFaultRecovered(t *testing.T) {
	ctx := context.Background()
	h := newSchemaHarness(t)
	mustApply(t, h, schemaManifest(stateV1, ""))
	schemaAct(t, h, "k1", "plain")
	schemaAct(t, h, "k2", "plain")
	mustApply(t, h, schemaManifest(stateTagged, ""))
	schemaAct(t, h, "k1", "tagged")
	schemaAct(t, h, "k2", "tagged")
	fault := func(key string) uint64 {
		t.Helper()
		fi, err := h.w.FailedInstance(ctx, schemaWorkflow, schemas.MustMarshal(key))
		if err != nil {
			t.Fatal(err)
		}
		return fi.FaultSeq
	}
	res, err := h.w.Recover(ctx, schemaWorkflow, schemas.MustMarshal("k1"), kernel.RecoverRetry, fault("k1"))
	if err != nil || res.Status != kernel.StatusFailed || !strings.Contains(res.Reason, "changed the state schema from") {
		t.Fatalf("retry under the same schema: %+v, %v", res, err)
	}
	if _, err := h.w.Recover(ctx, schemaWorkflow, schemas.MustMarshal("k2"), kernel.RecoverReset, fault("k2")); err != nil {
		t.Fatal(err)
	}
	schemaAct(t, h, "k2", "tagged")
	if v := schemaCell(t, h, "k2"); v.Status != kernel.StatusCompleted || stateJSON(v) != `{"n":1,"tag":"t"}` {
		t.Fatalf("k2 after reset: %s %s %s", v.Status, stateJSON(v), v.Reason)
	}
	mustApply(t, h, schemaManifest(stateV1, "")) // accepts {n} again
	res, err = h.w.Recover(ctx, schemaWorkflow, schemas.MustMarshal("k1"), kernel.RecoverRetry, fault("k1"))
	if err != nil || res.Status != kernel.StatusCompleted {
		t.Fatalf("retry under a schema that accepts the state: %+v, %v", res, err)
	}
	if v := schemaCell(t, h, "k1"); stateJSON(v) != `{"n":2,"tag":"t"}` {
		t.Fatalf("k1 after the retry: %s", stateJSON(v))
	}
	before := len(allRecords(t, h.w))
	h.reopen()
	if after := len(allRecords(t, h.w)); after != before {
		t.Fatalf("%d records after reopen, %d before", after, before)
	}
	if v := schemaCell(t, h, "k1"); v.Status != kernel.StatusCompleted || stateJSON(v) != `{"n":2,"tag":"t"}` {
		t.Fatalf("k1 after reopen: %s %s", v.Status, stateJSON(v))
	}
}
