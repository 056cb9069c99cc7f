//go:build wasip1

// Command wasm is examples/notes as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o notes.wasm ./examples/workflows/notes/wasm
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/notes"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(notes.Module) }

func main() {}
