package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Receipt outcomes callers branch on.
var (
	// ErrReceiptDropped: the receipt was signed by a trusted executor but its
	// intent is not pending (never issued, or already settled). It is
	// journaled as dropped and delivered to no one.
	ErrReceiptDropped = errors.New("kernel: receipt dropped")
	// ErrUntrusted: unknown signer, bad signature or malformed receipt.
	// Refused before the journal: nothing is recorded.
	ErrUntrusted = errors.New("kernel: receipt refused")
	// ErrFrameRefused: a stream frame for an intent that is not pending, or
	// out of sequence. Nothing is recorded.
	ErrFrameRefused = errors.New("kernel: stream frame refused")
)

// ReceiptRec is a receipt admitted for a pending intent.
type ReceiptRec struct {
	Receipt  receipts.SignedReceipt `cbor:"receipt"`
	Stamp    Stamp                  `cbor:"stamp"`
	Rejected string                 `cbor:"rejected,omitempty"` // payload failed validation
}

// DropRec is a validly signed receipt fenced off: its intent was not pending.
type DropRec struct {
	Receipt receipts.SignedReceipt `cbor:"receipt"`
	Reason  string                 `cbor:"reason"`
}

// FrameRec is a stream frame: non-authoritative progress of one intent.
type FrameRec struct {
	Intent   schemas.Hash `cbor:"intent"`
	Seq      uint64       `cbor:"seq"`
	Executor string       `cbor:"executor"`
	Payload  []byte       `cbor:"payload"`
	Stamp    Stamp        `cbor:"stamp"`
}

// Frame is a stream frame offered by an executor.
type Frame struct {
	Intent   schemas.Hash
	Seq      uint64
	Executor string
	Payload  []byte // canonical CBOR
}

// receiptEnvelope is sys/EffectReceiptEnvelope@1.
type receiptEnvelope struct {
	OriginWorkflow     string `cbor:"origin_workflow"`
	OriginWorkflowHash string `cbor:"origin_workflow_hash"`
	OriginKey          []byte `cbor:"origin_key,omitempty"`
	IntentHash         string `cbor:"intent_hash"`
	Effect             string `cbor:"effect"`
	Executor           string `cbor:"executor"`
	IssuerRef          string `cbor:"issuer_ref,omitempty"`
	Payload            []byte `cbor:"payload"`
	Status             string `cbor:"status"`
	EmittedAtSeq       uint64 `cbor:"emitted_at_seq"`
	Signature          []byte `cbor:"signature"`
}

// receiptRejected is sys/EffectReceiptRejected@1.
type receiptRejected struct {
	OriginWorkflow string `cbor:"origin_workflow"`
	OriginKey      []byte `cbor:"origin_key,omitempty"`
	IntentHash     string `cbor:"intent_hash"`
	Effect         string `cbor:"effect"`
	Error          string `cbor:"error"`
	EmittedAtSeq   uint64 `cbor:"emitted_at_seq"`
}

// streamFrame is sys/EffectStreamFrame@1.
type streamFrame struct {
	IntentHash string `cbor:"intent_hash"`
	Seq        uint64 `cbor:"seq"`
	Executor   string `cbor:"executor"`
	Payload    []byte `cbor:"payload"`
}

// ReceiptResult says what became of a receipt.
type ReceiptResult struct {
	Seq      uint64 `json:"seq"`
	Dropped  bool   `json:"dropped,omitempty"`
	Rejected string `json:"rejected,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// SubmitReceipt verifies a signed receipt against the trusted keys and hands
// it to the loop, which settles its intent and delivers it to the origin
// instance. It returns once the outcome is durable. A forged or malformed
// receipt is refused (ErrUntrusted) and nothing is recorded; a receipt for an
// intent that is not pending is journaled as dropped (ErrReceiptDropped).
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
	res, err := w.send(ctx, request{receipt: &sr})
	if err != nil {
		return ReceiptResult{}, err
	}
	if res.receipt.Dropped {
		return res.receipt, fmt.Errorf("%w: intent %s: %s", ErrReceiptDropped, sr.Intent, res.receipt.Reason)
	}
	return res.receipt, nil
}

// SubmitFrame records a stream frame for a pending intent. Frame seqs per
// intent must strictly increase.
func (w *World) SubmitFrame(ctx context.Context, f Frame) (uint64, error) {
	if err := schemas.CheckCanonical(f.Payload); err != nil {
		return 0, fmt.Errorf("%w: intent %s: payload: %v", ErrFrameRefused, f.Intent, err)
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
// is taken if the receipt is delivered) and the journaled stamp in replay.
func (st *state) ingestReceipt(sr *receipts.SignedReceipt, stamp *Stamp) ReceiptResult {
	it := st.inflight[sr.Intent]
	reason := ""
	switch {
	case it == nil:
		reason = "intent is not pending (never issued, or already settled)"
	case it.Effect != sr.Effect:
		reason = fmt.Sprintf("receipt is for effect %s but the intent is for %s", sr.Effect, it.Effect)
	}
	if reason != "" {
		seq := st.emit(journal.KindDrop, schemas.MustMarshal(&DropRec{Receipt: *sr, Reason: reason}))
		return ReceiptResult{Seq: seq, Dropped: true, Reason: reason}
	}
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	def := st.effectDef(it.Effect)
	rejected := ""
	if sr.Status == receipts.StatusOK {
		if err := st.man.Registry.Validate(def.Receipt, sr.Payload); err != nil {
			rejected = fmt.Sprintf("payload does not validate against %s: %v", def.Receipt, err)
		}
	} else if err := schemas.CheckCanonical(sr.Payload); err != nil {
		rejected = "payload: " + err.Error()
	}
	body := encodeReceipt(&ReceiptRec{Receipt: *sr, Stamp: *stamp, Rejected: rejected})
	seq := st.emit(journal.KindReceipt, body)
	if stamp.LogicalNs > st.logical {
		st.logical = stamp.LogicalNs
	}
	in := st.instance(it.OriginWorkflow, it.OriginKey)
	st.settleIntent(in, it.Hash)
	res := ReceiptResult{Seq: seq, Rejected: rejected}
	if in.failed {
		st.settle(in)
		return res
	}
	rt := st.wfs[it.OriginWorkflow]
	var schema string
	var value []byte
	if rejected == "" {
		schema = manifest.SysEffectReceiptEnvelope
		value = encodeEnvelope(&receiptEnvelope{OriginWorkflow: it.OriginWorkflow,
			OriginWorkflowHash: it.OriginWorkflowHash.String(), OriginKey: it.OriginKey,
			IntentHash: it.Hash.String(), Effect: it.Effect, Executor: sr.Executor, IssuerRef: it.IssuerRef,
			Payload: sr.Payload, Status: string(sr.Status), EmittedAtSeq: it.EmittedAt, Signature: sr.Signature})
	} else {
		schema = manifest.SysEffectReceiptRejected
		value = schemas.MustMarshal(&receiptRejected{OriginWorkflow: it.OriginWorkflow, OriginKey: it.OriginKey,
			IntentHash: it.Hash.String(), Effect: it.Effect, Error: rejected, EmittedAtSeq: it.EmittedAt})
	}
	delivered, ok := st.asWorkflowEvent(rt, schema, value)
	if !ok {
		reason := fmt.Sprintf("receipt for intent %s rejected (%s) and the workflow's event %s cannot carry %s",
			it.Hash, rejected, rt.def.Event, schema)
		st.failInstance(in, seq, reason)
		return res
	}
	st.deliver(in, delivery{seq: seq, schema: rt.def.Event, value: delivered, stamp: stamp, eventHash: schemas.HashBytes(body)})
	return res
}

// ingestFrame records a stream frame and delivers it when the origin
// workflow's event accepts sys/EffectStreamFrame@1.
func (st *state) ingestFrame(f *Frame, stamp *Stamp) (uint64, error) {
	it := st.inflight[f.Intent]
	if it == nil {
		return 0, fmt.Errorf("%w: intent %s is not pending", ErrFrameRefused, f.Intent)
	}
	if last := st.frameSeq[f.Intent]; f.Seq <= last {
		return 0, fmt.Errorf("%w: intent %s: frame seq %d does not follow %d", ErrFrameRefused, f.Intent, f.Seq, last)
	}
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	body := schemas.MustMarshal(&FrameRec{Intent: f.Intent, Seq: f.Seq, Executor: f.Executor, Payload: f.Payload, Stamp: *stamp})
	seq := st.emit(journal.KindFrame, body)
	st.frameSeq[f.Intent] = f.Seq
	in := st.instance(it.OriginWorkflow, it.OriginKey)
	rt := st.wfs[it.OriginWorkflow]
	value := schemas.MustMarshal(&streamFrame{IntentHash: f.Intent.String(), Seq: f.Seq, Executor: f.Executor, Payload: f.Payload})
	if delivered, ok := st.asWorkflowEvent(rt, "sys/EffectStreamFrame@1", value); ok && !in.failed {
		st.deliver(in, delivery{seq: seq, schema: rt.def.Event, value: delivered, stamp: stamp, eventHash: schemas.HashBytes(body)})
	}
	return seq, nil
}

// asWorkflowEvent shapes a value of schema as rt's event: as is when the
// event is that schema, wrapped when it is an arm of the event's variant.
func (st *state) asWorkflowEvent(rt *wfRuntime, schema string, value []byte) ([]byte, bool) {
	if rt == nil {
		return nil, false
	}
	if rt.def.Event == schema {
		return value, true
	}
	for _, a := range st.man.Registry.Arms(rt.def.Event) {
		if a.Schema == schema {
			return routing.Wrap(a.Tag, value), true
		}
	}
	return nil, false
}

// deliver appends to a mailbox and, live, makes the instance ready and runs
// the world to idle.
func (st *state) deliver(in *instance, d delivery) {
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

// settleIntent removes an intent from flight.
func (st *state) settleIntent(in *instance, h schemas.Hash) {
	delete(st.inflight, h)
	delete(st.frameSeq, h)
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
// runtime already did) and in replay (which adopts the record) alike.
func (st *state) failInstanceClass(in *instance, input uint64, reason, class string) {
	reason = capReason(reason)
	st.emit(journal.KindFault, schemas.MustMarshal(&FaultRec{Input: input, Workflow: in.wf, Key: in.key, Reason: reason, Class: class}))
	if class == FaultEnvironmental {
		if rt := st.wfs[in.wf]; rt != nil && rt.mod != nil && rt.mod.runner != nil {
			rt.mod.runner.Reset()
		}
	}
	in.failed, in.reason, in.mailbox = true, reason, nil
	for _, h := range sortedHashes(in.inflight) {
		st.settleIntent(in, h)
	}
	st.w.cfg.Logger.Warn("instance failed", "workflow", in.wf, "input", input, "reason", reason)
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
