// Package v2 is version 2 of the orders example (examples/manifests/orders-v2):
// the same order lifecycle, with a new state field, refund_due, that the
// step sets when a charge succeeds for an order already cancelled or
// expired, and a migration that derives it for orders written by version
// 1 (docs/upgrades.md, "Migrating state").
package v2

import (
	"fmt"

	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/sdk"
)

// Module is examples/orders-v2; "step" runs com.example/order.step@1 and
// "migrate" is its declared migration from com.example/OrderState@1.
var Module = sdk.NewModule("examples/orders-v2")

func init() {
	sdk.Workflow(Module, "step", Step)
	sdk.Migration(Module, "migrate", Migrate)
}

// State is com.example/OrderState@2: version 1's fields and refund_due.
type State struct {
	OrderID     string  `cbor:"order_id"`
	AmountCents int64   `cbor:"amount_cents"`
	Customer    string  `cbor:"customer"`
	Status      string  `cbor:"status"`
	ChargeID    *string `cbor:"charge_id,omitempty"` // set when a charge succeeded
	// RefundDue: a charge succeeded for an order that was cancelled or
	// expired, so the money must go back.
	RefundDue bool `cbor:"refund_due"`
}

// Migrate turns a version 1 order into a version 2 one: refund_due is what
// version 2's step would have set on the same history.
func Migrate(from string, old *orders.State) (*State, error) {
	if from != "com.example/OrderState@1" {
		return nil, fmt.Errorf("orders v2: no migration from %s", from)
	}
	return &State{OrderID: old.OrderID, AmountCents: old.AmountCents, Customer: old.Customer, Status: old.Status,
		ChargeID: old.ChargeID, RefundDue: refundDue(old.Status, old.ChargeID)}, nil
}

func refundDue(status string, chargeID *string) bool {
	return chargeID != nil && (status == orders.Cancelled || status == orders.Expired)
}

// Step runs one order as version 1 does (orders.Step), and marks
// refund_due when a charge succeeds after the order was cancelled or
// expired. It also takes an operator's cancellation of one of its intents
// (`aosd cancel`, the event's "Cancelled" arm, which version 1 did not
// have): a cancelled expiry timer leaves the order waiting for its
// payment with no deadline; a cancelled charge cancels an unpaid order.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	if ev.Tag == "Cancelled" {
		if st == nil {
			return nil, nil
		}
		var x sdk.EffectCancelled
		if err := ev.As(&x); err != nil {
			return nil, err
		}
		if x.Effect == orders.EffectCharge && st.Status == orders.AwaitingPayment {
			st.Status = orders.Cancelled
		}
		return st, nil
	}
	var v1 *orders.State
	if st != nil {
		v1 = &orders.State{OrderID: st.OrderID, AmountCents: st.AmountCents, Customer: st.Customer, Status: st.Status, ChargeID: st.ChargeID}
	}
	next, err := orders.Step(c, v1, ev)
	if err != nil || next == nil {
		return nil, err
	}
	return &State{OrderID: next.OrderID, AmountCents: next.AmountCents, Customer: next.Customer, Status: next.Status,
		ChargeID: next.ChargeID, RefundDue: refundDue(next.Status, next.ChargeID)}, nil
}
