//go:build wasip1

// Command module is the compatibility worlds' one wasm module: the example
// workflows of examples/workflows (counter, notes, orders, reminders and the
// three of choreography) as the entrypoints of a single module, so a
// committed world carries one artifact in its CAS instead of five.
//
//	aosd build cmd/aosd/testdata/compat/manifest
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/choreography"
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/examples/workflows/notes"
	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/examples/workflows/reminders"
	"github.com/aos-kernel/aos/sdk"
)

var module = sdk.NewModule("aos/compat")

func init() {
	sdk.Workflow(module, "counter", counter.Step)
	sdk.Workflow(module, "notes", notes.Step)
	sdk.Workflow(module, "orders", orders.Step)
	sdk.Workflow(module, "reminders", reminders.Step)
	sdk.Workflow(module, "choreo_orders", choreography.Orders)
	sdk.Workflow(module, "choreo_shipping", choreography.Shipping)
	sdk.Workflow(module, "choreo_audit", choreography.Audit)
	sdk.Export(module)
}

func main() {}
