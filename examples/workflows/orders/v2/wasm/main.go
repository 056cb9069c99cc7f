//go:build wasip1

// Command wasm is examples/orders-v2 as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o orders-v2.wasm ./examples/workflows/orders/v2/wasm
package main

import (
	v2 "github.com/aos-kernel/aos/examples/workflows/orders/v2"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(v2.Module) }

func main() {}
