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
// _initialize (the Go runtime's start) and one counter step. Reset builds
// the instance on another goroutine (the spare) and the step waits for it,
// so this is still the whole cost; BenchmarkStepAfterReset is what the
// step alone costs once the spare is ready.
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

// BenchmarkStepAfterReset is the first step after a Reset, as the kernel's
// loop sees it after a checkpoint: with the spare built in the background
// and ready (spare=ready), and with the instance built inline by the step
// (spare=none, as before spares). Only the step is timed.
func BenchmarkStepAfterReset(b *testing.B) {
	m := abi(b)
	in := counterInput(nil, 1)
	step(b, m, "counter", in)
	for _, ready := range []bool{true, false} {
		name := "spare=ready"
		if !ready {
			name = "spare=none"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				m.Reset()
				if ready {
					<-wasm.SpareDone(m)
				} else {
					wasm.DropSpare(m)
				}
				b.StartTimer()
				if _, err := m.Step(context.Background(), "counter", in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
