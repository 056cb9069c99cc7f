// Package wasmtest gives tests the wasm engine the kernel is handed
// (kernel.Config.Wasm): the kernel names none, so a test that opens a world
// with wasm modules through kernel.Open makes one here. Tests only.
package wasmtest

import (
	"context"
	"testing"

	"github.com/aos-kernel/aos/modules/wasm"
)

// Engine is a wasm engine with its compiled code kept in cache ("": in
// memory only). It closes when the test ends, after whatever the test
// registered to close after making it (cleanups run last first), so worlds
// opened after it are closed before it.
func Engine(tb testing.TB, cache string) *wasm.Engine {
	tb.Helper()
	e, err := wasm.NewEngine(context.Background(), wasm.Config{CacheDir: cache})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			tb.Errorf("close the wasm engine: %v", err)
		}
	})
	return e
}
