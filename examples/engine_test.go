package examples_test

import (
	"context"
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/modules/wasm"
)

// testEngine is a wasm engine for a test's worlds (the kernel is handed
// one), on the examples' warm compiled-code cache. It closes when the test
// ends, after the worlds the test closed.
func testEngine(tb testing.TB) *wasm.Engine {
	tb.Helper()
	e, err := wasm.NewEngine(context.Background(), wasm.Config{CacheDir: built.WasmCache(built.Dir(tb))})
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
