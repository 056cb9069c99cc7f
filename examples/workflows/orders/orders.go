// Package orders is the example world examples/manifests/orders: an order's
// lifecycle with a payment effect, an expiry timer, and their receipts.
package orders

import (
	"fmt"

	"github.com/aos-kernel/aos/sdk"
)

// Module is examples/orders; its one entrypoint, "step", runs
// com.example/order.step@1.
var Module = sdk.NewModule("examples/orders")

func init() { sdk.Workflow(Module, "step", Step) }

// EffectCharge is the payment effect, served by an external executor.
const EffectCharge = "com.example/payment.charge@1"

// Expiry is how long an order waits for payment before its timer fires.
const Expiry = 15 * 60 * 1_000_000_000 // 15 minutes in ns

// Order statuses.
const (
	AwaitingPayment = "awaiting_payment"
	Paid            = "paid"
	PaymentFailed   = "payment_failed"
	Expired         = "expired"
	Cancelled       = "cancelled"
)

// State is com.example/OrderState@1.
type State struct {
	OrderID     string  `cbor:"order_id"`
	AmountCents int64   `cbor:"amount_cents"`
	Customer    string  `cbor:"customer"`
	Status      string  `cbor:"status"`
	ChargeID    *string `cbor:"charge_id,omitempty"` // set when paid
}

// Created is com.example/OrderCreated@1, the event's "Created" arm; its
// fields are also the charge's params (com.example/ChargeParams@1).
type Created struct {
	OrderID     string `cbor:"order_id"`
	AmountCents int64  `cbor:"amount_cents"`
	Customer    string `cbor:"customer"`
}

// ChargeReceipt is com.example/ChargeReceipt@1, the charge receipt's payload.
type ChargeReceipt struct {
	ChargeID string `cbor:"charge_id"`
	Status   string `cbor:"status"` // "succeeded" or "declined"
}

// Step runs one order (event com.example/OrderEvent@1, a variant). Created
// asks for the charge and an expiry timer; the charge's receipt marks the
// order paid or payment_failed; the timer's expires it if still unpaid;
// Cancel cancels an unpaid order. Anything for a settled order changes
// nothing.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	status := ""
	if st != nil {
		status = st.Status
	}
	switch ev.Tag {
	case "Created":
		if st != nil {
			return st, nil // duplicate create: the first one wins
		}
		wc, err := c.Context()
		if err != nil {
			return nil, err
		}
		var o Created
		if err := ev.As(&o); err != nil {
			return nil, err
		}
		c.Effect(EffectCharge, o, sdk.IdempotencyKey([]byte("charge:"+o.OrderID)))
		c.Timer(wc.LogicalNowNs+Expiry, "expire:"+o.OrderID)
		return &State{OrderID: o.OrderID, AmountCents: o.AmountCents, Customer: o.Customer, Status: AwaitingPayment}, nil
	case "Cancel":
		if status != AwaitingPayment {
			return st, nil
		}
		st.Status = Cancelled
		return st, nil
	case "Receipt":
		if status != AwaitingPayment {
			return st, nil // late receipts for a settled order change nothing
		}
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		switch r.Effect {
		case EffectCharge:
			if !r.OK() {
				st.Status = PaymentFailed
				return st, nil
			}
			var p ChargeReceipt
			if err := r.DecodePayload(&p); err != nil {
				return nil, err
			}
			if p.Status != "succeeded" {
				st.Status = PaymentFailed
				return st, nil
			}
			st.ChargeID, st.Status = &p.ChargeID, Paid
		case sdk.EffectTimerSet:
			st.Status = Expired
		}
		return st, nil
	case "Rejected":
		var r sdk.ReceiptRejected
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		if status == AwaitingPayment && r.Effect == EffectCharge {
			st.Status = PaymentFailed
		}
		return st, nil
	default:
		return nil, fmt.Errorf("orders: unknown event arm %q", ev.Tag)
	}
}
