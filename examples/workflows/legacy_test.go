package workflows_test

// The example builtins as they were before the sdk, verbatim but for names,
// kept to pin that the port changed no behaviour: TestPortIsExact runs every
// step case through both and compares the output envelopes byte for byte,
// and faults as the kernel journaled a builtin's error ("step returned an
// error: ..."). Delete this file once the port is trusted.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// Effect and event names the examples emit.
const (
	legacyEffectCharge   = "com.example/payment.charge@1"
	legacyEffectTimerSet = "sys/timer.set@1"
	legacyEventOrderPaid = "com.example/OrderPaid@1"
	legacyEventShipped   = "com.example/Shipped@1"
)

// legacyOrderExpiry is how long an order waits for payment before its timer fires.
const legacyOrderExpiry = 15 * 60 * 1_000_000_000 // 15 minutes in ns

// obj is a decoded CBOR map with typed getters that record the first error.
type obj struct {
	m   map[string]any
	err error
}

func decodeObj(what string, b []byte) *obj {
	if b == nil {
		return &obj{m: map[string]any{}}
	}
	v, err := schemas.Decode(b)
	if err != nil {
		return &obj{m: map[string]any{}, err: fmt.Errorf("%s: %w", what, err)}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return &obj{m: map[string]any{}, err: fmt.Errorf("%s: want a map, got %T", what, v)}
	}
	return &obj{m: m}
}

func (o *obj) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

func (o *obj) has(k string) bool { _, ok := o.m[k]; return ok }

func (o *obj) str(k string) string {
	s, ok := o.m[k].(string)
	if !ok && o.has(k) {
		o.fail("field %q: want a string, got %T", k, o.m[k])
	}
	return s
}

func (o *obj) int(k string) int64 {
	switch n := o.m[k].(type) {
	case uint64:
		return int64(n)
	case int64:
		return n
	case nil:
		return 0
	default:
		o.fail("field %q: want an integer, got %T", k, n)
		return 0
	}
}

func (o *obj) bytes(k string) []byte {
	b, ok := o.m[k].([]byte)
	if !ok && o.has(k) {
		o.fail("field %q: want bytes, got %T", k, o.m[k])
	}
	return b
}

// variant splits a {"$tag", "$value"} event.
func variant(b []byte) (string, *obj, error) {
	ev := decodeObj("event", b)
	if ev.err != nil {
		return "", nil, ev.err
	}
	tag := ev.str("$tag")
	if tag == "" {
		return "", nil, errors.New("event: not a variant value (no $tag)")
	}
	inner, ok := ev.m["$value"].(map[string]any)
	if !ok {
		return "", nil, fmt.Errorf("event %s: $value is %T, want a map", tag, ev.m["$value"])
	}
	return tag, &obj{m: inner}, ev.err
}

// logicalNow is the context's logical time: deterministic, replayed as journaled.
func logicalNow(in *modules.Input) (uint64, error) {
	if in.Ctx == nil {
		return 0, errors.New("workflow context missing (declare \"context\": \"sys/WorkflowContext@1\")")
	}
	c := decodeObj("context", in.Ctx)
	n := c.int("logical_now_ns")
	return uint64(n), c.err
}

func marshalState(v map[string]any) (*modules.Output, error) {
	b, err := schemas.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &modules.Output{State: b}, nil
}

func keep(in *modules.Input) *modules.Output { return &modules.Output{State: in.State} }

// legacyCounter adds the event's "by" to the cell's "count".
func legacyCounter(in *modules.Input) (*modules.Output, error) {
	st, ev := decodeObj("state", in.State), decodeObj("event", in.Event.Value)
	count, by := st.int("count"), ev.int("by")
	if err := errors.Join(st.err, ev.err); err != nil {
		return nil, err
	}
	return marshalState(map[string]any{"count": count + by})
}

// legacyNotes keeps one note per note_id: Created sets the title, Edited
// replaces the body and counts edits, Archived marks it archived. Edits to an
// archived note are ignored.
func legacyNotes(in *modules.Input) (*modules.Output, error) {
	tag, ev, err := variant(in.Event.Value)
	if err != nil {
		return nil, err
	}
	st := decodeObj("state", in.State)
	note := map[string]any{"title": st.str("title"), "body": st.str("body"), "edits": st.int("edits"), "archived": st.m["archived"] == true}
	if st.err != nil {
		return nil, st.err
	}
	if note["archived"] == true {
		return keep(in), nil
	}
	switch tag {
	case "Created":
		note["title"] = ev.str("title")
	case "Edited":
		note["body"] = ev.str("body")
		note["edits"] = note["edits"].(int64) + 1
	case "Archived":
		note["archived"] = true
	default:
		return nil, fmt.Errorf("notes: unknown event arm %q", tag)
	}
	if ev.err != nil {
		return nil, ev.err
	}
	return marshalState(note)
}

// legacyReminders asks for a sys/timer.set at now+delay_ms when a reminder is
// set, and marks it fired when the timer's receipt arrives.
func legacyReminders(in *modules.Input) (*modules.Output, error) {
	tag, ev, err := variant(in.Event.Value)
	if err != nil {
		return nil, err
	}
	switch tag {
	case "Set":
		if in.State != nil {
			return keep(in), nil // a reminder is set once; a second Set is ignored
		}
		now, err := logicalNow(in)
		if err != nil {
			return nil, err
		}
		id, text, delay := ev.str("reminder_id"), ev.str("text"), ev.int("delay_ms")
		if ev.err != nil {
			return nil, ev.err
		}
		due := now + uint64(delay)*1_000_000
		out, err := marshalState(map[string]any{"reminder_id": id, "text": text, "due_ns": due, "status": "scheduled"})
		if err != nil {
			return nil, err
		}
		params, err := schemas.Marshal(map[string]any{"deliver_at_ns": due, "key": id})
		if err != nil {
			return nil, err
		}
		out.Effects = []modules.EffectOut{{Effect: legacyEffectTimerSet, Params: params}}
		return out, nil
	case "Receipt":
		if in.State == nil || ev.str("effect") != legacyEffectTimerSet || ev.str("status") != "ok" {
			return keep(in), nil
		}
		st := decodeObj("state", in.State)
		pl := decodeObj("timer receipt payload", ev.bytes("payload"))
		fired := pl.int("delivered_at_ns")
		if err := errors.Join(st.err, ev.err, pl.err); err != nil {
			return nil, err
		}
		st.m["status"] = "fired"
		st.m["fired_at_ns"] = fired
		return marshalState(st.m)
	default:
		return nil, fmt.Errorf("reminders: unknown event arm %q", tag)
	}
}

// legacyOrders runs one order: Created asks for a payment charge and an expiry
// timer; the charge receipt marks it paid or payment_failed; the timer expires
// it if still unpaid; Cancel cancels an unpaid order.
func legacyOrders(in *modules.Input) (*modules.Output, error) {
	tag, ev, err := variant(in.Event.Value)
	if err != nil {
		return nil, err
	}
	st := decodeObj("state", in.State)
	if st.err != nil {
		return nil, st.err
	}
	status := st.str("status")
	set := func(s string) (*modules.Output, error) {
		st.m["status"] = s
		return marshalState(st.m)
	}
	switch tag {
	case "Created":
		if in.State != nil {
			return keep(in), nil // duplicate create: the first one wins
		}
		now, err := logicalNow(in)
		if err != nil {
			return nil, err
		}
		id, amount, customer := ev.str("order_id"), ev.int("amount_cents"), ev.str("customer")
		if ev.err != nil {
			return nil, ev.err
		}
		out, err := marshalState(map[string]any{"order_id": id, "amount_cents": amount, "customer": customer, "status": "awaiting_payment"})
		if err != nil {
			return nil, err
		}
		charge, err := schemas.Marshal(map[string]any{"order_id": id, "amount_cents": amount, "customer": customer})
		if err != nil {
			return nil, err
		}
		timer, err := schemas.Marshal(map[string]any{"deliver_at_ns": now + legacyOrderExpiry, "key": "expire:" + id})
		if err != nil {
			return nil, err
		}
		out.Effects = []modules.EffectOut{
			{Effect: legacyEffectCharge, Params: charge, IdempotencyKey: []byte("charge:" + id)},
			{Effect: legacyEffectTimerSet, Params: timer},
		}
		return out, nil
	case "Cancel":
		if status != "awaiting_payment" {
			return keep(in), nil
		}
		return set("cancelled")
	case "Receipt":
		if status != "awaiting_payment" {
			return keep(in), nil // late receipts for a settled order change nothing
		}
		switch ev.str("effect") {
		case legacyEffectCharge:
			if ev.str("status") != "ok" {
				return set("payment_failed")
			}
			pl := decodeObj("charge receipt payload", ev.bytes("payload"))
			chargeID, result := pl.str("charge_id"), pl.str("status")
			if err := errors.Join(ev.err, pl.err); err != nil {
				return nil, err
			}
			if result != "succeeded" {
				return set("payment_failed")
			}
			st.m["charge_id"] = chargeID
			return set("paid")
		case legacyEffectTimerSet:
			return set("expired")
		}
		return keep(in), ev.err
	case "Rejected":
		if status == "awaiting_payment" && ev.str("effect") == legacyEffectCharge {
			return set("payment_failed")
		}
		return keep(in), ev.err
	default:
		return nil, fmt.Errorf("orders: unknown event arm %q", tag)
	}
}

// legacyChoreoOrders records a placed order as paid and emits OrderPaid, which
// the manifest routes to shipping and audit.
func legacyChoreoOrders(in *modules.Input) (*modules.Output, error) {
	if in.State != nil {
		return keep(in), nil
	}
	ev := decodeObj("event", in.Event.Value)
	id, amount := ev.str("order_id"), ev.int("amount_cents")
	if ev.err != nil {
		return nil, ev.err
	}
	out, err := marshalState(map[string]any{"amount_cents": amount, "status": "paid"})
	if err != nil {
		return nil, err
	}
	paid, err := schemas.Marshal(map[string]any{"order_id": id, "amount_cents": amount})
	if err != nil {
		return nil, err
	}
	out.DomainEvents = []modules.EventOut{{Schema: legacyEventOrderPaid, Value: paid}}
	return out, nil
}

// legacyChoreoShipping ships a paid order (shipment id "ship-<order_id>") and
// emits Shipped.
func legacyChoreoShipping(in *modules.Input) (*modules.Output, error) {
	if in.State != nil {
		return keep(in), nil
	}
	ev := decodeObj("event", in.Event.Value)
	id := ev.str("order_id")
	if ev.err != nil {
		return nil, ev.err
	}
	ship := "ship-" + id
	out, err := marshalState(map[string]any{"shipment_id": ship, "status": "shipped"})
	if err != nil {
		return nil, err
	}
	shipped, err := schemas.Marshal(map[string]any{"order_id": id, "shipment_id": ship})
	if err != nil {
		return nil, err
	}
	out.DomainEvents = []modules.EventOut{{Schema: legacyEventShipped, Value: shipped}}
	return out, nil
}

// legacyChoreoAudit tallies payments (count and cents) and shipments.
func legacyChoreoAudit(in *modules.Input) (*modules.Output, error) {
	tag, ev, err := variant(in.Event.Value)
	if err != nil {
		return nil, err
	}
	st := decodeObj("state", in.State)
	paid, shipped, cents := st.int("paid"), st.int("shipped"), st.int("paid_cents")
	if st.err != nil {
		return nil, st.err
	}
	switch tag {
	case "Paid":
		paid++
		cents += ev.int("amount_cents")
	case "Shipped":
		shipped++
	default:
		return nil, fmt.Errorf("audit: unknown event arm %q", tag)
	}
	if ev.err != nil {
		return nil, ev.err
	}
	return marshalState(map[string]any{"paid": paid, "shipped": shipped, "paid_cents": cents})
}

// legacyFor is the pre-sdk builtin for a module's entrypoint.
func legacyFor(module, entry string) modules.StepFunc {
	switch module + "/" + entry {
	case "examples/counter/step":
		return legacyCounter
	case "examples/notes/step":
		return legacyNotes
	case "examples/reminders/step":
		return legacyReminders
	case "examples/orders/step":
		return legacyOrders
	case "examples/choreography/orders":
		return legacyChoreoOrders
	case "examples/choreography/shipping":
		return legacyChoreoShipping
	case "examples/choreography/audit":
		return legacyChoreoAudit
	}
	return nil
}

// legacyStep calls fn as the kernel called a builtin: a panic or error is
// the step's fault.
func legacyStep(fn modules.StepFunc, in *modules.Input) (out *modules.Output, fault string) {
	defer func() {
		if r := recover(); r != nil {
			out, fault = nil, fmt.Sprintf("step panicked: %v", r)
		}
	}()
	o, err := fn(in)
	if err != nil {
		return nil, "step returned an error: " + err.Error()
	}
	return o, ""
}

func TestPortIsExact(t *testing.T) {
	for world, cases := range allCases() {
		for _, c := range cases {
			t.Run(world+"/"+c.name, func(t *testing.T) {
				old := legacyFor(c.mod.Name(), c.entrypoint())
				if old == nil {
					t.Fatalf("no legacy builtin for %s/%s", c.mod.Name(), c.entrypoint())
				}
				wantOut, wantFault := legacyStep(old, c.input())
				out, err := native(t, &c)
				if wantFault != "" {
					if err == nil {
						t.Fatalf("legacy faulted %q, the port did not", wantFault)
					}
					if c.sameFault && err.Error() != wantFault {
						t.Fatalf("fault %q, legacy %q", err, wantFault)
					}
					if !c.sameFault && c.fault == "" {
						t.Fatalf("legacy faulted %q; the case does not expect a fault", wantFault)
					}
					return
				}
				if err != nil {
					t.Fatalf("the port faulted %v, legacy did not", err)
				}
				if got, want := schemas.MustMarshal(out), schemas.MustMarshal(wantOut); !bytes.Equal(got, want) {
					t.Fatalf("output\n%x\nlegacy\n%x", got, want)
				}
			})
		}
	}
}
