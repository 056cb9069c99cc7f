//go:build wasip1

// Command wasm is examples/orders as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o orders.wasm ./examples/workflows/orders/wasm
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(orders.Module) }

func main() {}
