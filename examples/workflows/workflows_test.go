package workflows_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/examples/workflows/choreography"
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/examples/workflows/notes"
	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/examples/workflows/reminders"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
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

func ctx(now uint64) []byte {
	return cb(map[string]any{
		"now_ns": now + 7, "logical_now_ns": now, "entropy": bytes.Repeat([]byte{1}, 32), "journal_height": 3,
		"event_hash": "sha256:" + strings.Repeat("a", 64), "manifest_hash": "sha256:" + strings.Repeat("b", 64),
		"workflow": "com.example/w@1", "workflow_hash": "sha256:" + strings.Repeat("c", 64), "cell_mode": true,
	})
}

// receipt is a full sys/EffectReceiptEnvelope@1 as the kernel delivers it.
func receipt(effect, status string, payload any) map[string]any {
	return arm("Receipt", m{
		"origin_workflow": "com.example/w@1", "origin_workflow_hash": "sha256:" + strings.Repeat("c", 64),
		"origin_key": cb("o1"), "intent_hash": "sha256:" + strings.Repeat("d", 64), "effect": effect,
		"executor": "aos/builtin", "payload": cb(payload), "status": status, "emitted_at_seq": 4, "signature": []byte{9},
	})
}

// thinReceipt has only the fields the examples read: decoding is lenient
// about the rest, as the kernel validated them.
func thinReceipt(effect, status string, payload any) map[string]any {
	return arm("Receipt", m{"effect": effect, "status": status, "payload": cb(payload)})
}

func rejected(effect string) map[string]any {
	return arm("Rejected", m{"origin_workflow": "com.example/w@1", "origin_key": cb("o1"),
		"intent_hash": "sha256:" + strings.Repeat("d", 64), "effect": effect, "error": "bad", "emitted_at_seq": 4})
}

type eff struct {
	Effect string
	Params any
	Key    string // idempotency key
	Ref    string // issuer ref
}

type ev struct {
	Schema string
	Value  any
}

type stepCase struct {
	name    string
	mod     *sdk.Module
	entry   string // "" is "step"
	state   any    // nil: new cell
	event   any
	ctx     []byte
	want    any // state; nil: deleted
	events  []ev
	effects []eff
	// fault is the step's exact failure reason, or its start when it ends
	// in "…".
	fault string
}

func (c *stepCase) input() *modules.Input {
	return &modules.Input{Version: 1, State: cb(c.state), Event: modules.EventIn{Schema: "com.example/Ev@1", Value: cb(c.event)}, Ctx: c.ctx}
}

func (c *stepCase) entrypoint() string {
	if c.entry == "" {
		return "step"
	}
	return c.entry
}

// native runs c through its module's builtin.
func native(t *testing.T, c *stepCase) (*modules.Output, error) {
	t.Helper()
	fn, ok := c.mod.Builtin("test").Entrypoints[c.entrypoint()]
	if !ok {
		t.Fatalf("%s has no entrypoint %s", c.mod.Name(), c.entrypoint())
	}
	return fn(c.input())
}

func checkFault(t *testing.T, c *stepCase, got string) {
	t.Helper()
	if p, ok := strings.CutSuffix(c.fault, "…"); ok {
		if !strings.HasPrefix(got, p) || len(got) == len(p) {
			t.Fatalf("fault %q, want %q and a reason", got, c.fault)
		}
	} else if got != c.fault {
		t.Fatalf("fault %q\nwant  %q", got, c.fault)
	}
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

func run(t *testing.T, cases []stepCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := native(t, &c)
			if c.fault != "" {
				var f modules.Fault
				if !errors.As(err, &f) {
					t.Fatalf("want fault %q, got %v (output %+v)", c.fault, err, out)
				}
				checkFault(t, &c, string(f))
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.State, cb(c.want)) {
				t.Errorf("state = %#v, want %#v", decode(t, out.State), c.want)
			}
			var gotEv, wantEv []ev
			for _, e := range out.DomainEvents {
				gotEv = append(gotEv, ev{e.Schema, decode(t, e.Value)})
			}
			for _, e := range c.events {
				wantEv = append(wantEv, ev{e.Schema, decode(t, cb(e.Value))})
			}
			if !reflect.DeepEqual(gotEv, wantEv) {
				t.Errorf("events = %#v, want %#v", gotEv, wantEv)
			}
			var gotEff, wantEff []eff
			for _, e := range out.Effects {
				gotEff = append(gotEff, eff{e.Effect, decode(t, e.Params), string(e.IdempotencyKey), e.IssuerRef})
			}
			for _, e := range c.effects {
				wantEff = append(wantEff, eff{e.Effect, decode(t, cb(e.Params)), e.Key, e.Ref})
			}
			if !reflect.DeepEqual(gotEff, wantEff) {
				t.Errorf("effects = %#v, want %#v", gotEff, wantEff)
			}
			if out.Ann != nil {
				t.Errorf("annotation %x", out.Ann)
			}
		})
	}
}

type m = map[string]any

func counterCases() []stepCase {
	return []stepCase{
		{name: "new cell", mod: counter.Module, ctx: ctx(1), event: m{"key": "a", "by": 2}, want: m{"count": 2}},
		{name: "adds", mod: counter.Module, ctx: ctx(1), state: m{"count": 5}, event: m{"key": "a", "by": -7}, want: m{"count": -2}},
		{name: "zero stays", mod: counter.Module, state: m{"count": 0}, event: m{"key": "a", "by": 0}, want: m{"count": 0}},
		{name: "bad state", mod: counter.Module, state: m{"count": "x"}, event: m{"key": "a", "by": 1},
			fault: "state does not decode into counter.State: cbor: cannot unmarshal UTF-8 text string into Go struct field counter.State.count of type int64"},
		{name: "bad event", mod: counter.Module, event: m{"key": "a", "by": 1.5}, fault: "event does not decode into counter.Event: …"},
	}
}

func notesCases() []stepCase {
	created := m{"title": "t", "body": "", "edits": 0, "archived": false}
	archived := m{"title": "t", "body": "", "edits": 0, "archived": true}
	return []stepCase{
		{name: "created", mod: notes.Module, ctx: ctx(1), event: arm("Created", m{"note_id": "n", "title": "t"}), want: created},
		{name: "created again ignored", mod: notes.Module, state: m{"title": "t", "body": "b", "edits": 2, "archived": false},
			event: arm("Created", m{"note_id": "n", "title": "u"}), want: m{"title": "t", "body": "b", "edits": 2, "archived": false}},
		{name: "created on archived ignored", mod: notes.Module, state: archived,
			event: arm("Created", m{"note_id": "n", "title": "u"}), want: archived},
		{name: "edited", mod: notes.Module, state: created, event: arm("Edited", m{"note_id": "n", "body": "b"}),
			want: m{"title": "t", "body": "b", "edits": 1, "archived": false}},
		{name: "edited missing note ignored", mod: notes.Module, event: arm("Edited", m{"note_id": "n", "body": "b"}), want: nil},
		{name: "archived", mod: notes.Module, state: created, event: arm("Archived", m{"note_id": "n"}), want: archived},
		{name: "archived missing note ignored", mod: notes.Module, event: arm("Archived", m{"note_id": "n"}), want: nil},
		{name: "edit after archive ignored", mod: notes.Module, state: archived,
			event: arm("Edited", m{"note_id": "n", "body": "b"}), want: archived},
		{name: "unknown arm after archive ignored", mod: notes.Module, state: archived, event: arm("Burn", m{}), want: archived},
		{name: "not a variant", mod: notes.Module, event: m{"note_id": "n"},
			fault: `event does not decode into sdk.Variant: not a variant value (want a map of "$tag" and "$value")`},
		{name: "unknown arm", mod: notes.Module, event: arm("Burn", m{}), fault: `step returned an error: notes: unknown event arm "Burn"`},
	}
}

func remindersCases() []stepCase {
	sched := m{"reminder_id": "r", "text": "hi", "due_ns": 1_000 + 5_000_000, "status": "scheduled"}
	fired := m{"reminder_id": "r", "text": "hi", "due_ns": 5_001_000, "status": "fired", "fired_at_ns": 7_000_000}
	return []stepCase{
		{name: "set asks for a timer", mod: reminders.Module, ctx: ctx(1_000),
			event: arm("Set", m{"reminder_id": "r", "text": "hi", "delay_ms": 5}), want: sched,
			effects: []eff{{Effect: sdk.EffectTimerSet, Params: m{"deliver_at_ns": 1_000 + 5_000_000, "key": "r"}}}},
		{name: "set with no delay", mod: reminders.Module, ctx: ctx(9),
			event: arm("Set", m{"reminder_id": "r", "text": "", "delay_ms": 0}), want: m{"reminder_id": "r", "text": "", "due_ns": 9, "status": "scheduled"},
			effects: []eff{{Effect: sdk.EffectTimerSet, Params: m{"deliver_at_ns": 9, "key": "r"}}}},
		{name: "set without context", mod: reminders.Module,
			event: arm("Set", m{"reminder_id": "r", "text": "hi", "delay_ms": 5}),
			fault: `step returned an error: workflow context missing (declare "context": "sys/WorkflowContext@1")`},
		{name: "second set reschedules", mod: reminders.Module, ctx: ctx(9), state: sched,
			event:   arm("Set", m{"reminder_id": "r", "text": "other", "delay_ms": 1}),
			want:    m{"reminder_id": "r", "text": "other", "due_ns": 9 + 1_000_000, "status": "scheduled"},
			effects: []eff{{Effect: sdk.EffectTimerSet, Params: m{"deliver_at_ns": 9 + 1_000_000, "key": "r"}}}},
		{name: "set after fired schedules again", mod: reminders.Module, ctx: ctx(9_000_000), state: fired,
			event:   arm("Set", m{"reminder_id": "r", "text": "again", "delay_ms": 0}),
			want:    m{"reminder_id": "r", "text": "again", "due_ns": 9_000_000, "status": "scheduled"},
			effects: []eff{{Effect: sdk.EffectTimerSet, Params: m{"deliver_at_ns": 9_000_000, "key": "r"}}}},
		{name: "early receipt ignored", mod: reminders.Module, state: sched,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 5_000_999, "key": "r"}), want: sched},
		{name: "receipt exactly at due fires", mod: reminders.Module, state: sched,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 5_001_000, "key": "r"}),
			want:  m{"reminder_id": "r", "text": "hi", "due_ns": 5_001_000, "status": "fired", "fired_at_ns": 5_001_000}},
		{name: "receipt fires", mod: reminders.Module, ctx: ctx(9), state: sched,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 7_000_000, "key": "r"}), want: fired},
		{name: "thin receipt fires", mod: reminders.Module, state: sched,
			event: thinReceipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 7_000_000, "key": "r"}), want: fired},
		{name: "receipt at zero for a due of zero", mod: reminders.Module, state: m{"reminder_id": "r", "text": "hi", "due_ns": 0, "status": "scheduled"},
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 0}),
			want:  m{"reminder_id": "r", "text": "hi", "due_ns": 0, "status": "fired", "fired_at_ns": 0}},
		{name: "second receipt ignored", mod: reminders.Module, state: fired,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 9_000_000}), want: fired},
		{name: "error receipt ignored", mod: reminders.Module, state: sched,
			event: receipt(sdk.EffectTimerSet, "error", m{}), want: sched},
		{name: "other effect ignored", mod: reminders.Module, state: sched,
			event: receipt("com.example/other@1", "ok", m{}), want: sched},
		{name: "receipt for a missing cell", mod: reminders.Module,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 1}), want: nil},
		{name: "unknown arm", mod: reminders.Module, event: arm("Snooze", m{}),
			fault: `step returned an error: reminders: unknown event arm "Snooze"`},
	}
}

func ordersCases() []stepCase {
	open := m{"order_id": "o1", "amount_cents": 500, "customer": "c", "status": "awaiting_payment"}
	with := func(status string, extra ...string) m {
		s := m{"order_id": "o1", "amount_cents": 500, "customer": "c", "status": status}
		for i := 0; i+1 < len(extra); i += 2 {
			s[extra[i]] = extra[i+1]
		}
		return s
	}
	return []stepCase{
		{name: "created charges and sets expiry", mod: orders.Module, ctx: ctx(10),
			event: arm("Created", m{"order_id": "o1", "amount_cents": 500, "customer": "c"}), want: open,
			effects: []eff{
				{Effect: orders.EffectCharge, Params: m{"order_id": "o1", "amount_cents": 500, "customer": "c"}, Key: "o1", Ref: "charge"},
				{Effect: sdk.EffectTimerSet, Params: m{"deliver_at_ns": 10 + orders.Expiry, "key": "o1"}, Ref: "deadline"},
			}},
		{name: "created without context", mod: orders.Module,
			event: arm("Created", m{"order_id": "o1", "amount_cents": 500, "customer": "c"}),
			fault: `step returned an error: workflow context missing (declare "context": "sys/WorkflowContext@1")`},
		{name: "duplicate create ignored", mod: orders.Module, ctx: ctx(10), state: open,
			event: arm("Created", m{"order_id": "o1", "amount_cents": 9, "customer": "x"}), want: open},
		{name: "charge succeeded", mod: orders.Module, state: open,
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: with("paid", "charge_id", "ch")},
		{name: "charge succeeded, empty id", mod: orders.Module, state: open,
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "", "status": "succeeded"}), want: with("paid", "charge_id", "")},
		{name: "charge succeeded, thin receipt", mod: orders.Module, state: open,
			event: thinReceipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: with("paid", "charge_id", "ch")},
		{name: "charge declined", mod: orders.Module, state: open,
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "declined"}), want: with("payment_failed")},
		{name: "charge errored", mod: orders.Module, state: open,
			event: receipt(orders.EffectCharge, "error", m{}), want: with("payment_failed")},
		{name: "charge timed out", mod: orders.Module, state: open,
			event: receipt(orders.EffectCharge, "timeout", m{}), want: with("payment_failed")},
		{name: "expiry timer", mod: orders.Module, state: open,
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 1, "key": "o1"}), want: with("expired")},
		{name: "expiry after paid ignored", mod: orders.Module, state: with("paid", "charge_id", "ch"),
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 1, "key": "o1"}), want: with("paid", "charge_id", "ch")},
		{name: "charge after expiry records charge_id", mod: orders.Module, state: with("expired"),
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: with("expired", "charge_id", "ch")},
		{name: "charge after cancel records charge_id", mod: orders.Module, state: with("cancelled"),
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: with("cancelled", "charge_id", "ch")},
		{name: "declined charge after cancel records nothing", mod: orders.Module, state: with("cancelled"),
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "declined"}), want: with("cancelled")},
		{name: "failed charge after cancel records nothing", mod: orders.Module, state: with("cancelled"),
			event: receipt(orders.EffectCharge, "error", m{}), want: with("cancelled")},
		{name: "expiry after cancel ignored", mod: orders.Module, state: with("cancelled"),
			event: receipt(sdk.EffectTimerSet, "ok", m{"delivered_at_ns": 1, "key": "o1"}), want: with("cancelled")},
		{name: "cancel after expiry ignored", mod: orders.Module, state: with("expired"),
			event: arm("Cancel", m{"order_id": "o1"}), want: with("expired")},
		{name: "other effect ignored", mod: orders.Module, state: open,
			event: receipt("com.example/other@1", "ok", m{}), want: open},
		{name: "receipt for a missing cell", mod: orders.Module,
			event: receipt(orders.EffectCharge, "ok", m{"charge_id": "ch", "status": "succeeded"}), want: nil},
		{name: "cancel", mod: orders.Module, state: open, event: arm("Cancel", m{"order_id": "o1"}), want: with("cancelled")},
		{name: "cancel after paid ignored", mod: orders.Module, state: with("paid", "charge_id", "ch"),
			event: arm("Cancel", m{"order_id": "o1"}), want: with("paid", "charge_id", "ch")},
		{name: "cancel a missing order", mod: orders.Module, event: arm("Cancel", m{"order_id": "o1"}), want: nil},
		{name: "rejected receipt", mod: orders.Module, state: open, event: rejected(orders.EffectCharge), want: with("payment_failed")},
		{name: "rejected timer ignored", mod: orders.Module, state: open, event: rejected(sdk.EffectTimerSet), want: open},
		{name: "rejected after paid ignored", mod: orders.Module, state: with("paid", "charge_id", "ch"),
			event: rejected(orders.EffectCharge), want: with("paid", "charge_id", "ch")},
		{name: "rejected for a missing cell", mod: orders.Module, event: rejected(orders.EffectCharge), want: nil},
		{name: "unknown arm", mod: orders.Module, event: arm("Refund", m{}),
			fault: `step returned an error: orders: unknown event arm "Refund"`},
	}
}

func choreographyCases() []stepCase {
	cm := choreography.Module
	return []stepCase{
		{name: "orders emits paid", mod: cm, entry: "orders", ctx: ctx(1), event: m{"order_id": "o", "amount_cents": 7},
			want: m{"amount_cents": 7, "status": "paid"}, events: []ev{{choreography.EventOrderPaid, m{"order_id": "o", "amount_cents": 7}}}},
		{name: "orders idempotent", mod: cm, entry: "orders", state: m{"amount_cents": 7, "status": "paid"},
			event: m{"order_id": "o", "amount_cents": 9}, want: m{"amount_cents": 7, "status": "paid"}},
		{name: "shipping emits shipped", mod: cm, entry: "shipping", ctx: ctx(1), event: m{"order_id": "o", "amount_cents": 7},
			want: m{"shipment_id": "ship-o", "status": "shipped"}, events: []ev{{choreography.EventShipped, m{"order_id": "o", "shipment_id": "ship-o"}}}},
		{name: "shipping idempotent", mod: cm, entry: "shipping", state: m{"shipment_id": "ship-o", "status": "shipped"},
			event: m{"order_id": "o", "amount_cents": 7}, want: m{"shipment_id": "ship-o", "status": "shipped"}},
		{name: "audit paid", mod: cm, entry: "audit", event: arm("Paid", m{"order_id": "o", "amount_cents": 7}),
			want: m{"paid": 1, "shipped": 0, "paid_cents": 7}},
		{name: "audit shipped", mod: cm, entry: "audit", state: m{"paid": 1, "shipped": 0, "paid_cents": 7},
			event: arm("Shipped", m{"order_id": "o", "shipment_id": "s"}), want: m{"paid": 1, "shipped": 1, "paid_cents": 7}},
		{name: "audit shipped first", mod: cm, entry: "audit", event: arm("Shipped", m{"order_id": "o", "shipment_id": "s"}),
			want: m{"paid": 0, "shipped": 1, "paid_cents": 0}},
		{name: "audit unknown arm", mod: cm, entry: "audit", event: arm("Lost", m{}),
			fault: `step returned an error: audit: unknown event arm "Lost"`},
	}
}

func allCases() map[string][]stepCase {
	return map[string][]stepCase{
		"counter": counterCases(), "notes": notesCases(), "reminders": remindersCases(),
		"orders": ordersCases(), "choreography": choreographyCases(),
	}
}

func TestCounter(t *testing.T)      { run(t, counterCases()) }
func TestNotes(t *testing.T)        { run(t, notesCases()) }
func TestReminders(t *testing.T)    { run(t, remindersCases()) }
func TestOrders(t *testing.T)       { run(t, ordersCases()) }
func TestChoreography(t *testing.T) { run(t, choreographyCases()) }

func TestRegisterNamesEveryExampleModule(t *testing.T) {
	want := map[string][]string{
		"examples/counter": {"step"}, "examples/orders": {"step"}, "examples/notes": {"step"},
		"examples/reminders": {"step"}, "examples/choreography": {"audit", "orders", "shipping"},
	}
	b := modules.NewBuiltins()
	workflows.Register(b, nil)
	if got := b.Names(); len(got) != len(want) {
		t.Fatalf("registered %v", got)
	}
	for name, entries := range want {
		bi, ok := b.Get(name)
		if !ok {
			t.Fatalf("%s not registered", name)
		}
		if bi.Identity != name+"@go3" {
			t.Errorf("%s identity %q", name, bi.Identity)
		}
		var got []string
		for e := range bi.Entrypoints {
			got = append(got, e)
		}
		if len(got) != len(entries) {
			t.Errorf("%s entrypoints %v, want %v", name, got, entries)
		}
		for _, e := range entries {
			if bi.Entrypoints[e] == nil {
				t.Errorf("%s/%s not registered", name, e)
			}
		}
	}

	b = modules.NewBuiltins()
	workflows.Register(b, func(module string) string { return "sha256:" + module })
	if bi, ok := b.ByIdentity("sha256:examples/orders"); !ok || bi.Name != "examples/orders" {
		t.Fatalf("identity func not used: %+v", bi)
	}
}
