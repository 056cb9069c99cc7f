package kernel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
)

// BenchmarkUpgradeReplay times the replay check an upgrade runs (the
// offline check, kernel.ReplayManifest, which runs the same tap over every
// cell): a world on disk whose counter cells took 50,000 steps, checked
// against the counter under another identity (the same code). steps/s is
// the steps checked per second of the whole call: the journal replayed
// with the code that wrote it, and the new code run and compared beside
// every step.
func BenchmarkUpgradeReplay(b *testing.B) {
	const keys, perKey = 2000, 25
	h := newHarness(b, 7, true)
	mustApply(b, h, counterManifest)
	ctx := context.Background()
	batch := make([]kernel.Event, 0, keys)
	for range perKey {
		batch = batch[:0]
		for k := range keys {
			batch = append(batch, kernel.Event{Schema: "com.test/CountEvent@1", JSON: []byte(fmt.Sprintf(`{"key":"k%05d","by":1}`, k))})
		}
		if _, err := h.w.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	v1, ok := h.builtins.Get("test/counter")
	if !ok {
		b.Fatal("no test/counter builtin")
	}
	h.builtins.MustRegister("test/counter-v2", "test/counter@2", "step", v1.Entrypoints["step"])
	dir := b.TempDir()
	p := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(p, []byte(strings.Replace(counterManifest, `"builtin":"test/counter","identity":"test/counter@1"`,
		`"builtin":"test/counter-v2","identity":"test/counter@2"`, 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	target, err := manifest.Load(p)
	if err != nil {
		b.Fatal(err)
	}
	stores := kernel.Stores{CAS: h.w.CAS(), Journal: h.w.Journal()}
	b.ResetTimer()
	var steps int
	start := time.Now()
	for range b.N {
		rep, err := kernel.ReplayManifest(ctx, stores, h.config(), target)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Diverged() != 0 || len(rep.Cells) < keys {
			b.Fatalf("%d cells, %d diverged", len(rep.Cells), rep.Diverged())
		}
		steps += rep.Steps
	}
	b.ReportMetric(float64(steps)/time.Since(start).Seconds(), "steps/s")
}
