// Package choreography is the example world examples/manifests/choreography:
// three workflows that cooperate only through the domain events they emit,
// as three entrypoints of one module.
package choreography

import (
	"fmt"

	"github.com/aos-kernel/aos/sdk"
)

// Module is examples/choreography. Its entrypoints run
// com.example/choreo.orders.step@1 ("orders"),
// com.example/choreo.shipping.step@1 ("shipping") and
// com.example/choreo.audit.step@1 ("audit").
var Module = sdk.NewModule("examples/choreography")

func init() {
	sdk.Workflow(Module, "orders", Orders)
	sdk.Workflow(Module, "shipping", Shipping)
	sdk.Workflow(Module, "audit", Audit)
}

// Events the workflows emit.
const (
	EventOrderPaid = "com.example/OrderPaid@1"
	EventShipped   = "com.example/Shipped@1"
)

// OrderPlaced is com.example/OrderPlaced@1, and OrderPaid@1 has the same
// shape.
type OrderPlaced struct {
	OrderID     string `cbor:"order_id"`
	AmountCents int64  `cbor:"amount_cents"`
}

// OrderPaid is com.example/OrderPaid@1.
type OrderPaid = OrderPlaced

// Shipped is com.example/Shipped@1.
type Shipped struct {
	OrderID    string `cbor:"order_id"`
	ShipmentID string `cbor:"shipment_id"`
}

// OrderState is com.example/ChoreoOrderState@1.
type OrderState struct {
	AmountCents int64  `cbor:"amount_cents"`
	Status      string `cbor:"status"`
}

// ShippingState is com.example/ShippingState@1.
type ShippingState struct {
	ShipmentID string `cbor:"shipment_id"`
	Status     string `cbor:"status"`
}

// AuditState is com.example/AuditState@1.
type AuditState struct {
	Paid      int64 `cbor:"paid"`
	Shipped   int64 `cbor:"shipped"`
	PaidCents int64 `cbor:"paid_cents"`
}

// Orders records a placed order as paid and emits OrderPaid, which the
// manifest routes to shipping and audit. A repeated order changes nothing.
func Orders(c *sdk.Ctx, st *OrderState, ev OrderPlaced) (*OrderState, error) {
	if st != nil {
		return st, nil
	}
	c.Emit(EventOrderPaid, OrderPaid(ev))
	return &OrderState{AmountCents: ev.AmountCents, Status: "paid"}, nil
}

// Shipping ships a paid order (shipment "ship-<order_id>") and emits Shipped.
func Shipping(c *sdk.Ctx, st *ShippingState, ev OrderPaid) (*ShippingState, error) {
	if st != nil {
		return st, nil
	}
	ship := "ship-" + ev.OrderID
	c.Emit(EventShipped, Shipped{OrderID: ev.OrderID, ShipmentID: ship})
	return &ShippingState{ShipmentID: ship, Status: "shipped"}, nil
}

// Audit (unkeyed) tallies payments, their cents, and shipments, from
// com.example/AuditEvent@1.
func Audit(c *sdk.Ctx, st *AuditState, ev sdk.Variant) (*AuditState, error) {
	var a AuditState
	if st != nil {
		a = *st
	}
	switch ev.Tag {
	case "Paid":
		var p OrderPaid
		if err := ev.As(&p); err != nil {
			return nil, err
		}
		a.Paid++
		a.PaidCents += p.AmountCents
	case "Shipped":
		a.Shipped++
	default:
		return nil, fmt.Errorf("audit: unknown event arm %q", ev.Tag)
	}
	return &a, nil
}
