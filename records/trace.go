package records

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/schemas"
)

// Source is the journal as a trace reads it: records from a seq on, in
// order, until fn says stop, and the lowest seq it still holds
// (*journal.Memory, kernel.World.Journal()). A trace reads what the
// journal holds: once retention dropped the oldest records, it starts at
// First (journal.ReadRetained).
type Source = journal.Retained

// TraceEntry is one line of a timeline: the fields of one record that a
// person reading an instance's or intent's life needs. Value is canonical
// CBOR (an event's value, an intent's params, a receipt's or frame's
// payload); the daemon renders it as JSON.
type TraceEntry struct {
	Seq       uint64
	Kind      journal.Kind
	Schema    string
	Input     uint64
	StateHash *schemas.Hash
	Deleted   bool
	Emitted   []uint64
	Intents   []schemas.Hash
	Effect    string
	Status    string
	Executor  string
	Attempt   uint64 // a receipt's attempt
	FrameSeq  uint64 // a frame's own number for its intent (its seq)
	Reason    string
	Value     []byte
	Action    string // a recover: retry, reset or skip
	Fault     uint64 // a recover: the fault record it answers
	Skipped   uint64 // a recover: events not delivered while failed (journals from before parking)
	Parked    uint64 // a recover: events parked for the instance, delivered after it (or dropped)
	Dropped   bool   // a recover: the parked events were dropped (drop_parked)
	By        string // a cancel: who asked for it, as the request said
	// NowNs is the record's own ingress stamp (now_ns) when it has one
	// (events, receipts, frames, cancels, recovers); 0 for steps, intents,
	// faults and drops, which happen at the time of their input.
	NowNs uint64
	// An intent's identity beyond its hash: who opened it, its idempotency
	// key and issuer ref, as the intent record holds them.
	OriginWorkflow string
	OriginKey      []byte
	IdempotencyKey []byte
	IssuerRef      string
}

// Trace returns the durable timeline of one instance: events delivered to it,
// its steps with resulting state hashes, intents opened, stream frames,
// receipts delivered or dropped, and faults, as far back as the journal
// goes (from First, once retention dropped the oldest records). It scans
// the journal, decoding only the records whose bytes contain the workflow
// name and key (or one of the instance's intent hashes): a record that
// lacks them cannot be part of the timeline.
func Trace(ctx context.Context, src Source, workflow string, key []byte) ([]TraceEntry, error) {
	might, match := instanceFilters(workflow, key)
	return trace(ctx, src, 1, 0, might, match)
}

type (
	// mightFilter sees a record's raw body and may say false only for
	// records the matchFilter would refuse.
	mightFilter func(kind journal.Kind, body []byte) bool
	// matchFilter decides on a decoded record; for events it is asked once
	// per target.
	matchFilter func(kind journal.Kind, wf string, key []byte, intent schemas.Hash) bool
)

// TracePage is one page of Trace: the instance's entries after seq after,
// at most limit of them (limit > 0). known are the intents the instance
// opened at or before after (InstanceIntents), so that the receipts,
// frames and drops of intents opened on an earlier page are shown. The
// scan starts after after and stops once the page is full; full says it
// did (more entries may follow).
func TracePage(ctx context.Context, src Source, workflow string, key []byte, after uint64, limit int, known []schemas.Hash) (es []TraceEntry, full bool, err error) {
	might, match := instanceFiltersKnowing(workflow, key, known)
	out, err := trace(ctx, src, after+1, limit, might, match)
	return out, len(out) >= limit, err
}

// InstanceIntents returns the hashes of the intents the instance opened in
// the journal's records from seq from to seq upTo, in the order opened. It
// decodes only the intent records whose bytes hold the workflow name and
// key.
func InstanceIntents(ctx context.Context, src Source, workflow string, key []byte, from, upTo uint64) ([]schemas.Hash, error) {
	var out []schemas.Hash
	if from > upTo {
		return nil, nil
	}
	wfb := []byte(workflow)
	_, err := journal.ReadRetained(src, from, func(r journal.Record) (bool, error) {
		if r.Seq > upTo {
			return false, nil
		}
		if r.Kind != journal.KindIntent || !bytes.Contains(r.Body, wfb) || !bytes.Contains(r.Body, key) {
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rec, err := Decode(r)
		if err != nil {
			return false, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		if ir, ok := rec.(*IntentRec); ok && ir.OriginWorkflow == workflow && bytes.Equal(ir.OriginKey, key) {
			out = append(out, ir.Hash)
		}
		return r.Seq < upTo, nil
	})
	return out, err
}

// instanceFilters select one instance's timeline.
func instanceFilters(workflow string, key []byte) (mightFilter, matchFilter) {
	return instanceFiltersKnowing(workflow, key, nil)
}

// instanceFiltersKnowing select one instance's timeline, knowing already
// the intents it opened before the records they see.
func instanceFiltersKnowing(workflow string, key []byte, known []schemas.Hash) (mightFilter, matchFilter) {
	mine := make(map[schemas.Hash]bool, len(known))
	for _, h := range known {
		mine[h] = true
	}
	wfb := []byte(workflow)
	might := func(kind journal.Kind, body []byte) bool {
		switch kind {
		case journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			if len(mine) > maxIntentPrefilter {
				return true
			}
			for h := range mine {
				if bytes.Contains(body, h[:]) {
					return true
				}
			}
			return false
		}
		return bytes.Contains(body, wfb) && bytes.Contains(body, key)
	}
	return might, func(kind journal.Kind, wf string, k []byte, intent schemas.Hash) bool {
		switch kind {
		case journal.KindIntent:
			if wf == workflow && bytes.Equal(k, key) {
				mine[intent] = true
				return true
			}
			return false
		case journal.KindReceipt, journal.KindDrop, journal.KindFrame:
			return mine[intent]
		}
		return wf == workflow && bytes.Equal(k, key)
	}
}

// maxIntentPrefilter: beyond this many intents, searching a record's bytes
// for each costs more than decoding it.
const maxIntentPrefilter = 32

// TraceIntent returns one intent's life: opened, stream frames, receipts
// delivered or dropped.
func TraceIntent(ctx context.Context, src Source, h schemas.Hash) ([]TraceEntry, error) {
	might, match := intentFilters(h)
	return trace(ctx, src, 1, 0, might, match)
}

// intentFilters select one intent's records.
func intentFilters(h schemas.Hash) (mightFilter, matchFilter) {
	might := func(kind journal.Kind, body []byte) bool {
		switch kind {
		case journal.KindIntent, journal.KindReceipt, journal.KindDrop, journal.KindFrame, journal.KindCancel:
			return bytes.Contains(body, h[:])
		}
		return false
	}
	return might, func(kind journal.Kind, _ string, _ []byte, intent schemas.Hash) bool {
		switch kind {
		case journal.KindIntent, journal.KindReceipt, journal.KindDrop, journal.KindFrame, journal.KindCancel:
			return intent == h
		}
		return false
	}
}

// trace scans the journal from seq from and keeps the entries match
// accepts, stopping once it holds limit of them (0: no limit). might sees
// each record's raw body first and may only say false for records match
// would refuse; for events match is asked once per target.
func trace(ctx context.Context, src Source, from uint64, limit int, might mightFilter, match matchFilter) ([]TraceEntry, error) {
	out := []TraceEntry{}
	_, err := journal.ReadRetained(src, from, func(r journal.Record) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if !traced(r.Kind) || !might(r.Kind, r.Body) {
			return true, nil
		}
		rec, err := Decode(r)
		if err != nil {
			return false, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		if e, ok := traceEntry(r.Seq, r.Kind, rec, match); ok {
			out = append(out, e)
		}
		return limit == 0 || len(out) < limit, nil
	})
	return out, err
}

// TraceUnfiltered and TraceIntentUnfiltered are Trace and TraceIntent
// decoding every record the trace shows, with no byte prefilter: the
// reference tests hold the prefilter to (it must not change a trace).
func TraceUnfiltered(ctx context.Context, src Source, workflow string, key []byte) ([]TraceEntry, error) {
	_, match := instanceFilters(workflow, key)
	return trace(ctx, src, 1, 0, everyRecord, match)
}

// TraceIntentUnfiltered is TraceIntent with no byte prefilter (see
// TraceUnfiltered).
func TraceIntentUnfiltered(ctx context.Context, src Source, h schemas.Hash) ([]TraceEntry, error) {
	_, match := intentFilters(h)
	return trace(ctx, src, 1, 0, everyRecord, match)
}

func everyRecord(journal.Kind, []byte) bool { return true }

// traced says whether a trace shows records of kind; others are not
// decoded (a manifest record naming the workflow is large and not shown).
func traced(kind journal.Kind) bool {
	switch kind {
	case journal.KindEvent, journal.KindStep, journal.KindFault, journal.KindRecover,
		journal.KindIntent, journal.KindReceipt, journal.KindDrop, journal.KindFrame, journal.KindCancel:
		return true
	}
	return false
}

// Entry is the trace entry of a decoded record (Decode), for a record kind
// a trace shows; ok is false for other kinds.
func Entry(seq uint64, kind journal.Kind, rec any) (e TraceEntry, ok bool) {
	return traceEntry(seq, kind, rec, func(journal.Kind, string, []byte, schemas.Hash) bool { return true })
}

func traceEntry(seq uint64, kind journal.Kind, rec any, match matchFilter) (TraceEntry, bool) {
	e := TraceEntry{Seq: seq, Kind: kind}
	var none schemas.Hash
	switch r := rec.(type) {
	case *EventRec:
		for _, t := range r.Targets {
			if match(kind, t.Workflow, t.Key, none) {
				e.Schema, e.Value, e.NowNs = r.Schema, r.Value, r.Stamp.NowNs
				return e, true
			}
		}
		return e, false
	case *StepRec:
		e.Input, e.StateHash, e.Deleted, e.Emitted, e.Intents = r.Input, r.StateHash, r.StateHash == nil, r.Emitted, r.Intents
		return e, match(kind, r.Workflow, r.Key, none)
	case *FaultRec:
		e.Input, e.Reason = r.Input, r.Reason
		return e, match(kind, r.Workflow, r.Key, none)
	case *RecoverRec:
		e.Input, e.Action, e.Fault, e.Skipped, e.Parked, e.Dropped = r.Input, r.Action, r.Fault, r.Skipped, r.Parked, r.DropParked
		e.NowNs = r.Stamp.NowNs
		return e, match(kind, r.Workflow, r.Key, none)
	case *IntentRec:
		e.Effect, e.Intents, e.Input, e.Value = r.Effect, []schemas.Hash{r.Hash}, r.EmittedAt, r.Params
		e.OriginWorkflow, e.OriginKey, e.IdempotencyKey, e.IssuerRef = r.OriginWorkflow, r.OriginKey, r.IdempotencyKey, r.IssuerRef
		return e, match(kind, r.OriginWorkflow, r.OriginKey, r.Hash)
	case *ReceiptRec:
		sr := &r.Receipt
		e.Effect, e.Intents, e.Status, e.Executor, e.Reason = sr.Effect, []schemas.Hash{sr.Intent}, string(sr.Status), sr.Executor, r.Rejected
		e.Attempt, e.Value, e.NowNs = sr.Attempt, sr.Payload, r.Stamp.NowNs
		return e, match(kind, "", nil, sr.Intent)
	case *DropRec:
		sr := &r.Receipt
		e.Effect, e.Intents, e.Status, e.Executor, e.Reason = sr.Effect, []schemas.Hash{sr.Intent}, string(sr.Status), sr.Executor, r.Reason
		return e, match(kind, "", nil, sr.Intent)
	case *FrameRec:
		e.Intents, e.Executor, e.FrameSeq, e.Value, e.NowNs = []schemas.Hash{r.Intent}, r.Executor, r.Seq, r.Payload, r.Stamp.NowNs
		return e, match(kind, "", nil, r.Intent)
	case *CancelRec:
		e.Effect, e.Intents, e.Reason, e.By, e.NowNs = r.Effect, []schemas.Hash{r.Intent}, r.Reason, r.By, r.Stamp.NowNs
		return e, match(kind, r.Workflow, r.Key, r.Intent)
	}
	return e, false
}
