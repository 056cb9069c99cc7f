//go:build wasip1

// Command module is the wasm module the upgrade end-to-end tests
// (cmd/aosd/upgrade_e2e_test.go) apply over the orders and reminders
// examples: their code, changed.
//
//   - orders_v2 agrees with orders on every step an order waiting for its
//     charge has taken (its creation), and marks the charge id of a charge
//     it is paid by with "v2/": a compatible upgrade, whose receipts show
//     that the new code took them.
//   - orders_div creates an order with one cent more: its state after the
//     creation step differs, so an upgrade to it diverges there.
//   - reminders_v2 agrees with reminders on scheduling and appends " (v2)"
//     to the text of a reminder it fires.
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/examples/workflows/reminders"
	"github.com/aos-kernel/aos/sdk"
)

var module = sdk.NewModule("aos/upgrade-test")

func init() {
	sdk.Workflow(module, "orders_v2", ordersV2)
	sdk.Workflow(module, "orders_div", ordersDiv)
	sdk.Workflow(module, "reminders_v2", remindersV2)
	sdk.Export(module)
}

func ordersV2(c *sdk.Ctx, st *orders.State, ev sdk.Variant) (*orders.State, error) {
	paid := st != nil && st.ChargeID != nil
	out, err := orders.Step(c, st, ev)
	if err != nil || out == nil || paid || out.ChargeID == nil {
		return out, err
	}
	id := "v2/" + *out.ChargeID
	out.ChargeID = &id
	return out, nil
}

func ordersDiv(c *sdk.Ctx, st *orders.State, ev sdk.Variant) (*orders.State, error) {
	out, err := orders.Step(c, st, ev)
	if err == nil && out != nil && st == nil && ev.Tag == "Created" {
		out.AmountCents++
	}
	return out, err
}

func remindersV2(c *sdk.Ctx, st *reminders.State, ev sdk.Variant) (*reminders.State, error) {
	fired := st != nil && st.Status == reminders.Fired
	out, err := reminders.Step(c, st, ev)
	if err == nil && out != nil && !fired && out.Status == reminders.Fired {
		out.Text += " (v2)"
	}
	return out, err
}

func main() {}
