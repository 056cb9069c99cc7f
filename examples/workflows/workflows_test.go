package workflows_test

import (
	"reflect"
	"testing"

	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

func cb(v any) []byte {
	if v == nil {
		return nil
	}
	return schemas.MustMarshal(v)
}

func arm(tag string, v map[string]any) map[string]any {
	return map[string]any{"$tag": tag, "$value": v}
}

func ctx(now uint64) []byte { return cb(map[string]any{"logical_now_ns": now}) }

type eff struct {
	Effect string
	Params any
}

type ev struct {
	Schema string
	Value  any
}

type stepCase struct {
	name    string
	fn      modules.StepFunc
	state   any // nil: new cell
	event   any
	ctx     []byte
	want    any // decoded state; nil: deleted
	events  []ev
	effects []eff
	wantErr bool
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	if b == nil {
		return nil
	}
	v, err := schemas.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// norm round-trips a Go value through canonical CBOR so expectations compare
// with decoded outputs (integers become uint64/int64 as the decoder gives).
func norm(t *testing.T, v any) any {
	if v == nil {
		return nil
	}
	return decode(t, cb(v))
}

func run(t *testing.T, cases []stepCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := c.fn(&modules.Input{Version: 1, State: cb(c.state), Event: modules.EventIn{Value: cb(c.event)}, Ctx: c.ctx})
			if c.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := decode(t, out.State), norm(t, c.want); !reflect.DeepEqual(got, want) {
				t.Errorf("state = %#v, want %#v", got, want)
			}
			var gotEv []ev
			for _, e := range out.DomainEvents {
				gotEv = append(gotEv, ev{e.Schema, decode(t, e.Value)})
			}
			var wantEv []ev
			for _, e := range c.events {
				wantEv = append(wantEv, ev{e.Schema, norm(t, e.Value)})
			}
			if !reflect.DeepEqual(gotEv, wantEv) {
				t.Errorf("events = %#v, want %#v", gotEv, wantEv)
			}
			var gotEff []eff
			for _, e := range out.Effects {
				gotEff = append(gotEff, eff{e.Effect, decode(t, e.Params)})
			}
			var wantEff []eff
			for _, e := range c.effects {
				wantEff = append(wantEff, eff{e.Effect, norm(t, e.Params)})
			}
			if !reflect.DeepEqual(gotEff, wantEff) {
				t.Errorf("effects = %#v, want %#v", gotEff, wantEff)
			}
		})
	}
}

type m = map[string]any

func TestCounter(t *testing.T) {
	run(t, []stepCase{
		{name: "new cell", fn: workflows.CounterStep, event: m{"key": "a", "by": 2}, want: m{"count": 2}},
		{name: "adds", fn: workflows.CounterStep, state: m{"count": 5}, event: m{"key": "a", "by": -7}, want: m{"count": -2}},
		{name: "bad state", fn: workflows.CounterStep, state: m{"count": "x"}, event: m{"key": "a", "by": 1}, wantErr: true},
	})
}

func TestNotes(t *testing.T) {
	created := m{"title": "t", "body": "", "edits": 0, "archived": false}
	run(t, []stepCase{
		{name: "created", fn: workflows.NotesStep, event: arm("Created", m{"note_id": "n", "title": "t"}), want: created},
		{name: "edited", fn: workflows.NotesStep, state: created, event: arm("Edited", m{"note_id": "n", "body": "b"}),
			want: m{"title": "t", "body": "b", "edits": 1, "archived": false}},
		{name: "archived", fn: workflows.NotesStep, state: created, event: arm("Archived", m{"note_id": "n"}),
			want: m{"title": "t", "body": "", "edits": 0, "archived": true}},
		{name: "edit after archive ignored", fn: workflows.NotesStep, state: m{"title": "t", "body": "", "edits": 0, "archived": true},
			event: arm("Edited", m{"note_id": "n", "body": "b"}), want: m{"title": "t", "body": "", "edits": 0, "archived": true}},
		{name: "not a variant", fn: workflows.NotesStep, event: m{"note_id": "n"}, wantErr: true},
		{name: "unknown arm", fn: workflows.NotesStep, event: arm("Burn", m{}), wantErr: true},
	})
}

func TestReminders(t *testing.T) {
	sched := m{"reminder_id": "r", "text": "hi", "due_ns": 1_000 + 5_000_000, "status": "scheduled"}
	receipt := func(effect, status string, payload any) map[string]any {
		return arm("Receipt", m{"effect": effect, "status": status, "payload": cb(payload)})
	}
	run(t, []stepCase{
		{name: "set asks for a timer", fn: workflows.RemindersStep, ctx: ctx(1_000),
			event: arm("Set", m{"reminder_id": "r", "text": "hi", "delay_ms": 5}), want: sched,
			effects: []eff{{workflows.EffectTimerSet, m{"deliver_at_ns": 1_000 + 5_000_000, "key": "r"}}}},
		{name: "set without context", fn: workflows.RemindersStep,
			event: arm("Set", m{"reminder_id": "r", "text": "hi", "delay_ms": 5}), wantErr: true},
		{name: "second set ignored", fn: workflows.RemindersStep, ctx: ctx(9), state: sched,
			event: arm("Set", m{"reminder_id": "r", "text": "other", "delay_ms": 1}), want: sched},
		{name: "receipt fires", fn: workflows.RemindersStep, state: sched,
			event: receipt(workflows.EffectTimerSet, "ok", m{"delivered_at_ns": 7_000_000, "key": "r"}),
			want:  m{"reminder_id": "r", "text": "hi", "due_ns": 5_001_000, "status": "fired", "fired_at_ns": 7_000_000}},
		{name: "error receipt ignored", fn: workflows.RemindersStep, state: sched,
			event: receipt(workflows.EffectTimerSet, "error", m{}), want: sched},
	})
}

func TestOrders(t *testing.T) {
	open := m{"order_id": "o1", "amount_cents": 500, "customer": "c", "status": "awaiting_payment"}
	with := func(status string, extra ...string) m {
		s := m{"order_id": "o1", "amount_cents": 500, "customer": "c", "status": status}
		for i := 0; i+1 < len(extra); i += 2 {
			s[extra[i]] = extra[i+1]
		}
		return s
	}
	receipt := func(effect, status string, payload any) map[string]any {
		return arm("Receipt", m{"effect": effect, "status": status, "payload": cb(payload)})
	}
	run(t, []stepCase{
		{name: "created charges and sets expiry", fn: workflows.OrdersStep, ctx: ctx(10),
			event: arm("Created", m{"order_id": "o1", "amount_cents": 500, "customer": "c"}), want: open,
			effects: []eff{
				{workflows.EffectCharge, m{"order_id": "o1", "amount_cents": 500, "customer": "c"}},
				{workflows.EffectTimerSet, m{"deliver_at_ns": 10 + workflows.OrderExpiry, "key": "expire:o1"}},
			}},
		{name: "duplicate create ignored", fn: workflows.OrdersStep, ctx: ctx(10), state: open,
			event: arm("Created", m{"order_id": "o1", "amount_cents": 9, "customer": "x"}), want: open},
		{name: "charge succeeded", fn: workflows.OrdersStep, state: open,
			event: receipt(workflows.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: with("paid", "charge_id", "ch")},
		{name: "charge declined", fn: workflows.OrdersStep, state: open,
			event: receipt(workflows.EffectCharge, "ok", m{"charge_id": "ch", "status": "declined"}), want: with("payment_failed")},
		{name: "charge timed out", fn: workflows.OrdersStep, state: open,
			event: receipt(workflows.EffectCharge, "timeout", m{}), want: with("payment_failed")},
		{name: "expiry timer", fn: workflows.OrdersStep, state: open,
			event: receipt(workflows.EffectTimerSet, "ok", m{"delivered_at_ns": 1, "key": "expire:o1"}), want: with("expired")},
		{name: "expiry after paid ignored", fn: workflows.OrdersStep, state: with("paid", "charge_id", "ch"),
			event: receipt(workflows.EffectTimerSet, "ok", m{"delivered_at_ns": 1, "key": "expire:o1"}), want: with("paid", "charge_id", "ch")},
		{name: "cancel", fn: workflows.OrdersStep, state: open, event: arm("Cancel", m{"order_id": "o1"}), want: with("cancelled")},
		{name: "rejected receipt", fn: workflows.OrdersStep, state: open,
			event: arm("Rejected", m{"effect": workflows.EffectCharge, "error": "bad"}), want: with("payment_failed")},
	})
}

func TestChoreography(t *testing.T) {
	run(t, []stepCase{
		{name: "orders emits paid", fn: workflows.ChoreoOrdersStep, event: m{"order_id": "o", "amount_cents": 7},
			want: m{"amount_cents": 7, "status": "paid"}, events: []ev{{workflows.EventOrderPaid, m{"order_id": "o", "amount_cents": 7}}}},
		{name: "orders idempotent", fn: workflows.ChoreoOrdersStep, state: m{"amount_cents": 7, "status": "paid"},
			event: m{"order_id": "o", "amount_cents": 7}, want: m{"amount_cents": 7, "status": "paid"}},
		{name: "shipping emits shipped", fn: workflows.ChoreoShippingStep, event: m{"order_id": "o", "amount_cents": 7},
			want: m{"shipment_id": "ship-o", "status": "shipped"}, events: []ev{{workflows.EventShipped, m{"order_id": "o", "shipment_id": "ship-o"}}}},
		{name: "audit paid", fn: workflows.ChoreoAuditStep, event: arm("Paid", m{"order_id": "o", "amount_cents": 7}),
			want: m{"paid": 1, "shipped": 0, "paid_cents": 7}},
		{name: "audit shipped", fn: workflows.ChoreoAuditStep, state: m{"paid": 1, "shipped": 0, "paid_cents": 7},
			event: arm("Shipped", m{"order_id": "o", "shipment_id": "s"}), want: m{"paid": 1, "shipped": 1, "paid_cents": 7}},
	})
}

func TestRegisterNamesEveryExampleModule(t *testing.T) {
	b := modules.NewBuiltins()
	workflows.Register(b)
	for _, n := range []string{"examples/counter", "examples/orders", "examples/notes", "examples/reminders",
		"examples/choreo.orders", "examples/choreo.shipping", "examples/choreo.audit"} {
		if _, ok := b.Lookup(n, "step"); !ok {
			t.Errorf("%s/step not registered", n)
		}
	}
}
