// Package reminders is the example world examples/manifests/reminders: a
// timer per reminder.
package reminders

import (
	"fmt"

	"github.com/aos-kernel/aos/sdk"
)

// Module is examples/reminders; its one entrypoint, "step", runs
// com.example/reminder.step@1.
var Module = sdk.NewModule("examples/reminders")

func init() { sdk.Workflow(Module, "step", Step) }

// State is com.example/ReminderState@1.
type State struct {
	ReminderID string  `cbor:"reminder_id"`
	Text       string  `cbor:"text"`
	DueNs      uint64  `cbor:"due_ns"`
	Status     string  `cbor:"status"`                // "scheduled", "fired" or "cancelled"
	FiredAtNs  *uint64 `cbor:"fired_at_ns,omitempty"` // set when fired
	// CancelledBy and CancelReason are set when an operator cancelled the
	// reminder's timer (`aosd cancel`): who, and why.
	CancelledBy  string `cbor:"cancelled_by,omitempty"`
	CancelReason string `cbor:"cancel_reason,omitempty"`
}

// Reminder statuses.
const (
	Scheduled = "scheduled"
	Fired     = "fired"
	Cancelled = "cancelled"
)

// Set is com.example/ReminderSet@1.
type Set struct {
	ReminderID string `cbor:"reminder_id"`
	Text       string `cbor:"text"`
	DelayMs    uint64 `cbor:"delay_ms"`
}

// Step handles com.example/ReminderEvent@1. Set (re)schedules the reminder:
// text and due time (logical now + delay_ms) replace what the cell held, and
// a new sys/timer.set is asked for; a Set for a fired reminder schedules it
// again. The timer's ok receipt fires the reminder only if it is scheduled
// and the receipt's delivered_at_ns is at or after due_ns, so the receipt of
// a timer that an earlier Set asked for changes nothing. Cancelled
// (sys/EffectCancelled@1: an operator cancelled the reminder's timer, `aosd
// cancel`) cancels a scheduled reminder, recording who and why: it will not
// fire, and a Set schedules it again.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	switch ev.Tag {
	case "Set":
		wc, err := c.Context()
		if err != nil {
			return nil, err
		}
		var s Set
		if err := ev.As(&s); err != nil {
			return nil, err
		}
		due := wc.LogicalNowNs + s.DelayMs*1_000_000
		c.Timer(due, s.ReminderID)
		return &State{ReminderID: s.ReminderID, Text: s.Text, DueNs: due, Status: Scheduled}, nil
	case "Receipt":
		if st == nil {
			return nil, nil
		}
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		if r.Effect != sdk.EffectTimerSet || !r.OK() || st.Status != Scheduled {
			return st, nil
		}
		var p sdk.TimerSetReceipt
		if err := r.DecodePayload(&p); err != nil {
			return nil, err
		}
		if p.DeliveredAtNs < st.DueNs {
			return st, nil // an earlier Set's timer: not due yet
		}
		st.Status, st.FiredAtNs = Fired, &p.DeliveredAtNs
		return st, nil
	case "Cancelled":
		if st == nil {
			return nil, nil
		}
		var x sdk.EffectCancelled
		if err := ev.As(&x); err != nil {
			return nil, err
		}
		if st.Status == Scheduled {
			st.Status, st.CancelledBy, st.CancelReason = Cancelled, x.By, x.Reason
		}
		return st, nil
	default:
		return nil, fmt.Errorf("reminders: unknown event arm %q", ev.Tag)
	}
}
