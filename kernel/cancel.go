package kernel

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Cancellation (DESIGN.md §7; docs/DECISIONS.md, "Cancelling an intent").
//
// An operator cancels one intent in flight with a cancel record: a driver
// record, stamped at ingress like every input from outside and run to idle
// like one. It settles the intent exactly where a receipt would, so the
// fence (fence.go) remembers it as cancelled and refuses whatever an
// executor says about it afterwards (a receipt, a frame), journaling
// nothing; the settlement reaches the Publisher with the record, so the
// executor side withdraws the intent (a timer goroutine stops, a claim
// never hands it out again) before the cancel is answered. The origin
// instance is delivered sys/EffectCancelled@1 when its event schema takes
// it; otherwise it fails, as it does for a rejected receipt it cannot
// carry: a business fault, journaled after the cancel, that replay
// reaches again.
//
// Nothing else cancels anything: no apply, failure or limit journals a
// cancel record. A cancel for an intent that is not in flight (never
// issued here, settled already, cancelled already) is refused and journals
// nothing. Replay re-runs the record through the same checks and the same
// delivery (cancelIntent), and the record it produces must equal the
// journaled one.

// Cancel refusals; nothing is journaled.
var (
	// ErrIntentNotInFlight: the intent is settled: by a receipt or by its
	// instance's failure. The error names the record that settled it.
	ErrIntentNotInFlight = errors.New("kernel: intent is not in flight")
	// ErrIntentUnknown: the intent is neither in flight nor among those
	// the world settled recently (never issued here, or settled more than
	// Limits.MaxSettledIntents settlements ago).
	ErrIntentUnknown = errors.New("kernel: unknown intent")
	// ErrIntentCancelled: the intent was cancelled already (a second
	// cancel), or a receipt or frame names an intent an operator
	// cancelled. The error names the cancel record's seq.
	ErrIntentCancelled = errors.New("kernel: intent was cancelled")
)

// Cancel bounds: what an operator's words may add to the journal.
const (
	MaxCancelReasonBytes = 1024
	MaxCancelByBytes     = 128
	// DefaultCancelBy names the canceller when the request names no one.
	DefaultCancelBy = "operator"
)

// SchemaEffectCancelled is what a workflow is delivered for a cancel of its
// intent (when its event schema takes it).
const SchemaEffectCancelled = manifest.SysEffectCancelled

// CancelRequest is an operator's cancel of one intent in flight.
type CancelRequest struct {
	Intent schemas.Hash
	// Reason is journaled with the cancel and delivered to the workflow
	// (at most MaxCancelReasonBytes of UTF-8; may be empty).
	Reason string
	// By names who asked (at most MaxCancelByBytes of UTF-8; ""
	// means DefaultCancelBy). The kernel journals it as given: it is the
	// caller's word, not an authenticated identity.
	By string
}

// CancelResult says what a cancel did.
type CancelResult struct {
	Seq      uint64 // the cancel record
	Intent   schemas.Hash
	Effect   string
	Workflow string // the intent's origin workflow
	Key      []byte // its origin key (canonical CBOR; nil when unkeyed)
	// Delivered says the origin instance was delivered
	// sys/EffectCancelled@1 (its event schema takes it); else it failed
	// (FaultSeq, Reason) or was failed already.
	Delivered bool
	// Status is the origin instance's status afterwards (the cancel ran to
	// idle): what the workflow made of it.
	Status   string
	FaultSeq uint64
	Reason   string
}

// CancelIntent cancels one intent in flight with a journaled cancel record
// and returns once it is durable: the intent is settled, the executor side
// has withdrawn it, and what the origin instance did with the cancellation
// has run to idle. A cancel for an intent that is not in flight
// (ErrIntentUnknown, ErrIntentNotInFlight, ErrIntentCancelled) or with a
// reason or name out
// of bounds (ErrInvalid) is refused and journals nothing.
func (w *World) CancelIntent(ctx context.Context, req CancelRequest) (CancelResult, error) {
	if req.By == "" {
		req.By = DefaultCancelBy
	}
	if err := checkCancelText("reason", req.Reason, MaxCancelReasonBytes); err != nil {
		return CancelResult{}, err
	}
	if err := checkCancelText("by", req.By, MaxCancelByBytes); err != nil {
		return CancelResult{}, err
	}
	var res CancelResult
	var cerr error
	err := w.do(ctx, func(st *state) {
		res, cerr = st.cancelIntent(req.Intent, req.Reason, req.By, nil)
		st.maybeMaterialize()
	})
	if err != nil {
		return CancelResult{}, err
	}
	return res, cerr
}

// checkCancelText refuses an operator's text that is not UTF-8 or is over
// its bound.
func checkCancelText(what, s string, limit int) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: cancel: %s is not valid UTF-8", ErrInvalid, what)
	}
	if len(s) > limit {
		return fmt.Errorf("%w: cancel: %s is %d bytes; at most %d", ErrInvalid, what, len(s), limit)
	}
	return nil
}

// cancelIntent checks a cancel, journals it, settles the intent and hands
// the cancellation to the origin instance. stamp is nil live (a new one is
// taken) and the journaled one in replay, where a refusal is a divergence.
// Live, a delivery runs to idle here; in replay it waits in the mailbox for
// the step or fault record that follows.
func (st *state) cancelIntent(h schemas.Hash, reason, by string, stamp *records.Stamp) (CancelResult, error) {
	it := st.inflight[h]
	if it == nil {
		return CancelResult{}, st.notInFlight(h)
	}
	in := st.instance(it.OriginWorkflow, it.OriginKey)
	st.beginInput()
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	rec := records.CancelRec{Intent: h, Effect: it.Effect, Workflow: it.OriginWorkflow, Key: it.OriginKey,
		Reason: reason, By: by, Stamp: *stamp}
	body := schemas.MustMarshal(&rec)
	seq := st.emit(journal.KindCancel, body)
	if stamp.LogicalNs > st.logical {
		st.logical = stamp.LogicalNs
	}
	st.settleIntent(in, h)
	st.fence.noteCancelled(h)
	res := CancelResult{Seq: seq, Intent: h, Effect: it.Effect, Workflow: it.OriginWorkflow, Key: it.OriginKey}
	if !st.replaying {
		st.w.cfg.Logger.Info("intent cancelled", "intent", h, "effect", it.Effect, "workflow", it.OriginWorkflow,
			"seq", seq, "by", by, "reason", reason)
	}
	lm := st.intentManifest(it) // its origin's manifest: the cell's pin, or the current one (pins.go)
	rt := lm.wfs[it.OriginWorkflow]
	value := schemas.MustMarshal(&sys.EffectCancelled{OriginWorkflow: it.OriginWorkflow, OriginKey: it.OriginKey,
		IntentHash: h.String(), Effect: it.Effect, IssuerRef: it.IssuerRef, EmittedAtSeq: it.EmittedAt,
		CancelSeq: seq, Reason: reason, By: by})
	if delivered, ok := st.asWorkflowEvent(lm, rt, manifest.SysEffectCancelled, value); ok {
		res.Delivered = true
		st.deliver(in, delivery{seq: seq, schema: rt.def.Event, value: delivered, stamp: stamp, eventHash: schemas.HashBytes(body)})
	} else {
		event := "(its workflow is not in the manifest)"
		if rt != nil {
			event = rt.def.Event
		}
		st.failInstance(in, seq, fmt.Sprintf("intent %s (%s) was cancelled by %s at seq %d, and the workflow's event %s cannot carry %s",
			h, it.Effect, by, seq, event, manifest.SysEffectCancelled))
	}
	res.Status = in.status()
	if in.failed {
		res.FaultSeq, res.Reason = in.fault.seq, in.reason
	}
	st.settle(in)
	return res, nil
}

// notInFlight says why intent h cannot be cancelled: what the fence
// remembers of it, or that it knows nothing of it.
func (st *state) notInFlight(h schemas.Hash) error {
	e, ok := st.fence.lookup(h)
	switch {
	case !ok:
		return fmt.Errorf("%w: intent %s is not in flight, and is not among the %d intents this world settled last "+
			"(never issued here, or settled long ago); nothing was journaled", ErrIntentUnknown, h, st.fence.rememberedSettled())
	case e.cancelled:
		return fmt.Errorf("%w: intent %s was cancelled already, at seq %d; nothing was journaled", ErrIntentCancelled, h, e.seq)
	case e.receipt:
		return fmt.Errorf("%w: intent %s was settled by the receipt at seq %d; nothing was journaled", ErrIntentNotInFlight, h, e.seq)
	default:
		return fmt.Errorf("%w: intent %s was settled at seq %d, when its instance failed; nothing was journaled", ErrIntentNotInFlight, h, e.seq)
	}
}

// cancelledRefusal is the refusal of a receipt or frame (what) for an
// intent an operator cancelled: nothing is journaled.
func cancelledRefusal(what string, h schemas.Hash, e settledIntent) error {
	return fmt.Errorf("%w: %s for intent %s refused: the intent was cancelled by an operator at seq %d; nothing was journaled",
		ErrIntentCancelled, what, h, e.seq)
}
