package kernel

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/btree"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Recover actions (records.RecoverRec.Action). Each un-fails the instance; they
// differ in what becomes of the input that failed and of the cell's state.
// The events parked for the instance while it was failed (park.go) are
// delivered after the action, in journal order, by each of them, unless the
// operator drops them (RecoverRequest.DropParked), which the recover record
// and its answer count. (Under limits from before parking, events for a
// failed instance were skipped for good; no recover delivers those.)
const (
	// RecoverRetry delivers the input that failed again, to the current
	// manifest's code, keeping the cell's state. The retried step records the
	// recover record's seq as its input.
	RecoverRetry = "retry"
	// RecoverReset deletes the cell's state and discards the failed input:
	// the next event starts from no state.
	RecoverReset = "reset"
	// RecoverSkip keeps the cell's state and discards the failed input.
	RecoverSkip = "skip"
)

// Errors a recover is refused with; nothing is journaled.
var (
	// ErrNotFailed: the instance is not failed (never failed, or recovered
	// already).
	ErrNotFailed = errors.New("kernel: instance is not failed")
	// ErrStaleFault: the instance is failed, but by another fault than the
	// one the recover answers (it was recovered and failed again since).
	ErrStaleFault = errors.New("kernel: recover answers a fault that is not the instance's current one")
	// ErrNotRetryable: retry cannot deliver the failed input again (it never
	// reached the instance, or the current manifest cannot take it); reset
	// or skip still can recover the instance.
	ErrNotRetryable = errors.New("kernel: the failed input cannot be retried")
	// ErrParkedUndeliverable: an event parked for the instance cannot be
	// delivered under the current manifest (its workflow left it, or takes
	// another event now); the recover must drop the parked events
	// (RecoverRequest.DropParked), or a manifest that takes them be applied.
	ErrParkedUndeliverable = errors.New("kernel: parked events cannot be delivered")
)

// Listing limits for Failed.
const (
	DefaultFailedLimit = 100  // rows per page when the caller gives no limit
	MaxFailedLimit     = 1000 // larger limits are cut to this
)

// failure is what a failed instance keeps about its failure.
type failure struct {
	seq     uint64    // the fault record
	input   uint64    // the input whose step failed
	class   string    // records.FaultRec.Class
	skipped uint64    // events for the instance not delivered since (under limits from before parking)
	retry   *delivery // the failed delivery, for a retry; nil when it never reached the mailbox
}

// skipEvent counts an event a failed instance does not take.
func (in *instance) skipEvent() {
	if in.fault != nil {
		in.fault.skipped++
	}
}

// FailedInfo is one failed instance (`aosd failed ls`). Key is canonical
// CBOR (nil for an unkeyed workflow); the daemon renders it as JSON.
type FailedInfo struct {
	Workflow string
	Key      []byte
	Input    uint64 // seq of the input whose step failed
	FaultSeq uint64 // seq of the fault record; a recover must name it
	Reason   string
	Class    string // "business", "environmental" or "budget"
	Skipped  uint64 // events addressed to it since it failed and skipped (never delivered; journals from before parking)
	// Parked is how many events wait for it (park.go): a recover delivers
	// them after its action, unless it drops them. ParkedBlocked says why
	// they cannot be delivered under the current manifest ("" when they
	// can); a recover must then drop them.
	Parked        uint64
	ParkedBlocked string
	// InputSchema is the schema the failed input was delivered as, when it
	// was kept for a retry.
	InputSchema string
	// Retryable says whether retry can deliver the failed input again under
	// the current manifest; RetryBlocked says why not.
	Retryable    bool
	RetryBlocked string
}

// RecoverRequest is an operator's recover of one failed instance.
type RecoverRequest struct {
	Workflow string
	Key      []byte // canonical CBOR; nil for an unkeyed workflow
	Action   string // RecoverRetry, RecoverReset or RecoverSkip
	FaultSeq uint64 // the fault record it answers
	// DropParked drops the events parked for the instance instead of
	// delivering them after the action: the only way parked events are
	// ever dropped. The record and the result say how many.
	DropParked bool
}

// RecoverResult says what a recover did.
type RecoverResult struct {
	Seq    uint64 // the recover record
	Status string // the instance's status afterwards (the recover has run to idle)
	// FaultSeq and Reason: the retried input, or a parked event delivered
	// after it, failed again, with this fault.
	FaultSeq uint64
	Reason   string
	// Delivered is how many parked events the recover delivered again (or
	// parked again behind the module, when the instance's module is set
	// aside); Dropped how many it dropped (RecoverRequest.DropParked).
	Delivered uint64
	Dropped   uint64
}

// FaultClassName names a records.FaultRec.Class for people: a business fault has
// the empty class.
func FaultClassName(class string) string {
	if class == FaultBusiness {
		return "business"
	}
	return class
}

// Failed lists failed instances ordered by workflow name, then key (its
// canonical CBOR bytes): of one workflow, or of all when workflow is "". It returns at most limit rows (0:
// DefaultFailedLimit; at most MaxFailedLimit) after the cursor after ("":
// from the start), and the cursor of the next page ("" when this is the
// last). A page costs O(log n + limit) on the loop.
func (w *World) Failed(ctx context.Context, workflow string, limit int, after string) ([]FailedInfo, string, error) {
	var from string
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil || len(b) == 0 {
			return nil, "", fmt.Errorf("%w: after %q is not a cursor from a previous page", ErrInvalid, after)
		}
		from = string(b)
	}
	switch {
	case limit < 0:
		return nil, "", fmt.Errorf("%w: limit %d is negative", ErrInvalid, limit)
	case limit == 0:
		limit = DefaultFailedLimit
	case limit > MaxFailedLimit:
		limit = MaxFailedLimit
	}
	out := []FailedInfo{}
	var next string
	var qerr error
	err := w.do(ctx, func(st *state) {
		prefix := ""
		if workflow != "" {
			prefix = workflow + "\x00"
			if st.wfs[workflow] == nil && !st.failed.hasPrefix(prefix) {
				qerr = fmt.Errorf("%w: unknown workflow %q (not in the current manifest, and none of its instances is failed)", ErrInvalid, workflow)
				return
			}
		}
		start := max(prefix, from)
		st.failed.ascend(start, func(in *instance) bool {
			if in.id <= from {
				return true // the cursor's own row
			}
			if len(in.id) < len(prefix) || in.id[:len(prefix)] != prefix {
				return false
			}
			if len(out) == limit {
				next = base64.RawURLEncoding.EncodeToString([]byte(out[len(out)-1].id()))
				return false
			}
			out = append(out, st.failedInfo(in))
			return true
		})
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, qerr
}

// id is the index key of the row (workflow, key): the cursor's content.
func (fi *FailedInfo) id() string { return fi.Workflow + "\x00" + string(fi.Key) }

// FailedInstance reports one failed instance; ErrNotFailed when it is not.
// key is canonical CBOR (nil for an unkeyed workflow).
func (w *World) FailedInstance(ctx context.Context, workflow string, key []byte) (*FailedInfo, error) {
	var out *FailedInfo
	var qerr error
	err := w.do(ctx, func(st *state) {
		in := st.instances[instanceID(workflow, key)]
		if in == nil || !in.failed {
			qerr = st.notFailed(workflow, key, in)
			return
		}
		fi := st.failedInfo(in)
		out = &fi
	})
	if err != nil {
		return nil, err
	}
	return out, qerr
}

// FailedKey finds the key of a failed instance of workflow that match
// accepts. It is for callers that cannot parse a typed key because the
// workflow has left the manifest (its key schema went with it) while some
// of its instances are still failed; it scans that workflow's failed
// instances, calling match on the loop (it must be quick and must not call
// the world). ok is false when none matches.
func (w *World) FailedKey(ctx context.Context, workflow string, match func(key []byte) bool) (key []byte, ok bool, err error) {
	err = w.do(ctx, func(st *state) {
		prefix := workflow + "\x00"
		st.failed.ascend(prefix, func(in *instance) bool {
			if !strings.HasPrefix(in.id, prefix) {
				return false
			}
			if match(in.key) {
				key, ok = in.key, true
				return false
			}
			return true
		})
	})
	return key, ok, err
}

// Recover un-fails one failed instance with a journaled recover record:
// action is RecoverRetry, RecoverReset or RecoverSkip, and faultSeq the seq
// of the fault record it answers. The events parked for the instance are
// delivered after the action. It is RecoverInstance without DropParked.
func (w *World) Recover(ctx context.Context, workflow string, key []byte, action string, faultSeq uint64) (RecoverResult, error) {
	return w.RecoverInstance(ctx, RecoverRequest{Workflow: workflow, Key: key, Action: action, FaultSeq: faultSeq})
}

// RecoverInstance un-fails one failed instance with a journaled recover
// record. A recover that does not answer the instance's current fault
// (ErrNotFailed, ErrStaleFault), names an unknown action or workflow
// (ErrInvalid), retries what cannot be retried (ErrNotRetryable), or would
// deliver parked events the current manifest cannot take
// (ErrParkedUndeliverable) is refused and journals nothing. What it
// delivers (the retried input, the parked events) runs to idle before it
// returns; the result says how the instance ended up.
func (w *World) RecoverInstance(ctx context.Context, req RecoverRequest) (RecoverResult, error) {
	var res RecoverResult
	var rerr error
	workflow, key := req.Workflow, req.Key
	err := w.do(ctx, func(st *state) {
		var parked uint64
		res.Seq, parked, rerr = st.recoverInstance(workflow, key, req.Action, req.FaultSeq, req.DropParked, nil)
		if rerr != nil {
			return
		}
		if req.DropParked {
			res.Dropped = parked
		} else {
			res.Delivered = parked
		}
		res.Status = StatusCompleted
		if in := st.instances[instanceID(workflow, key)]; in != nil {
			res.Status = in.status()
			if in.failed {
				res.FaultSeq, res.Reason = in.fault.seq, in.reason
			}
		}
		st.maybeMaterialize()
	})
	if err != nil {
		return RecoverResult{}, err
	}
	return res, rerr
}

// recoverInstance checks a recover, journals it and carries it out. stamp is
// nil live (a new one is taken) and the journaled one in replay. Live, what
// it delivers runs to idle here; in replay the deliveries wait in the
// mailbox for the step or fault records that follow. It returns the
// record's seq and how many parked events it delivered (or dropped).
func (st *state) recoverInstance(wf string, key []byte, action string, faultSeq uint64, dropParked bool, stamp *records.Stamp) (uint64, uint64, error) {
	in, err := st.checkRecover(wf, key, action, faultSeq, dropParked)
	if err != nil {
		return 0, 0, err
	}
	f := in.fault
	st.beginInput()
	if stamp == nil {
		s := st.newStamp()
		stamp = &s
	}
	parked := in.parked
	rec := records.RecoverRec{Workflow: in.wf, Key: in.key, Action: action, Fault: f.seq, Input: f.input, Skipped: f.skipped,
		Parked: uint64(len(parked)), DropParked: dropParked && len(parked) > 0, Stamp: *stamp}
	seq := st.emit(journal.KindRecover, schemas.MustMarshal(&rec))
	if stamp.LogicalNs > st.logical {
		st.logical = stamp.LogicalNs
	}
	in.failed, in.reason, in.fault, in.parked = false, "", nil, nil
	st.failed.remove(in)
	if dropParked {
		parked = nil
	}
	if !st.replaying {
		st.w.cfg.Logger.Info("instance recovered", "workflow", in.wf, "action", action, "fault", f.seq, "seq", seq,
			"parked", rec.Parked, "dropped", rec.DropParked)
	}
	var first *delivery
	switch action {
	case RecoverRetry:
		d := *f.retry
		d.seq = seq // the retried step consumes the recover record
		first = &d
	case RecoverReset:
		if h := st.heads[in.wf]; h != nil {
			if err := h.Delete(in.key); err != nil {
				st.stop("cell store delete for "+in.wf, err)
				return seq, rec.Parked, st.stopped
			}
		}
	}
	st.redeliver(in, first, parked)
	if !st.replaying {
		st.runToIdle()
	}
	st.settle(in)
	return seq, rec.Parked, nil
}

// checkRecover finds the failed instance a recover answers, or says why the
// recover is refused.
func (st *state) checkRecover(wf string, key []byte, action string, faultSeq uint64, dropParked bool) (*instance, error) {
	switch action {
	case RecoverRetry, RecoverReset, RecoverSkip:
	default:
		return nil, fmt.Errorf("%w: unknown recover action %q (want %s, %s or %s)", ErrInvalid, action, RecoverRetry, RecoverReset, RecoverSkip)
	}
	if faultSeq == 0 {
		return nil, fmt.Errorf("%w: a recover must name the fault it answers (its fault seq, as `aosd failed ls` shows)", ErrInvalid)
	}
	in := st.instances[instanceID(wf, key)]
	if in == nil || !in.failed {
		return nil, st.notFailed(wf, key, in)
	}
	if in.fault.seq != faultSeq {
		return nil, fmt.Errorf("%w: workflow %s key %s is failed by the fault at seq %d, not %d (recovered and failed again since?); look again with `aosd failed ls`",
			ErrStaleFault, wf, keyText(key), in.fault.seq, faultSeq)
	}
	if action == RecoverRetry {
		if why := st.retryBlocked(in); why != "" {
			return nil, fmt.Errorf("%w: workflow %s key %s: %s; reset or skip it instead", ErrNotRetryable, wf, keyText(key), why)
		}
	}
	if !dropParked {
		if why := st.parkedBlocked(in); why != "" {
			return nil, fmt.Errorf("%w: workflow %s key %s: %s; drop them with the recover (--drop-parked, \"drop_parked\": true), or apply a manifest that takes them",
				ErrParkedUndeliverable, wf, keyText(key), why)
		}
	}
	return in, nil
}

// notFailed is the refusal for an instance that is not failed.
func (st *state) notFailed(wf string, key []byte, in *instance) error {
	if in == nil && st.wfs[wf] == nil {
		return fmt.Errorf("%w: unknown workflow %q (not in the current manifest, and none of its instances is failed)", ErrInvalid, wf)
	}
	status := StatusCompleted
	if in != nil {
		status = in.status()
	}
	return fmt.Errorf("%w: workflow %s key %s is %s", ErrNotFailed, wf, keyText(key), status)
}

// retryBlocked says why a retry of in could not deliver its failed input
// under the current manifest, or "".
func (st *state) retryBlocked(in *instance) string {
	d := in.fault.retry
	if d == nil {
		return fmt.Sprintf("input %d never reached the instance (the workflow could not take it), so there is nothing to deliver again", in.fault.input)
	}
	return st.undeliverable(in.wf, "the failed input", d)
}

// parkedBlocked says why some event parked for in could not be delivered
// under the current manifest, or "".
func (st *state) parkedBlocked(in *instance) string {
	for i := range in.parked {
		d := &in.parked[i]
		if why := st.undeliverable(in.wf, fmt.Sprintf("the event parked from seq %d", d.seq), d); why != "" {
			return why
		}
	}
	return ""
}

// undeliverable says why delivery d (what names it) could not be delivered
// to workflow wf under the current manifest, or "": the workflow must be
// there, take d's schema as its event, and d's value must validate. A
// delivery routed under the current manifest is deliverable; one kept
// across an apply (a failed input, a parked event) is checked again.
func (st *state) undeliverable(wf, what string, d *delivery) string {
	rt := st.wfs[wf]
	if rt == nil {
		return "the workflow is not in the current manifest"
	}
	if d.stamp != nil && d.stamp.ManifestHash == st.man.Hash {
		return ""
	}
	if rt.def.Event != d.schema {
		return fmt.Sprintf("%s is a %s, but the workflow now takes %s", what, d.schema, rt.def.Event)
	}
	if err := st.man.Registry.Validate(d.schema, d.value); err != nil {
		return fmt.Sprintf("%s does not validate against the current %s: %v", what, d.schema, err)
	}
	return ""
}

// failedInfo describes a failed instance.
func (st *state) failedInfo(in *instance) FailedInfo {
	f := in.fault
	fi := FailedInfo{Workflow: in.wf, Key: in.key, Input: f.input, FaultSeq: f.seq, Reason: in.reason,
		Class: FaultClassName(f.class), Skipped: f.skipped, Parked: uint64(len(in.parked)), ParkedBlocked: st.parkedBlocked(in)}
	if f.retry != nil {
		fi.InputSchema = f.retry.schema
	}
	fi.RetryBlocked = st.retryBlocked(in)
	fi.Retryable = fi.RetryBlocked == ""
	return fi
}

// failedIndex holds the failed instances ordered by id (workflow, NUL, key:
// the order of (workflow, key), as workflow names hold no NUL), in a B-tree:
// inserting or removing one of n and starting a page cost O(log n). Failing
// and recovering maintain it, live and in replay alike.
type failedIndex struct {
	t *btree.BTreeG[*instance]
}

func (x *failedIndex) tree() *btree.BTreeG[*instance] {
	if x.t == nil {
		x.t = btree.NewG(32, func(a, b *instance) bool { return a.id < b.id })
	}
	return x.t
}

func (x *failedIndex) insert(in *instance) { x.tree().ReplaceOrInsert(in) }

func (x *failedIndex) remove(in *instance) { x.tree().Delete(in) }

// len is how many instances are failed.
func (x *failedIndex) len() int { return x.tree().Len() }

// ascend calls fn with each instance whose id is at least from, in order,
// until fn returns false.
func (x *failedIndex) ascend(from string, fn func(*instance) bool) {
	x.tree().AscendGreaterOrEqual(&instance{id: from}, fn)
}

// hasPrefix says whether some failed instance's id starts with prefix.
func (x *failedIndex) hasPrefix(prefix string) bool {
	found := false
	x.ascend(prefix, func(in *instance) bool {
		found = len(in.id) >= len(prefix) && in.id[:len(prefix)] == prefix
		return false
	})
	return found
}
