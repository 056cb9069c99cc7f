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
	Status     string  `cbor:"status"`                // "scheduled" or "fired"
	FiredAtNs  *uint64 `cbor:"fired_at_ns,omitempty"` // set when fired
}

// Set is com.example/ReminderSet@1.
type Set struct {
	ReminderID string `cbor:"reminder_id"`
	Text       string `cbor:"text"`
	DelayMs    uint64 `cbor:"delay_ms"`
}

// Step handles com.example/ReminderEvent@1: Set asks for a sys/timer.set at
// logical now + delay_ms (a second Set is ignored), and the timer's ok
// receipt marks the reminder fired.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	switch ev.Tag {
	case "Set":
		if st != nil {
			return st, nil // a reminder is set once
		}
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
		return &State{ReminderID: s.ReminderID, Text: s.Text, DueNs: due, Status: "scheduled"}, nil
	case "Receipt":
		if st == nil {
			return nil, nil
		}
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		if r.Effect != sdk.EffectTimerSet || !r.OK() {
			return st, nil
		}
		var p sdk.TimerSetReceipt
		if err := r.DecodePayload(&p); err != nil {
			return nil, err
		}
		st.Status, st.FiredAtNs = "fired", &p.DeliveredAtNs
		return st, nil
	default:
		return nil, fmt.Errorf("reminders: unknown event arm %q", ev.Tag)
	}
}
