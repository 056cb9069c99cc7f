package kernel

import (
	"bytes"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// ReplayError is a divergence between the journal and what replay computed.
type ReplayError struct {
	Seq      uint64
	Kind     journal.Kind
	Workflow string
	Key      []byte
	Want     schemas.Hash // hash of the journaled record body
	Got      schemas.Hash // hash of the record replay produced
	Msg      string
}

func (e *ReplayError) Error() string {
	s := fmt.Sprintf("kernel: replay diverged at seq %d (%s", e.Seq, e.Kind)
	if e.Workflow != "" {
		s += fmt.Sprintf(", workflow %s key %s", e.Workflow, keyText(e.Key))
	}
	s += ")"
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if !e.Want.IsZero() || !e.Got.IsZero() {
		s += fmt.Sprintf(": journal %s, replay %s", e.Want, e.Got)
	}
	return s
}

// recover rebuilds the loop's state by replaying the journal from genesis.
// Each driver record (an ingress event, a step, a fault, a manifest, an
// operator's recover or cancel) is re-executed by the same code the live loop runs;
// every record that produces must equal the journaled one byte for byte.
func (st *state) recover() error {
	st.replaying = true
	defer func() {
		st.replaying = false
		for _, h := range st.heads {
			h.WriteMissingOnly(false) // the world's own writes are new objects
		}
	}()
	info := &st.w.openInfo
	if !st.w.cfg.FromGenesis {
		s, err := st.loadSnapshot(info)
		if err != nil {
			return fmt.Errorf("kernel: find the latest snapshot: %w", err)
		}
		if s != nil {
			if err := st.restore(s); err != nil {
				return err
			}
		}
	}
	if first := st.w.journal.First(); st.seq+1 < first {
		return fmt.Errorf("%w: replay must start at seq %d, but the journal now starts at seq %d (retention dropped what came before), and no usable snapshot is newer",
			ErrTruncated, st.seq+1, first)
	}
	progress := st.w.cfg.Progress.start("replay", st.w.journal.Height()-st.seq)
	defer progress.Finish()
	ra := st.startReadAhead(st.seq + 1)
	defer st.closeReadAhead()
	err := st.readJournal(ra, st.seq+1, func(it *replayItem) (bool, error) {
		info.Replayed++
		progress.Add(1)
		defer ra.advance(it.Seq)
		if len(st.out) > 0 {
			return true, st.match(it.Record)
		}
		if it.Seq != st.seq+1 {
			return false, &ReplayError{Seq: it.Seq, Kind: it.Kind, Msg: fmt.Sprintf("expected seq %d", st.seq+1)}
		}
		if h := st.w.hist; h != nil && it.Seq > h.to && it.Kind != journal.KindStep && it.Kind != journal.KindFault {
			// A history replay ends at the first input after its last step:
			// steps and faults are driven one by one in the journal's order,
			// and any other driver starts an input, which the live loop took
			// only once every mailbox was empty.
			return false, nil
		}
		ra.await(it.Seq)
		if err := st.drive(it); err != nil {
			return false, err
		}
		st.maybeMaterialize()
		if st.stopped != nil {
			return false, fmt.Errorf("replay at seq %d: %w", it.Seq, st.stopped)
		}
		return true, st.match(it.Record)
	})
	if err != nil {
		return err
	}
	if len(st.out) > 0 {
		return &ReplayError{Seq: st.out[0].Seq, Kind: st.out[0].Kind, Msg: "journal ends inside a step's output"}
	}
	st.outBytes = 0
	for _, in := range st.instances {
		if len(in.mailbox) > 0 {
			return &ReplayError{Seq: in.mailbox[0].seq, Workflow: in.wf, Key: in.key,
				Msg: "journal ends with an undelivered event"}
		}
	}
	return nil
}

// match compares the oldest produced record with the journaled one.
func (st *state) match(r journal.Record) error {
	got := st.out[0]
	st.out = st.out[1:]
	if got.Seq == r.Seq && got.Kind == r.Kind && bytes.Equal(got.Body, r.Body) {
		return nil
	}
	e := &ReplayError{Seq: r.Seq, Kind: r.Kind, Want: schemas.HashBytes(r.Body), Got: schemas.HashBytes(got.Body)}
	if got.Kind != r.Kind {
		e.Msg = fmt.Sprintf("replay produced a %s record", got.Kind)
	}
	var sr records.StepRec
	if r.Kind == journal.KindStep && schemas.UnmarshalTrusted(r.Body, &sr) == nil {
		e.Workflow, e.Key = sr.Workflow, sr.Key
		e.Msg = st.explainStep(&sr, got)
	}
	return e
}

// drive re-executes one driver record, appending what it produces to st.out.
// The bodies of steps, faults and events come decoded (decodeReplayItem).
func (st *state) drive(it *replayItem) error {
	r := it.Record
	switch r.Kind {
	case journal.KindManifest:
		var mr records.ManifestRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		m, err := manifest.FromSource(mr.Source, st.artifact)
		if err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "reload manifest: " + err.Error()}
		}
		wfs, mods, err := st.runtimes(m)
		if err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if mr.Limits != nil {
			st.setLimits(*mr.Limits)
		}
		st.installManifest(m, wfs, mods, mr.Limits, st.replayStateChange(m, mr.StateChange), mr.Pin)
	case journal.KindRetire:
		if err := st.replayRetire(r); err != nil {
			return err
		}
	case journal.KindMove:
		if err := st.replayMove(r); err != nil {
			return err
		}
	case journal.KindConfig:
		var cr records.ConfigRec
		if err := schemas.UnmarshalTrusted(r.Body, &cr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if st.changeTo(journaledLimits(cr.Limits)) == 0 {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "limits record changes nothing"}
		}
	case journal.KindEvent:
		if it.err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: it.err.Error()}
		}
		ev := it.event
		if ev.Origin != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "emitted event without the step that emitted it"}
		}
		if st.man == nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "event before any manifest"}
		}
		targets, err := st.router.Route(ev.Schema, ev.Value)
		if err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		targets, perr := st.underPins(st.cur, ev.Schema, ev.Value, targets)
		if perr != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: perr.Workflow, Key: perr.Key, Msg: perr.Error()}
		}
		if err := st.idem.fresh(ev.IdempotencyKey); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		st.beginInput()
		rec := &records.EventRec{Schema: ev.Schema, Value: ev.Value, Stamp: ev.Stamp, IdempotencyKey: ev.IdempotencyKey}
		seq, _ := st.emitEvent(rec, targets, 0)
		if ev.IdempotencyKey != "" {
			key := idemKeyID(ev.IdempotencyKey)
			st.noteIngress(rec, seq, &key, idemSum(ev.Schema, ev.Value))
		} else {
			st.noteIngress(rec, seq, nil, idemID{})
		}
	case journal.KindStep, journal.KindFault:
		if it.err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: it.err.Error()}
		}
		var sr records.StepRec // records.FaultRec shares input, workflow and key
		var fr records.FaultRec
		if r.Kind == journal.KindFault {
			fr = *it.fault
			sr = records.StepRec{Input: fr.Input, Workflow: fr.Workflow, Key: fr.Key}
		} else {
			sr = *it.step
		}
		in := st.instances[instanceID(sr.Workflow, sr.Key)]
		if in == nil || len(in.mailbox) == 0 || in.mailbox[0].seq != sr.Input {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: sr.Workflow, Key: sr.Key,
				Msg: fmt.Sprintf("step consumes event %d, which is not next in that mailbox", sr.Input)}
		}
		if fr.Class == FaultBudget {
			// The live loop cut this instance's work off here; the budget
			// counts are the journal's, so replay must find the budget spent
			// too, and its record (reason included) must match.
			reason, over := st.budgetReason()
			if !over {
				return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: sr.Workflow, Key: sr.Key,
					Msg: fmt.Sprintf("budget fault, but input %d has not used up its work budget on replay", st.work.input)}
			}
			// failInstanceClass takes the failed input off the head of the
			// mailbox and keeps it for a retry, as the live loop did.
			in.lastSeq = sr.Input
			in.queued = false
			st.failInstanceClass(in, sr.Input, reason, FaultBudget)
			break
		}
		if fr.Class == FaultEnvironmental {
			// The host stopped this step live; nothing here could judge it
			// again, so replay adopts the record without running the step.
			// failInstanceClass takes the failed input off the head of the
			// mailbox and keeps it for a retry, as the live step did.
			in.lastSeq = sr.Input
			st.failInstanceClass(in, sr.Input, fr.Reason, fr.Class)
			break
		} else if fr.Class != FaultBusiness {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: sr.Workflow, Key: sr.Key, Msg: fmt.Sprintf("unknown fault class %q", fr.Class)}
		}
		d := in.mailbox[0]
		st.step(in, &d)
		if err := st.replayErr; err != nil {
			st.replayErr = nil
			return err
		}
		if len(in.mailbox) == 0 {
			st.settle(in)
		}
	case journal.KindRecover:
		var rr records.RecoverRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		// The same checks and the same action as live; the record it
		// produces (recomputed input and skipped count included) must match.
		stamp := rr.Stamp
		if _, _, err := st.recoverInstance(rr.Workflow, rr.Key, rr.Action, rr.Fault, rr.DropParked, &stamp); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: rr.Workflow, Key: rr.Key, Msg: err.Error()}
		}
	case journal.KindModule:
		var mr records.ModuleRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		switch mr.Action {
		case records.ModuleAside:
			// Decided live on wall time: adopted, never judged again.
			if err := st.replayAside(r, &mr); err != nil {
				return err
			}
		case records.ModuleResume:
			if mr.Stamp == nil {
				return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "a resume without a stamp"}
			}
			stamp := *mr.Stamp
			if _, err := st.resumeModule(mr.Module, mr.Reason, &stamp); err != nil {
				return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
			}
		default:
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: fmt.Sprintf("unknown module action %q", mr.Action)}
		}
	case journal.KindReceipt:
		var rr records.ReceiptRec
		if err := schemas.UnmarshalTrusted(r.Body, &rr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if _, err := st.ingestReceipt(&rr.Receipt, &rr.Stamp); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
	case journal.KindCancel:
		var cr records.CancelRec
		if err := schemas.UnmarshalTrusted(r.Body, &cr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		// The same checks and the same delivery as live; the record it
		// produces (effect and origin taken from the intent replay
		// rebuilt) must match.
		stamp := cr.Stamp
		if _, err := st.cancelIntent(cr.Intent, cr.Reason, cr.By, &stamp); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Workflow: cr.Workflow, Key: cr.Key, Msg: err.Error()}
		}
	case journal.KindDrop:
		var dr records.DropRec
		if err := schemas.UnmarshalTrusted(r.Body, &dr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		st.replayDrop(&dr, r.Body)
	case journal.KindFrame:
		var fr records.FrameRec
		if err := schemas.UnmarshalTrusted(r.Body, &fr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if _, err := st.ingestFrame(fr.Signed(), &fr.Stamp); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
	case journal.KindWorld:
		var wr records.WorldRec
		if err := schemas.UnmarshalTrusted(r.Body, &wr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if err := st.adoptWorld(wr.ID); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		st.emit(journal.KindWorld, schemas.MustMarshal(&wr))
	case journal.KindCheckpoint:
		var cr records.CheckpointRec
		if err := schemas.UnmarshalTrusted(r.Body, &cr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if err := st.replayCheckpoint(cr.Reason); err != nil {
			return err
		}
	case journal.KindSnapshot:
		var sr records.SnapshotRec
		if err := schemas.UnmarshalTrusted(r.Body, &sr); err != nil {
			return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: err.Error()}
		}
		if err := st.replaySnapshot(r.Seq, &sr); err != nil {
			return err
		}
		st.lastSnapshot = sr.Checkpoint
		st.emit(journal.KindSnapshot, r.Body)
	default:
		return &ReplayError{Seq: r.Seq, Kind: r.Kind, Msg: "record kind cannot start a replay step"}
	}
	return nil
}

// explainStep says how a replayed step differs from the journaled one, and
// which module's code produced it, so a changed module is named.
func (st *state) explainStep(want *records.StepRec, got journal.Record) string {
	what := "workflow " + want.Workflow
	if rt := st.wfs[want.Workflow]; rt != nil && rt.mod != nil {
		what = rt.mod.describe()
	}
	var diff string
	switch got.Kind {
	case journal.KindFault:
		var fr records.FaultRec
		_ = schemas.UnmarshalTrusted(got.Body, &fr)
		diff = fmt.Sprintf("the journal has a step, replay failed it: %s", fr.Reason)
	case journal.KindStep:
		var gr records.StepRec
		_ = schemas.UnmarshalTrusted(got.Body, &gr)
		switch {
		case !hashPtrEqual(want.StateHash, gr.StateHash):
			diff = fmt.Sprintf("state hash %s in the journal, %s on replay", hashText(want.StateHash), hashText(gr.StateHash))
		case len(want.Emitted) != len(gr.Emitted):
			diff = fmt.Sprintf("%d events emitted in the journal, %d on replay", len(want.Emitted), len(gr.Emitted))
		case len(want.Intents) != len(gr.Intents):
			diff = fmt.Sprintf("%d effects opened in the journal, %d on replay", len(want.Intents), len(gr.Intents))
		case want.WorkflowHash != gr.WorkflowHash:
			diff = fmt.Sprintf("workflow hash %s in the journal, %s on replay", want.WorkflowHash, gr.WorkflowHash)
		default:
			diff = "the emitted events or opened effects differ"
		}
	default:
		diff = fmt.Sprintf("replay produced a %s record", got.Kind)
	}
	return fmt.Sprintf("%s computed a different step than the journal recorded (%s): "+
		"its code changed under the same identity; restore the code that wrote this journal, or give changed code a new identity and apply it", what, diff)
}

func hashPtrEqual(a, b *schemas.Hash) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func hashText(h *schemas.Hash) string {
	if h == nil {
		return "none (cell deleted)"
	}
	return h.String()
}

func (st *state) artifact(h schemas.Hash) ([]byte, error) { return st.w.cas.Get(h) }
