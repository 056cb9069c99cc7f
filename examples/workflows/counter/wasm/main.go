//go:build wasip1

// Command wasm is examples/counter as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o counter.wasm ./examples/workflows/counter/wasm
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(counter.Module) }

func main() {}
