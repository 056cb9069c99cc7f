package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Receipt and frame outcomes callers branch on. Only ErrReceiptDropped
// journals anything (one drop record); every other refusal journals nothing,
// ErrIntentCancelled (cancel.go) for an intent an operator cancelled
// included.
var (
	// ErrReceiptDropped: a trusted late receipt for an intent this world
	// settled recently without a receipt (its instance failed). It is
	// journaled as dropped, once per intent, and delivered to no one.
	ErrReceiptDropped = errors.New("kernel: receipt dropped")
	// ErrReceiptDuplicate: a receipt for an intent already settled by a
	// receipt, or whose late receipt was already journaled as dropped.
	// Nothing is recorded; the error names the seq that settled it.
	ErrReceiptDuplicate = errors.New("kernel: duplicate receipt")
	// ErrReceiptUnknown: a receipt for an intent that is not pending and
	// that this world did not settle recently (never issued, or settled more
	// than Limits.MaxSettledIntents settlements ago). Nothing is recorded.
	ErrReceiptUnknown = errors.New("kernel: receipt for an unknown intent")
	// ErrUntrusted: unknown signer, bad signature, malformed receipt or
	// frame, a key not allowed for the effect it signs for, or a receipt or
	// frame whose effect is not its intent's. Nothing is recorded.
	ErrUntrusted = errors.New("kernel: receipt refused")
	// ErrFrameRefused: a stream frame for an intent that is not pending, out
	// of sequence, beyond Limits.MaxFramesPerIntent, or with a payload over
	// Limits.MaxFrameBytes. Nothing is recorded.
	ErrFrameRefused = errors.New("kernel: stream frame refused")
)

// Frame is a stream frame offered by an executor, signed by a key trusted
// for its effect (see receipts.SignFrame).
type Frame = receipts.SignedFrame

// ReceiptResult says what became of a receipt.
type ReceiptResult struct {
	Seq      uint64
	Dropped  bool
	Rejected string
	Reason   string
}

// SubmitReceipt verifies a signed receipt against the trusted keys and hands
// it to the loop, which settles its intent and delivers it to the origin
// instance. It returns once the outcome is durable. A forged or malformed
// receipt, or one signed by a key not allowed for its effect, is refused
// (ErrUntrusted) before it reaches the loop, and nothing is recorded; so is
// a receipt signed for another world, or for none (ErrWrongWorld). For
// an intent that is not pending: the first late receipt for an intent
// recently settled without a receipt is journaled as dropped
// (ErrReceiptDropped); any other is refused and journals nothing
// (ErrReceiptDuplicate, ErrReceiptUnknown).
func (w *World) SubmitReceipt(ctx context.Context, sr receipts.SignedReceipt) (ReceiptResult, error) {
	if w.verifier == nil {
		return ReceiptResult{}, fmt.Errorf("%w: this world trusts no executor keys", ErrUntrusted)
	}
	name, err := w.verifier.Verify(ctx, &sr)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return ReceiptResult{}, err // the caller gave up; the receipt was not judged
		}
		return ReceiptResult{}, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if name != sr.Executor {
		return ReceiptResult{}, fmt.Errorf("%w: intent %s: key %s belongs to executor %q, receipt claims %q",
			ErrUntrusted, sr.Intent, sr.KeyID, name, sr.Executor)
	}
	if err := w.checkWorld("receipt", sr.Intent, sr.World); err != nil {
		return ReceiptResult{}, err
	}
	res, err := w.send(ctx, request{receipt: &sr})
	if err != nil {
		return ReceiptResult{}, err
	}
	if res.receipt.Dropped {
		return res.receipt, fmt.Errorf("%w: intent %s: journaled as dropped at seq %d (%s)", ErrReceiptDropped, sr.Intent, res.receipt.Seq, res.receipt.Reason)
	}
	return res.receipt, nil
}

// SubmitFrame records a signed stream frame for a pending intent and returns
// its journal seq once durable. Refused, journaling nothing: a payload over
// Limits.MaxFrameBytes or beyond Limits.MaxFramesPerIntent frames for the
// intent, an intent not pending, or a seq that does not rise
// (ErrFrameRefused); a frame that is malformed, not signed by a trusted key,
// signed by a key not allowed for its effect, or whose effect is not its
// intent's (ErrUntrusted).
func (w *World) SubmitFrame(ctx context.Context, f Frame) (uint64, error) {
	if limit := w.Limits().MaxFrameBytes; len(f.Payload) > limit {
		return 0, fmt.Errorf("%w: frame %d for intent %s: payload is %d bytes; the limit (max_frame_bytes) is %d",
			ErrFrameRefused, f.Seq, f.Intent, len(f.Payload), limit)
	}
	if w.cfg.Keyring == nil {
		return 0, fmt.Errorf("%w: frame for intent %s: this world trusts no executor keys", ErrUntrusted, f.Intent)
	}
	if _, err := w.cfg.Keyring.VerifyFrame(f); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUntrusted, err)
	}
	if err := w.checkWorld("frame", f.Intent, f.World); err != nil {
		return 0, err
	}
	res, err := w.send(ctx, request{frame: &f})
	if err != nil {
		return 0, err
	}
	return res.receipt.Seq, nil
}

// PendingIntents lists the intents in flight, oldest first.
func (w *World) PendingIntents(ctx context.Context) ([]OpenIntent, error) {
	var out []OpenIntent
	err := w.do(ctx, func(st *state) { out = st.pendingIntents() })
	return out, err
}

// ingestReceipt admits one verified receipt. stamp is nil live (a new stamp
// is taken if the receipt is delivered) and the journaled stamp in replay,
// where a refusal is a divergence (the journal holds only admitted receipts).
func (st *state) ingestReceipt(sr *receipts.SignedReceipt, stamp *records.Stamp) (ReceiptResult, error) {
	it := st.inflight[sr.Intent]
	if it == nil {
		return st.lateReceipt(sr)
	}
	if it.Effect != sr.Effect {
		return ReceiptResult{}, effectMismatch("receipt", sr.Intent, sr.KeyID, sr.Executor, sr.Effect, it.Effect)
	}
	st.beginInput()
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	lm := st.intentManifest(it) // its origin's manifest (pins.go)
	def := lm.m.Effects[it.Effect]
	rejected := ""
	if sr.Status == receipts.StatusOK {
		if err := lm.m.Registry.Validate(def.Receipt, sr.Payload); err != nil {
			rejected = fmt.Sprintf("payload does not validate against %s: %v", def.Receipt, err)
		}
	} else if err := schemas.CheckCanonical(sr.Payload); err != nil {
		rejected = "payload: " + err.Error()
	}
	body := records.EncodeReceipt(&records.ReceiptRec{Receipt: *sr, Stamp: *stamp, Rejected: rejected})
	seq := st.emit(journal.KindReceipt, body)
	if stamp.LogicalNs > st.logical {
		st.logical = stamp.LogicalNs
	}
	in := st.instance(it.OriginWorkflow, it.OriginKey)
	st.settleIntent(in, it.Hash)
	st.fence.settledByReceipt(it.Hash)
	res := ReceiptResult{Seq: seq, Rejected: rejected}
	if in.failed {
		st.settle(in)
		return res, nil
	}
	rt := lm.wfs[it.OriginWorkflow]
	var schema string
	var value []byte
	if rejected == "" {
		schema = manifest.SysEffectReceiptEnvelope
		value = encodeEnvelope(&sys.ReceiptEnvelope{OriginWorkflow: it.OriginWorkflow,
			OriginWorkflowHash: it.OriginWorkflowHash.String(), OriginKey: it.OriginKey,
			IntentHash: it.Hash.String(), Effect: it.Effect, Executor: sr.Executor, IssuerRef: it.IssuerRef,
			Payload: sr.Payload, Status: string(sr.Status), EmittedAtSeq: it.EmittedAt, Signature: sr.Signature})
	} else {
		schema = manifest.SysEffectReceiptRejected
		value = schemas.MustMarshal(&sys.ReceiptRejected{OriginWorkflow: it.OriginWorkflow, OriginKey: it.OriginKey,
			IntentHash: it.Hash.String(), Effect: it.Effect, Error: rejected, EmittedAtSeq: it.EmittedAt})
	}
	delivered, ok := st.asWorkflowEvent(lm, rt, schema, value)
	if !ok {
		reason := fmt.Sprintf("receipt for intent %s rejected (%s) and the workflow's event %s cannot carry %s",
			it.Hash, rejected, rt.def.Event, schema)
		st.failInstance(in, seq, reason)
		return res, nil
	}
	st.deliver(in, delivery{seq: seq, schema: rt.def.Event, value: delivered, stamp: stamp, eventHash: schemas.HashBytes(body)})
	return res, nil
}

// lateReceipt judges a receipt for an intent that is not pending (fence.go):
// the first for an intent recently settled without a receipt is journaled as
// a drop; any other is refused and journals nothing.
func (st *state) lateReceipt(sr *receipts.SignedReceipt) (ReceiptResult, error) {
	e, ok := st.fence.lookup(sr.Intent)
	switch {
	case !ok:
		return ReceiptResult{}, fmt.Errorf("%w: intent %s is not pending, and is not among the %d intents this world settled last "+
			"(never issued here, or settled long ago); nothing was journaled", ErrReceiptUnknown, sr.Intent, st.fence.rememberedSettled())
	case e.effect != sr.Effect:
		return ReceiptResult{}, effectMismatch("receipt", sr.Intent, sr.KeyID, sr.Executor, sr.Effect, e.effect)
	case e.cancelled:
		return ReceiptResult{}, cancelledRefusal("receipt", sr.Intent, e)
	case e.receipt:
		return ReceiptResult{}, fmt.Errorf("%w: intent %s was settled by the receipt at seq %d; nothing was journaled", ErrReceiptDuplicate, sr.Intent, e.seq)
	case e.dropSeq != 0:
		return ReceiptResult{}, fmt.Errorf("%w: intent %s was settled at seq %d without a receipt, and a late receipt for it was journaled as dropped at seq %d; nothing was journaled",
			ErrReceiptDuplicate, sr.Intent, e.seq, e.dropSeq)
	}
	reason := fmt.Sprintf("late receipt: intent settled at seq %d without a receipt (its instance failed)", e.seq)
	st.beginInput()
	seq := st.emit(journal.KindDrop, schemas.MustMarshal(&records.DropRec{Receipt: *sr, Reason: reason}))
	st.fence.noteDrop(sr.Intent, seq)
	return ReceiptResult{Seq: seq, Dropped: true, Reason: reason}, nil
}

// replayDrop re-emits a journaled drop record as it is: a journal written
// before drops were bounded may hold drops the live loop would now refuse
// to journal (repeats, intents never issued), and they stay part of it.
func (st *state) replayDrop(dr *records.DropRec, body []byte) {
	st.beginInput()
	seq := st.emit(journal.KindDrop, body)
	st.fence.noteDrop(dr.Receipt.Intent, seq)
}

// effectMismatch refuses a receipt or frame whose signed effect is not its
// intent's: its key's authority was judged on an effect the intent is not for.
func effectMismatch(what string, h schemas.Hash, keyID, executor, claimed, actual string) error {
	return fmt.Errorf("%w: %s for intent %s signed by key %s (executor %s) is for effect %s, but the intent is for effect %s; nothing was journaled",
		ErrUntrusted, what, h, keyID, executor, claimed, actual)
}

// ingestFrame records a verified stream frame and delivers it when the
// origin workflow's event accepts sys/EffectStreamFrame@1. The frame's
// effect and the per-intent frame count are judged live only: replay trusts
// the frames the journal admitted (and frames journaled before frames were
// signed carry no effect).
func (st *state) ingestFrame(f *Frame, stamp *records.Stamp) (uint64, error) {
	it := st.inflight[f.Intent]
	if it == nil {
		if e, ok := st.fence.lookup(f.Intent); ok && e.cancelled {
			return 0, fmt.Errorf("%w: %w", ErrFrameRefused, cancelledRefusal("frame", f.Intent, e))
		}
		return 0, fmt.Errorf("%w: intent %s is not pending", ErrFrameRefused, f.Intent)
	}
	if !st.replaying {
		if f.Effect != it.Effect {
			return 0, effectMismatch("frame", f.Intent, f.KeyID, f.Executor, f.Effect, it.Effect)
		}
		if n, limit := st.fence.frameCount(f.Intent), st.limits.MaxFramesPerIntent; n >= limit {
			return 0, fmt.Errorf("%w: intent %s already has %d frames journaled; the limit (max_frames_per_intent) is %d",
				ErrFrameRefused, f.Intent, n, limit)
		}
	}
	if last := st.frameSeq[f.Intent]; f.Seq <= last {
		return 0, fmt.Errorf("%w: intent %s: frame seq %d does not follow %d", ErrFrameRefused, f.Intent, f.Seq, last)
	}
	st.beginInput()
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	body := schemas.MustMarshal(&records.FrameRec{World: f.World, Intent: f.Intent, Seq: f.Seq, Executor: f.Executor, Payload: f.Payload, Stamp: *stamp,
		Effect: f.Effect, KeyID: f.KeyID, Signature: f.Signature})
	seq := st.emit(journal.KindFrame, body)
	if stamp.LogicalNs > st.logical { // logical time never runs backwards (newStamp)
		st.logical = stamp.LogicalNs
	}
	st.frameSeq[f.Intent] = f.Seq
	st.fence.noteFrame(f.Intent)
	in := st.instance(it.OriginWorkflow, it.OriginKey)
	lm := st.manifestOf(in)
	rt := lm.wfs[it.OriginWorkflow]
	value := schemas.MustMarshal(&sys.StreamFrame{IntentHash: f.Intent.String(), Seq: f.Seq, Executor: f.Executor, Payload: f.Payload})
	if delivered, ok := st.asWorkflowEvent(lm, rt, sys.SchemaStreamFrame, value); ok && !in.failed {
		st.deliver(in, delivery{seq: seq, schema: rt.def.Event, value: delivered, stamp: stamp, eventHash: schemas.HashBytes(body)})
	}
	return seq, nil
}

// asWorkflowEvent shapes a value of schema as rt's event: as is when the
// event is that schema, wrapped when it is an arm of the event's variant.
func (st *state) asWorkflowEvent(lm *liveManifest, rt *wfRuntime, schema string, value []byte) ([]byte, bool) {
	if rt == nil {
		return nil, false
	}
	if rt.def.Event == schema {
		return value, true
	}
	for _, a := range lm.m.Registry.Arms(rt.def.Event) {
		if a.Schema == schema {
			return routing.Wrap(a.Tag, value), true
		}
	}
	return nil, false
}

// deliver appends to a mailbox and, live, makes the instance ready and runs
// the world to idle. An instance that cannot take it now (its module is set
// aside) keeps it parked (park.go).
func (st *state) deliver(in *instance, d delivery) {
	if st.holds(in) {
		st.park(in, d)
		return
	}
	in.mailbox = append(in.mailbox, d)
	if st.replaying {
		return
	}
	if !in.queued {
		in.queued = true
		st.ready = append(st.ready, in)
	}
	st.runToIdle()
}

// settleIntent removes an intent from flight and remembers it as settled by
// the record just journaled (its receipt, or its instance's fault), so a
// late receipt for it is judged by the fence (fence.go).
func (st *state) settleIntent(in *instance, h schemas.Hash) {
	if it := st.inflight[h]; it != nil {
		st.fence.noteSettled(h, settledIntent{effect: it.Effect, seq: st.seq}, st.limits.MaxSettledIntents)
	}
	delete(st.inflight, h)
	delete(st.frameSeq, h)
	st.fence.forgetFrames(h)
	delete(in.inflight, h)
	if !st.replaying {
		st.settled = append(st.settled, h)
	}
}

// failInstance marks an instance failed with a journaled reason and drops
// its remaining pending intents: their receipts will be fenced off.
func (st *state) failInstance(in *instance, input uint64, reason string) {
	st.failInstanceClass(in, input, reason, FaultBusiness)
}

// failInstanceClass is failInstance with a fault class. An environmental
// fault also discards the module's warm instance, in the live world (the
// runtime already did) and in replay (which adopts the record) alike. When
// the input that failed is still at the head of the mailbox (a budget fault,
// or replay adopting a fault record) it is kept for a retry; the rest of the
// mailbox is skipped.
func (st *state) failInstanceClass(in *instance, input uint64, reason, class string) {
	var d *delivery
	if len(in.mailbox) > 0 && in.mailbox[0].seq == input {
		first := in.mailbox[0]
		d = &first
		in.mailbox = in.mailbox[1:]
	}
	st.failDelivery(in, input, d, reason, class)
}

// failDelivery fails in on input, whose delivery d (nil when the input never
// reached the mailbox, e.g. a receipt the workflow cannot take) is kept so
// that an operator's retry can deliver it again (recover.go). Whatever else
// is in the mailbox is parked for it, ahead of what comes later (or, under
// limits from before parking, dropped and counted as skipped).
func (st *state) failDelivery(in *instance, input uint64, d *delivery, reason, class string) {
	reason = capReason(reason)
	seq := st.emit(journal.KindFault, schemas.MustMarshal(&records.FaultRec{Input: input, Workflow: in.wf, Key: in.key, Reason: reason, Class: class}))
	if class == FaultEnvironmental {
		if rt := st.manifestOf(in).wfs[in.wf]; rt != nil && rt.mod != nil && rt.mod.runner != nil {
			rt.mod.runner.Reset()
		}
	}
	f := &failure{seq: seq, input: input, class: class}
	if d != nil {
		kept := *d
		f.retry = &kept
	}
	in.failed, in.reason, in.fault = true, reason, f
	if st.w.upg != nil {
		st.w.upg.faulted(in, seq, reason)
	}
	st.parkMailbox(in)
	st.failed.insert(in)
	for _, h := range sortedHashes(in.inflight) {
		st.settleIntent(in, h)
	}
	if !st.replaying { // replay re-lives old failures: the live world logged them
		st.w.cfg.Logger.Warn("instance failed", "workflow", in.wf, "input", input, "fault", seq, "reason", reason)
	}
}

func sortedHashes(m map[schemas.Hash]struct{}) []schemas.Hash {
	out := make([]schemas.Hash, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && string(out[j][:]) < string(out[j-1][:]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// ReceiptVerifyStats reports how many signature batches the world has
// verified and how many receipts they held (their ratio is the mean batch
// size). Both are zero when the world trusts no keys.
func (w *World) ReceiptVerifyStats() (batches, receipts uint64) {
	if w.verifier == nil {
		return 0, 0
	}
	return w.verifier.Stats()
}
