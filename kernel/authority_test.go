package kernel_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// jobManifest: a job emits com.test/job.run@1 or com.test/job.audit@1 on
// Start, fails its step on Fail, and counts receipts and stream frames.
const jobManifest = `[
 {"$kind":"defschema","name":"com.test/JobStart@1","schema":{"type":"object","properties":{"job":{"type":"string"},"audit":{"type":"boolean"}},"required":["job"]}},
 {"$kind":"defschema","name":"com.test/JobFail@1","schema":{"type":"object","properties":{"job":{"type":"string"}},"required":["job"]}},
 {"$kind":"defschema","name":"com.test/JobEvent@1","variant":{"Start":"com.test/JobStart@1","Fail":"com.test/JobFail@1","Receipt":"sys/EffectReceiptEnvelope@1","Frame":"sys/EffectStreamFrame@1"}},
 {"$kind":"defschema","name":"com.test/JobState@1","schema":{"type":"object"}},
 {"$kind":"defschema","name":"com.test/JobId@1","schema":{"type":"string"}},
 {"$kind":"defschema","name":"com.test/JobParams@1","schema":{"type":"object","properties":{"job":{"type":"string"}},"required":["job"]}},
 {"$kind":"defschema","name":"com.test/JobReceipt@1","schema":{"type":"object"}},
 {"$kind":"defeffect","name":"com.test/job.run@1","params":"com.test/JobParams@1","receipt":"com.test/JobReceipt@1"},
 {"$kind":"defeffect","name":"com.test/job.audit@1","params":"com.test/JobParams@1","receipt":"com.test/JobReceipt@1"},
 {"$kind":"defmodule","name":"com.test/job_mod@1","runtime":{"kind":"builtin","builtin":"test/job","identity":"test/job@1"}},
 {"$kind":"defworkflow","name":"com.test/job@1","state":"com.test/JobState@1","event":"com.test/JobEvent@1","key_schema":"com.test/JobId@1","effects_emitted":["com.test/job.run@1","com.test/job.audit@1"],"impl":{"module":"com.test/job_mod@1","entrypoint":"step"}},
 {"$kind":"manifest","name":"com.test/jobs","routing":{"subscriptions":[
   {"event":"com.test/JobStart@1","workflow":"com.test/job@1","key_field":"job"},
   {"event":"com.test/JobFail@1","workflow":"com.test/job@1","key_field":"job"}]}}
]`

func jobStep(in *modules.Input) (*modules.Output, error) {
	ev := decodeMap(nil, in.Event.Value)
	val := ev["$value"].(map[string]any)
	st := map[string]any{"receipts": uint64(0), "frames": uint64(0)}
	if in.State != nil {
		st = decodeMap(nil, in.State)
	}
	out := &modules.Output{}
	switch ev["$tag"] {
	case "Start":
		effect := "com.test/job.run@1"
		if val["audit"] == true {
			effect = "com.test/job.audit@1"
		}
		out.Effects = []modules.EffectOut{{Effect: effect, Params: schemas.MustMarshal(map[string]any{"job": val["job"]})}}
	case "Fail":
		return nil, errors.New("asked to fail")
	case "Receipt":
		st["receipts"] = uint64(toInt(st["receipts"]) + 1)
	case "Frame":
		st["frames"] = uint64(toInt(st["frames"]) + 1)
	}
	out.State = schemas.MustMarshal(st)
	return out, nil
}

func seedKey(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

var (
	runKey     = seedKey("runner")  // "runner": com.test/job.run@1
	auditKey   = seedKey("auditor") // "auditor": com.test/job.audit@1
	builtinKey = seedKey("builtin") // aos/builtin: sys/timer.set@1
	legacyKey  = seedKey("legacy")  // "legacy": from a keyring file without effects
	strangeKey = seedKey("stranger")
)

// jobKeyring is read from a keyring file, as the daemon reads executors.json:
// one entry (legacy) in the format written before keys had effects.
func jobKeyring(t testing.TB) *receipts.Keyring {
	b64 := func(k ed25519.PrivateKey) string {
		return base64.StdEncoding.EncodeToString(k.Public().(ed25519.PublicKey))
	}
	file := `{"keys": [
  {"name": "runner", "public_key": "` + b64(runKey) + `", "effects": ["com.test/job.run@1"]},
  {"name": "auditor", "public_key": "` + b64(auditKey) + `", "effects": ["com.test/job.audit@1"]},
  {"name": "aos/builtin", "public_key": "` + b64(builtinKey) + `", "effects": ["sys/timer.set@1"]},
  {"name": "legacy", "public_key": "` + b64(legacyKey) + `"}
]}`
	kr := receipts.NewKeyring()
	if err := kr.UnmarshalJSON([]byte(file)); err != nil {
		t.Fatal(err)
	}
	return kr
}

// newJobHarness is the job world on disk, so reopening replays from Badger.
func newJobHarness(t testing.TB, lim kernel.Limits) (*harness, *capture) {
	pub := &capture{}
	kr := jobKeyring(t)
	h := newHarnessWith(t, 11, true, func(h *harness) {
		h.builtins.MustRegister("test/job", "test/job@1", "step", jobStep)
		h.extra = func(c *kernel.Config) { c.Publisher, c.Keyring, c.Limits = pub, kr, lim }
	})
	mustApply(t, h, jobManifest)
	return h, pub
}

// startJob starts a job and returns the intent it opened.
func startJob(t testing.TB, h *harness, job string, audit bool) kernel.OpenIntent {
	t.Helper()
	ctx := context.Background()
	if _, err := h.w.Submit(ctx, kernel.Event{Schema: "com.test/JobStart@1",
		JSON: []byte(fmt.Sprintf(`{"job":%q,"audit":%v}`, job, audit))}); err != nil {
		t.Fatal(err)
	}
	its, err := h.w.PendingIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if string(it.OriginKey) == string(schemas.MustMarshal(job)) {
			return it
		}
	}
	t.Fatalf("job %s opened no intent", job)
	return kernel.OpenIntent{}
}

func failJob(t testing.TB, h *harness, job string) {
	t.Helper()
	if _, err := h.w.Submit(context.Background(), kernel.Event{Schema: "com.test/JobFail@1",
		JSON: []byte(fmt.Sprintf(`{"job":%q}`, job))}); err != nil {
		t.Fatal(err)
	}
}

func jobReceipt(key ed25519.PrivateKey, executor, effect string, it kernel.OpenIntent) receipts.SignedReceipt {
	return receipts.Sign(key, receipts.Receipt{World: it.World, Intent: it.Hash, Effect: effect, Executor: executor,
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"ok": true}), Attempt: 1})
}

func jobFrame(key ed25519.PrivateKey, executor, effect string, it kernel.OpenIntent, seq uint64, payload any) receipts.SignedFrame {
	return receipts.SignFrame(key, receipts.Frame{World: it.World, Intent: it.Hash, Effect: effect, Seq: seq, Executor: executor,
		Payload: schemas.MustMarshal(payload)})
}

func jobState(t testing.TB, h *harness, job string) map[string]any {
	t.Helper()
	v, err := h.w.Cell(context.Background(), "com.test/job@1", schemas.MustMarshal(job))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"status": v.Status}
	if v.State != nil {
		if err := schemas.UnmarshalTrusted(v.State, &m); err != nil {
			t.Fatal(err)
		}
		m["status"] = v.Status
	}
	return m
}

// refusedUnchanged submits and requires the error to wrap want, to contain
// each of names, and the journal to be as high as before.
func refusedUnchanged(t *testing.T, h *harness, what string, submit func() error, want error, names ...string) {
	t.Helper()
	before := h.w.Journal().Height()
	err := submit()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Fatalf("%s: %q does not name %q", what, err, n)
		}
	}
	if after := h.w.Journal().Height(); after != before {
		t.Fatalf("%s: the journal grew from %d to %d", what, before, after)
	}
}

// TestReceiptAuthority: a key settles only the effects it was trusted for.
// Every other receipt is refused as untrusted, names key, executor and
// effect, and journals nothing.
func TestReceiptAuthority(t *testing.T) {
	ctx := context.Background()
	h, _ := newJobHarness(t, kernel.Limits{})
	run := startJob(t, h, "a", false)
	const runEffect, auditEffect = "com.test/job.run@1", "com.test/job.audit@1"
	submit := func(sr receipts.SignedReceipt) func() error {
		return func() error { _, err := h.w.SubmitReceipt(ctx, sr); return err }
	}
	auditID := receipts.KeyID(auditKey.Public().(ed25519.PublicKey))
	refusedUnchanged(t, h, "key allowed only another effect", submit(jobReceipt(auditKey, "auditor", runEffect, run)),
		kernel.ErrUntrusted, auditID, "executor auditor", runEffect)
	refusedUnchanged(t, h, "receipt claiming its key's effect for an intent of another", submit(jobReceipt(auditKey, "auditor", auditEffect, run)),
		kernel.ErrUntrusted, auditID, "executor auditor", auditEffect, runEffect)
	refusedUnchanged(t, h, "built-in key for an external effect", submit(jobReceipt(builtinKey, receipts.BuiltinExecutor, runEffect, run)),
		kernel.ErrUntrusted, receipts.BuiltinExecutor, runEffect)
	refusedUnchanged(t, h, "built-in key claiming its own effect", submit(jobReceipt(builtinKey, receipts.BuiltinExecutor, "sys/timer.set@1", run)),
		kernel.ErrUntrusted, "sys/timer.set@1", runEffect)
	refusedUnchanged(t, h, "key from an old keyring file", submit(jobReceipt(legacyKey, "legacy", runEffect, run)),
		kernel.ErrUntrusted, receipts.KeyID(legacyKey.Public().(ed25519.PublicKey)), "executor legacy", runEffect, "add it again")
	refusedUnchanged(t, h, "unknown key", submit(jobReceipt(strangeKey, "runner", runEffect, run)), kernel.ErrUntrusted)
	if got := jobState(t, h, "a"); got["receipts"] != uint64(0) || got["status"] != kernel.StatusWaiting {
		t.Fatalf("job after refused receipts: %v", got)
	}
	if _, err := h.w.SubmitReceipt(ctx, jobReceipt(runKey, "runner", runEffect, run)); err != nil {
		t.Fatalf("the allowed key's receipt: %v", err)
	}
	audit := startJob(t, h, "b", true)
	if _, err := h.w.SubmitReceipt(ctx, jobReceipt(auditKey, "auditor", auditEffect, audit)); err != nil {
		t.Fatalf("the auditor's receipt for its effect: %v", err)
	}
	for _, job := range []string{"a", "b"} {
		if got := jobState(t, h, job); got["receipts"] != uint64(1) {
			t.Fatalf("job %s: %v", job, got)
		}
	}
	if n := countKind(t, h.w, journal.KindDrop); n != 0 {
		t.Fatalf("%d drops journaled", n)
	}
	h.reopen()
}

// TestFrameAuthority: stream frames are signed by a key trusted for the
// intent's effect, bounded in number per intent and in size; refusals
// journal nothing, and the count survives a reopen.
func TestFrameAuthority(t *testing.T) {
	ctx := context.Background()
	const maxFrames, maxBytes = 3, 64
	h, _ := newJobHarness(t, kernel.Limits{MaxFramesPerIntent: maxFrames, MaxFrameBytes: maxBytes})
	run := startJob(t, h, "a", false)
	const runEffect = "com.test/job.run@1"
	submit := func(f receipts.SignedFrame) func() error {
		return func() error { _, err := h.w.SubmitFrame(ctx, f); return err }
	}
	good := jobFrame(runKey, "runner", runEffect, run, 1, map[string]any{"pct": 10})
	unsigned := good
	unsigned.KeyID, unsigned.Signature = "", nil
	tampered := good
	tampered.Payload = schemas.MustMarshal(map[string]any{"pct": 99})
	refusedUnchanged(t, h, "unsigned frame", submit(unsigned), kernel.ErrUntrusted)
	refusedUnchanged(t, h, "wrongly signed frame", submit(tampered), kernel.ErrUntrusted, "signature does not verify")
	refusedUnchanged(t, h, "receipt signature on a frame", submit(func() receipts.SignedFrame {
		f := good
		f.Signature = jobReceipt(runKey, "runner", runEffect, run).Signature
		return f
	}()), kernel.ErrUntrusted)
	refusedUnchanged(t, h, "frame from a key allowed another effect", submit(jobFrame(auditKey, "auditor", runEffect, run, 1, 1)),
		kernel.ErrUntrusted, "executor auditor", runEffect)
	refusedUnchanged(t, h, "frame claiming another effect than its intent's", submit(jobFrame(auditKey, "auditor", "com.test/job.audit@1", run, 1, 1)),
		kernel.ErrUntrusted, "com.test/job.audit@1", runEffect)
	refusedUnchanged(t, h, "frame from an unknown key", submit(jobFrame(strangeKey, "runner", runEffect, run, 1, 1)), kernel.ErrUntrusted)
	refusedUnchanged(t, h, "frame over max_frame_bytes", submit(jobFrame(runKey, "runner", runEffect, run, 1, strings.Repeat("x", maxBytes))),
		kernel.ErrFrameRefused, "max_frame_bytes")
	if got := jobState(t, h, "a"); got["frames"] != uint64(0) {
		t.Fatalf("refused frames reached the job: %v", got)
	}

	seq, err := h.w.SubmitFrame(ctx, good)
	if err != nil {
		t.Fatalf("good frame: %v", err)
	}
	refusedUnchanged(t, h, "repeated frame seq", submit(good), kernel.ErrFrameRefused, "does not follow")
	if _, err := h.w.SubmitFrame(ctx, jobFrame(runKey, "runner", runEffect, run, 2, 20)); err != nil {
		t.Fatal(err)
	}
	h.reopen() // replays the signed frames; the count is rebuilt
	if _, err := h.w.SubmitFrame(ctx, jobFrame(runKey, "runner", runEffect, run, 5, 50)); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, h, "frame beyond max_frames_per_intent", submit(jobFrame(runKey, "runner", runEffect, run, 6, 60)),
		kernel.ErrFrameRefused, "max_frames_per_intent")
	if got := jobState(t, h, "a"); got["frames"] != uint64(maxFrames) {
		t.Fatalf("job after frames: %v", got)
	}
	var fr records.FrameRec
	for _, r := range allRecords(t, h.w) {
		if r.Seq == seq {
			if r.Kind != journal.KindFrame || schemas.UnmarshalTrusted(r.Body, &fr) != nil {
				t.Fatalf("record %d is %s", seq, r.Kind)
			}
		}
	}
	if fr.Effect != runEffect || fr.KeyID != good.KeyID || string(fr.Signature) != string(good.Signature) {
		t.Fatalf("journaled frame %+v lacks its signature", fr)
	}
	// Another intent has its own count; a settled intent takes no frames.
	other := startJob(t, h, "b", false)
	if _, err := h.w.SubmitFrame(ctx, jobFrame(runKey, "runner", runEffect, other, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.SubmitReceipt(ctx, jobReceipt(runKey, "runner", runEffect, run)); err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, h, "frame for a settled intent", submit(jobFrame(runKey, "runner", runEffect, run, 9, 1)),
		kernel.ErrFrameRefused, "not pending")
	h.reopen()
}

// TestLateReceipts: a receipt for an intent that is not pending journals at
// most one record, a drop for the first late receipt of an intent settled
// by its instance's failure; duplicates and made-up intents journal nothing;
// a reopened world judges the same way.
func TestLateReceipts(t *testing.T) {
	ctx := context.Background()
	h, _ := newJobHarness(t, kernel.Limits{})
	const runEffect = "com.test/job.run@1"
	submit := func(sr receipts.SignedReceipt) func() error {
		return func() error { _, err := h.w.SubmitReceipt(ctx, sr); return err }
	}
	// Settled by a receipt: a second copy is a duplicate naming its seq.
	a := startJob(t, h, "a", false)
	ra := jobReceipt(runKey, "runner", runEffect, a)
	res, err := h.w.SubmitReceipt(ctx, ra)
	if err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, h, "duplicate receipt", submit(ra), kernel.ErrReceiptDuplicate, fmt.Sprintf("seq %d", res.Seq))
	// A made-up intent.
	ghost := a
	ghost.Hash = schemas.HashBytes([]byte("never issued"))
	refusedUnchanged(t, h, "receipt for a made-up intent", submit(jobReceipt(runKey, "runner", runEffect, ghost)),
		kernel.ErrReceiptUnknown, ghost.Hash.String())

	// Fenced by its instance's failure: one late receipt is journaled as a
	// drop, a second copy is a duplicate naming it.
	c := startJob(t, h, "c", false)
	failJob(t, h, "c")
	if got := jobState(t, h, "c"); got["status"] != kernel.StatusFailed {
		t.Fatalf("job c: %v", got)
	}
	rc := jobReceipt(runKey, "runner", runEffect, c)
	refusedUnchanged(t, h, "late receipt claiming another effect", submit(jobReceipt(auditKey, "auditor", "com.test/job.audit@1", c)),
		kernel.ErrUntrusted, runEffect)
	before := h.w.Journal().Height()
	drop, err := h.w.SubmitReceipt(ctx, rc)
	if !errors.Is(err, kernel.ErrReceiptDropped) || !drop.Dropped || drop.Seq != before+1 || h.w.Journal().Height() != before+1 ||
		!strings.Contains(err.Error(), fmt.Sprintf("dropped at seq %d", drop.Seq)) {
		t.Fatalf("late receipt: %+v %v; journal %d -> %d", drop, err, before, h.w.Journal().Height())
	}
	refusedUnchanged(t, h, "second late receipt", submit(rc), kernel.ErrReceiptDuplicate, fmt.Sprintf("dropped at seq %d", drop.Seq))
	// d fails too; its late receipt comes only after the reopen.
	d := startJob(t, h, "d", false)
	failJob(t, h, "d")
	if n := countKind(t, h.w, journal.KindDrop); n != 1 {
		t.Fatalf("%d drops, want 1", n)
	}
	checkIntentTrace(t, h, c, "intent", "drop")

	h.reopen() // replay rebuilds the fence: same judgements
	refusedUnchanged(t, h, "duplicate after reopen", submit(ra), kernel.ErrReceiptDuplicate, fmt.Sprintf("seq %d", res.Seq))
	refusedUnchanged(t, h, "second late receipt after reopen", submit(rc), kernel.ErrReceiptDuplicate, fmt.Sprintf("seq %d", drop.Seq))
	if _, err := h.w.SubmitReceipt(ctx, jobReceipt(runKey, "runner", runEffect, d)); !errors.Is(err, kernel.ErrReceiptDropped) {
		t.Fatalf("first late receipt for d after reopen: %v", err)
	}
	refusedUnchanged(t, h, "second late receipt for d", submit(jobReceipt(runKey, "runner", runEffect, d)), kernel.ErrReceiptDuplicate)
	if n := countKind(t, h.w, journal.KindDrop); n != 2 {
		t.Fatalf("%d drops, want 2", n)
	}
	h.reopen()
}

// checkIntentTrace: TraceIntent (with its byte prefilter) equals the
// unfiltered trace and holds these kinds in order.
func checkIntentTrace(t *testing.T, h *harness, it kernel.OpenIntent, kinds ...string) {
	t.Helper()
	ctx := context.Background()
	got, err := records.TraceIntent(ctx, h.w.Journal(), it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	want, err := records.TraceIntentUnfiltered(ctx, h.w.Journal(), it.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("trace --intent with the prefilter %+v, without %+v", got, want)
	}
	var ks []string
	for _, e := range got {
		ks = append(ks, string(e.Kind))
	}
	if strings.Join(ks, ",") != strings.Join(kinds, ",") {
		t.Fatalf("trace --intent %s: %v, want %v", it.Hash, ks, kinds)
	}
}

// TestSettledIntentsBounded: the world remembers the last
// Limits.MaxSettledIntents settled intents; a receipt for one settled
// earlier is refused as unknown and journals nothing.
func TestSettledIntentsBounded(t *testing.T) {
	ctx := context.Background()
	h, _ := newJobHarness(t, kernel.Limits{MaxSettledIntents: 2})
	const runEffect = "com.test/job.run@1"
	var rs []receipts.SignedReceipt
	for _, job := range []string{"a", "b", "c"} {
		it := startJob(t, h, job, false)
		rs = append(rs, jobReceipt(runKey, "runner", runEffect, it))
		if _, err := h.w.SubmitReceipt(ctx, rs[len(rs)-1]); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 2 {
		refusedUnchanged(t, h, "receipt for an intent settled before the last two", func() error {
			_, err := h.w.SubmitReceipt(ctx, rs[0])
			return err
		}, kernel.ErrReceiptUnknown, "the 2 intents")
		for _, sr := range rs[1:] {
			if _, err := h.w.SubmitReceipt(ctx, sr); !errors.Is(err, kernel.ErrReceiptDuplicate) {
				t.Fatalf("round %d: receipt for a remembered intent: %v", round, err)
			}
		}
		h.reopen()
	}
}

// TestOldJournalDropsReplay: a journal written before drops were bounded and
// frames signed (repeated drops, drops for intents never issued, unsigned
// frames) still replays, each record re-emitted as journaled.
func TestOldJournalDropsReplay(t *testing.T) {
	ctx := context.Background()
	h, pub := newOrderHarness(t, true)
	createOrder(t, h, "o1")
	it := pub.intents()[0]
	man := lastManifestHash(t, h)
	height := h.w.Journal().Height()
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	old := "intent is not pending (never issued, or already settled)"
	ghost := it
	ghost.Hash = schemas.HashBytes([]byte("never issued"))
	gr := chargeReceipt(ghost, receipts.StatusOK, map[string]any{"charge_id": "x"})
	stamp := records.Stamp{NowNs: 1 << 41, LogicalNs: 1 << 41, Entropy: make([]byte, 32), Height: height + 2, ManifestHash: man}
	recs := []journal.Record{
		{Seq: height + 1, Kind: journal.KindDrop, Body: schemas.MustMarshal(&records.DropRec{Receipt: gr, Reason: old})},
		{Seq: height + 2, Kind: journal.KindDrop, Body: schemas.MustMarshal(&records.DropRec{Receipt: gr, Reason: old})},
		{Seq: height + 3, Kind: journal.KindFrame, Body: schemas.MustMarshal(&records.FrameRec{Intent: it.Hash, Seq: 1, Executor: "payments",
			Payload: schemas.MustMarshal(map[string]any{"pct": 50}), Stamp: stamp})},
	}
	if err := h.db.Journal().Append(recs); err != nil {
		t.Fatal(err)
	}
	h.open() // replays the journal; fails on any divergence
	got := allRecords(t, h.w)
	for i, r := range recs {
		g := got[height+uint64(i)]
		if g.Seq != r.Seq || g.Kind != r.Kind || string(g.Body) != string(r.Body) {
			t.Fatalf("record %d changed across replay", r.Seq)
		}
	}
	// The unsigned old frame counts as seq 1: the next must rise.
	f := receipts.SignFrame(executorKey, receipts.Frame{World: it.World, Intent: it.Hash, Effect: it.Effect, Seq: 1, Executor: "payments", Payload: schemas.MustMarshal(1)})
	if _, err := h.w.SubmitFrame(ctx, f); !errors.Is(err, kernel.ErrFrameRefused) {
		t.Fatalf("frame repeating the old frame's seq: %v", err)
	}
	if _, err := h.w.SubmitReceipt(ctx, chargeReceipt(it, receipts.StatusOK, map[string]any{"charge_id": "c"})); err != nil {
		t.Fatal(err)
	}
	if _, err := h.w.SubmitReceipt(ctx, gr); !errors.Is(err, kernel.ErrReceiptUnknown) {
		t.Fatalf("receipt for the never-issued intent now: %v", err)
	}
	h.reopen()
}

// lastManifestHash is the hash of the manifest in force, from the journal.
func lastManifestHash(t testing.TB, h *harness) schemas.Hash {
	var mr records.ManifestRec
	for _, r := range allRecords(t, h.w) {
		if r.Kind == journal.KindManifest {
			if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return mr.Hash
}
