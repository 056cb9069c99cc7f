//go:build wasip1

// Command wasm is examples/choreography as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o choreography.wasm ./examples/workflows/choreography/wasm
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/choreography"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(choreography.Module) }

func main() {}
