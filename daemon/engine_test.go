package daemon_test

import (
	"context"
	"testing"

	"github.com/aos-kernel/aos/modules/wasm"
)

// testEngine is a wasm engine for the worlds a test opens with kernel.Open
// (the kernel is handed its engine; daemon.Open and Connect make the
// world's), its compiled code kept in cache ("": in memory only). It closes
// when the test ends, after whatever the test registered to close after
// making it.
func testEngine(tb testing.TB, cache string) *wasm.Engine {
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
