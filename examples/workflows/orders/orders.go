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

// Issuer refs the order's two effects carry, so their receipts say which
// one they answer.
const (
	RefCharge   = "charge"
	RefDeadline = "deadline"
)

// Step runs one order (event com.example/OrderEvent@1, a variant). Created
// asks for the charge (idempotency key: the order id, so a payment service
// never charges an order twice) and an expiry timer; the charge's receipt
// marks the order paid or payment_failed; the timer's expires it if still
// unpaid; Cancel cancels an unpaid order. A charge that succeeds after the
// order was cancelled or expired keeps that status but records charge_id,
// so the charge can be refunded. Anything else for a settled order changes
// nothing, and nothing but Created makes a cell.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	if ev.Tag == "Created" {
		if st != nil {
			return st, nil // duplicate create: the first one wins
		}
		return create(c, ev)
	}
	if st == nil {
		switch ev.Tag {
		case "Cancel", "Receipt", "Rejected":
			return nil, nil // no order: nothing to change, no cell made
		}
		return nil, fmt.Errorf("orders: unknown event arm %q", ev.Tag)
	}
	switch ev.Tag {
	case "Cancel":
		if st.Status == AwaitingPayment {
			st.Status = Cancelled
		}
		return st, nil
	case "Receipt":
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		switch r.Effect {
		case EffectCharge:
			return charged(st, &r)
		case sdk.EffectTimerSet:
			if st.Status == AwaitingPayment {
				st.Status = Expired
			}
		}
		return st, nil
	case "Rejected":
		var r sdk.ReceiptRejected
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		if st.Status == AwaitingPayment && r.Effect == EffectCharge {
			st.Status = PaymentFailed
		}
		return st, nil
	default:
		return nil, fmt.Errorf("orders: unknown event arm %q", ev.Tag)
	}
}

// create starts an order: the charge and the expiry timer, awaiting payment.
func create(c *sdk.Ctx, ev sdk.Variant) (*State, error) {
	wc, err := c.Context()
	if err != nil {
		return nil, err
	}
	var o Created
	if err := ev.As(&o); err != nil {
		return nil, err
	}
	c.Effect(EffectCharge, o, sdk.IdempotencyKey([]byte(o.OrderID)), sdk.IssuerRef(RefCharge))
	c.Timer(wc.LogicalNowNs+Expiry, o.OrderID, sdk.IssuerRef(RefDeadline))
	return &State{OrderID: o.OrderID, AmountCents: o.AmountCents, Customer: o.Customer, Status: AwaitingPayment}, nil
}

// charged applies the charge's receipt. Awaiting payment, a succeeded charge
// pays the order and anything else fails it; a cancelled or expired order
// keeps its status and only records a succeeded charge's id.
func charged(st *State, r *sdk.ReceiptEnvelope) (*State, error) {
	var p ChargeReceipt
	if r.OK() {
		if err := r.DecodePayload(&p); err != nil {
			return nil, err
		}
	}
	succeeded := r.OK() && p.Status == "succeeded"
	switch st.Status {
	case AwaitingPayment:
		if !succeeded {
			st.Status = PaymentFailed
			return st, nil
		}
		st.ChargeID, st.Status = &p.ChargeID, Paid
	case Cancelled, Expired:
		if succeeded {
			st.ChargeID = &p.ChargeID
		}
	}
	return st, nil
}
