//go:build wasip1

// Command wasm is examples/reminders as a wasm module:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o reminders.wasm ./examples/workflows/reminders/wasm
package main

import (
	"github.com/aos-kernel/aos/examples/workflows/reminders"
	"github.com/aos-kernel/aos/sdk"
)

func init() { sdk.Export(reminders.Module) }

func main() {}
