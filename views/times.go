package views

import (
	"context"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
)

// Logical time in traces and timelines. Time enters a world only through
// the ingress stamp journaled with each input from outside (events,
// receipts, frames, cancels, recovers), so every entry's time is read from
// the journal, never from a clock: a record's own stamp, or, for what has
// none (a step, a fault, an intent), the stamp of the input it stepped.

// intentIdentity copies an intent's origin, idempotency key and issuer ref
// into its JSON entry.
func intentIdentity(out *TraceEntry, e records.TraceEntry) {
	out.NowNs = e.NowNs
	if e.Kind != journal.KindIntent {
		return
	}
	out.OriginWorkflow, out.IdempotencyKey, out.IssuerRef = e.OriginWorkflow, e.IdempotencyKey, e.IssuerRef
	if len(e.OriginKey) > 0 {
		out.OriginKey = valueJSON(e.OriginKey)
	}
}

// StampTimes fills in the logical time of the entries that have no stamp
// of their own: a step or a fault takes its input's, an intent its
// emitting step's input's. An input not among the entries is read from
// src (one record each, remembered across the entries); one retention
// dropped is left unknown (0).
func StampTimes(ctx context.Context, src records.Source, es []TraceEntry) error {
	at := make(map[uint64]uint64, len(es)) // seq -> now_ns of the entries that carry one
	for _, e := range es {
		if e.NowNs != 0 {
			at[e.Seq] = e.NowNs
		}
	}
	inputOf := map[uint64]uint64{} // a step's seq -> its input's seq
	for _, e := range es {
		if e.Kind == journal.KindStep {
			inputOf[e.Seq] = e.Input
		}
	}
	timeOf := func(seq uint64) (uint64, error) {
		if t, ok := at[seq]; ok {
			return t, nil
		}
		t, input, err := recordTime(ctx, src, seq)
		if err != nil {
			return 0, err
		}
		if t == 0 && input != 0 { // a step read from the journal: its input's time
			if t, _, err = recordTime(ctx, src, input); err != nil {
				return 0, err
			}
		}
		at[seq] = t
		return t, nil
	}
	for i := range es {
		e := &es[i]
		if e.NowNs != 0 {
			continue
		}
		var err error
		switch e.Kind {
		case journal.KindStep, journal.KindFault:
			e.NowNs, err = timeOf(e.Input)
		case journal.KindIntent: // Input is the emitting step
			if in, ok := inputOf[e.Input]; ok {
				e.NowNs, err = timeOf(in)
			} else {
				e.NowNs, err = timeOf(e.Input)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recordTime reads the record at seq: its stamp's now_ns, or, for a step,
// 0 and its input's seq. A seq retention dropped gives 0, 0.
func recordTime(ctx context.Context, src records.Source, seq uint64) (now, input uint64, err error) {
	if seq == 0 || seq < src.First() {
		return 0, 0, nil
	}
	err = src.Read(seq, func(r journal.Record) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rec, err := records.Decode(r)
		if err != nil {
			return false, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		if st, ok := rec.(*records.StepRec); ok {
			input = st.Input
		} else if e, ok := records.Entry(r.Seq, r.Kind, rec); ok {
			now = e.NowNs
		}
		return false, nil
	})
	if tr := (*journal.Truncation)(nil); errors.As(err, &tr) {
		return 0, 0, nil // dropped meanwhile: unknown
	}
	return now, input, err
}
