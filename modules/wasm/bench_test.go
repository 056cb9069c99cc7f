package wasm_test

import (
	"context"
	"testing"
	"time"

	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/schemas"
)

// BenchmarkStepCounter runs a counter step (decode state {count} and event
// {by}, return the new state) on a warm instance, the way the kernel does:
// with no deadline (replay), with a deadline per step (live), and on an
// engine without wazero's termination checks, to price them.
func BenchmarkStepCounter(b *testing.B) {
	engines := []struct {
		name string
		new  func(context.Context, wasm.Config) (*wasm.Engine, error)
	}{
		{"stop=interrupt", wasm.NewEngine},
		{"stop=wazero", wasm.NewEngineStoppedByWazero},
		{"stop=never", wasm.NewEngineNeverStopped},
	}
	for _, eng := range engines {
		for _, deadline := range []bool{false, true} {
			name := eng.name + "/deadline=none"
			if deadline {
				name = eng.name + "/deadline=2s"
			}
			b.Run(name, func(b *testing.B) {
				guest(b, "abi")
				e, err := eng.new(context.Background(), wasm.Config{CacheDir: guests.cache})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close(context.Background())
				m := compile(b, e, "abi", 0)
				in := counterInput(schemas.MustMarshal(map[string]uint64{"count": 1}), 1)
				step(b, m, "counter", in) // instantiate
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					ctx, cancel := context.Background(), context.CancelFunc(nil)
					if deadline {
						ctx, cancel = context.WithTimeout(ctx, 2*time.Second)
					}
					out, err := m.Step(ctx, "counter", in)
					if cancel != nil {
						cancel()
					}
					if err != nil {
						b.Fatal(err)
					}
					in.State = out.State
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
			})
		}
	}
}

// BenchmarkStepSpin runs a loop-heavy step (a million iterations), where
// the way a deadline stops a guest costs the most.
func BenchmarkStepSpin(b *testing.B) {
	for _, eng := range []struct {
		name string
		new  func(context.Context, wasm.Config) (*wasm.Engine, error)
	}{
		{"stop=interrupt", wasm.NewEngine},
		{"stop=wazero", wasm.NewEngineStoppedByWazero},
		{"stop=never", wasm.NewEngineNeverStopped},
	} {
		b.Run(eng.name, func(b *testing.B) {
			guest(b, "abi")
			e, err := eng.new(context.Background(), wasm.Config{CacheDir: guests.cache})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(context.Background())
			m := compile(b, e, "abi", 0)
			in := counterInput(nil, 1000)
			step(b, m, "spin", in)
			for b.Loop() {
				if _, err := m.Step(context.Background(), "spin", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstantiate is the cost of a fresh instance: instantiation,
// _initialize (the Go runtime's start) and one counter step.
func BenchmarkInstantiate(b *testing.B) {
	m := abi(b)
	in := counterInput(nil, 1)
	step(b, m, "counter", in)
	b.ReportAllocs()
	for b.Loop() {
		m.Reset()
		if _, err := m.Step(context.Background(), "counter", in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileFromCacheDir is the cost of compiling a module a new
// engine finds in its CacheDir (a restart), against compiling it afresh.
func BenchmarkCompileFromCacheDir(b *testing.B) {
	code := guest(b, "abi")
	for _, cached := range []bool{true, false} {
		name := "cached"
		if !cached {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				cfg := wasm.Config{CacheDir: guests.cache}
				if !cached {
					cfg.CacheDir = b.TempDir()
				}
				e, err := wasm.NewEngine(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := e.CompileModule(context.Background(), "abi", "", code, 0); err != nil {
					b.Fatal(err)
				}
				e.Close(context.Background())
			}
		})
	}
}
