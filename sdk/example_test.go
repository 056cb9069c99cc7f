package sdk_test

import (
	"fmt"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/sdk"
)

// The invoice workflow of docs/sdk.md.

// Module is what a wasm main exports and a host registers natively.
var Module = sdk.NewModule("com.acme/invoices")

func init() { sdk.Workflow(Module, "step", Step) }

const (
	EffectCharge = "com.acme/payment.charge@1"
	Day          = 24 * 60 * 60 * 1_000_000_000 // ns
)

// State is com.acme/InvoiceState@1.
type State struct {
	InvoiceID   string  `cbor:"invoice_id"`
	AmountCents int64   `cbor:"amount_cents"`
	Status      string  `cbor:"status"` // charging, paid, failed
	ChargeID    *string `cbor:"charge_id,omitempty"`
}

// Issued is com.acme/InvoiceIssued@1, the "Issued" arm of the event.
type Issued struct {
	InvoiceID   string `cbor:"invoice_id"`
	AmountCents int64  `cbor:"amount_cents"`
	Customer    string `cbor:"customer"`
}

// ChargeReceipt is com.acme/ChargeReceipt@1, the charge receipt's payload.
type ChargeReceipt struct {
	ChargeID string `cbor:"charge_id"`
	Status   string `cbor:"status"`
}

// Paid is com.acme/InvoicePaid@1.
type Paid struct {
	InvoiceID string `cbor:"invoice_id"`
	ChargeID  string `cbor:"charge_id"`
}

// Step handles com.acme/InvoiceEvent@1, a variant with arms Issued,
// Receipt (sys/EffectReceiptEnvelope@1) and Rejected
// (sys/EffectReceiptRejected@1).
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	switch ev.Tag {
	case "Issued":
		if st != nil {
			return st, nil // issued once
		}
		var in Issued
		if err := ev.As(&in); err != nil {
			return nil, err
		}
		wc, err := c.Context()
		if err != nil {
			return nil, err
		}
		c.Effect(EffectCharge, in, sdk.IdempotencyKey([]byte("charge:"+in.InvoiceID)), sdk.IssuerRef("charge"))
		c.Timer(wc.LogicalNowNs+Day, "remind:"+in.InvoiceID, sdk.IssuerRef("reminder"))
		return &State{InvoiceID: in.InvoiceID, AmountCents: in.AmountCents, Status: "charging"}, nil

	case "Receipt":
		if st == nil || st.Status != "charging" {
			return st, nil
		}
		var r sdk.ReceiptEnvelope
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		switch r.IssuerRef {
		case "charge":
			var p ChargeReceipt
			if r.OK() {
				if err := r.DecodePayload(&p); err != nil {
					return nil, err
				}
			}
			if p.Status != "succeeded" {
				st.Status = "failed"
				return st, nil
			}
			st.Status, st.ChargeID = "paid", &p.ChargeID
			c.Emit("com.acme/InvoicePaid@1", Paid{InvoiceID: st.InvoiceID, ChargeID: p.ChargeID})
		case "reminder":
			c.Emit("com.acme/Notice@1", sdk.Tagged{Tag: "Overdue", Value: map[string]string{"invoice_id": st.InvoiceID}})
		}
		return st, nil

	case "Rejected":
		var r sdk.ReceiptRejected
		if err := ev.As(&r); err != nil {
			return nil, err
		}
		c.Annotate(map[string]string{"rejected": r.Effect, "why": r.Error})
		if st != nil && r.Effect == EffectCharge {
			st.Status = "failed"
		}
		return st, nil
	}
	return nil, fmt.Errorf("invoices: unknown event arm %q", ev.Tag)
}

// Example runs the invoice workflow natively, as a host does.
func Example() {
	b := modules.NewBuiltins()
	b.MustAdd(Module.Builtin("com.acme/invoices@1"))
	bi, _ := b.Get("com.acme/invoices")

	issued, _ := sdk.Marshal(sdk.Tagged{Tag: "Issued", Value: Issued{InvoiceID: "i1", AmountCents: 1200, Customer: "c"}})
	ctx, _ := sdk.Marshal(map[string]any{"logical_now_ns": 5})
	out, err := bi.Entrypoints["step"](&modules.Input{Version: 1, Ctx: ctx,
		Event: modules.EventIn{Schema: "com.acme/InvoiceEvent@1", Value: issued}})
	if err != nil {
		fmt.Println(err)
		return
	}
	var st State
	_ = sdk.Unmarshal(out.State, &st)
	fmt.Println("state:", st.InvoiceID, st.AmountCents, st.Status)
	for _, e := range out.Effects {
		fmt.Printf("effect: %s key=%q ref=%q\n", e.Effect, e.IdempotencyKey, e.IssuerRef)
	}

	bad, _ := sdk.Marshal(sdk.Tagged{Tag: "Refund", Value: map[string]any{}})
	_, err = bi.Entrypoints["step"](&modules.Input{Version: 1, Event: modules.EventIn{Value: bad}})
	fmt.Println("fault:", err)
	// Output:
	// state: i1 1200 charging
	// effect: com.acme/payment.charge@1 key="charge:i1" ref="charge"
	// effect: sys/timer.set@1 key="" ref="reminder"
	// fault: step returned an error: invoices: unknown event arm "Refund"
}
