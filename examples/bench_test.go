package examples_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/modules/wasm/wasmtest"
	"github.com/aos-kernel/aos/schemas"
)

// BenchmarkWorldSteps measures whole-kernel steps per second of an example
// workflow, run as wasm and as its native build: events are submitted in
// batches of 256 (so commit latency does not bound it), to 1,000 keys, on
// Badger on disk. The ratio of the two is the price of wasm.
//
//	go test ./examples -run '^$' -bench WorldSteps -benchtime 20000x
func BenchmarkWorldSteps(b *testing.B) {
	for _, c := range []struct {
		example string
		event   func(i int) kernel.Event
	}{
		{"counter", func(i int) kernel.Event {
			return kernel.Event{Schema: "com.example/CountEvent@1", JSON: json.RawMessage(fmt.Sprintf(`{"key":"k%d","by":1}`, i%1000))}
		}},
		{"orders", func(i int) kernel.Event {
			return kernel.Event{Schema: "com.example/OrderCreated@1",
				JSON: json.RawMessage(fmt.Sprintf(`{"order_id":"o%d","amount_cents":100,"customer":"c%d"}`, i, i%1000))}
		}},
	} {
		for _, native := range []bool{false, true} {
			name := c.example + "/wasm"
			if native {
				name = c.example + "/native"
			}
			b.Run(name, func(b *testing.B) { benchWorld(b, c.example, native, c.event) })
		}
	}
}

func benchWorld(b *testing.B, example string, native bool, event func(int) kernel.Event) {
	ctx := context.Background()
	dir := built.Path(b, example)
	m, err := manifest.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	db, err := badgerdb.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	builtins := modules.NewBuiltins()
	if native {
		hashes := map[string]string{}
		for _, md := range m.Modules {
			hashes[path.Base(path.Dir(md.Runtime.Source))] = md.Runtime.ArtifactHash
		}
		workflows.Register(builtins, func(module string) string {
			if h, ok := hashes[path.Base(module)]; ok {
				return h
			}
			return workflows.Identity(module)
		})
	}
	w, err := kernel.Open(storesOf(db), kernel.Config{Builtins: builtins, Wasm: wasmtest.Engine(b, built.WasmCache(b))})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Apply(ctx, m, false); err != nil {
		b.Fatal(err)
	}
	const batch = 256
	evs := make([]kernel.Event, 0, batch)
	b.ResetTimer()
	t0 := time.Now()
	for i := 0; i < b.N; i += batch {
		evs = evs[:0]
		for j := i; j < i+batch && j < b.N; j++ {
			evs = append(evs, event(j))
		}
		if _, err := w.Submit(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(t0)
	b.StopTimer()
	st, err := w.Status(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if st.Instances.Failed != 0 {
		b.Fatalf("%d instances failed", st.Instances.Failed)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "steps/s")
}

// BenchmarkCounterStepParts splits one counter step into what it costs.
// Through the wasm runner: "raw" moves the envelopes in and out and decodes
// nothing (host encode, the call, the guest's envelope decode and encode,
// host decode), "decode" adds decoding state and event into Go values,
// "full" adds the logic and encoding the new state (the typed API), and
// "example" is the counter example itself. Natively: the example's Go code
// (its guest part without wasm), the host's encoding of the input envelope,
// and the kernel's validation of the state.
//
//	go test ./examples -run '^$' -bench CounterStepParts
func BenchmarkCounterStepParts(b *testing.B) {
	ctx := context.Background()
	m, err := manifest.Load(built.Path(b, "counter"))
	if err != nil {
		b.Fatal(err)
	}
	md := m.Modules["com.example/counter@1"]
	partsWasm := buildGuest(b, "./testdata/guests/counterparts")
	in := &modules.Input{Version: 1,
		State: schemas.MustMarshal(map[string]any{"count": 41}),
		Event: modules.EventIn{Schema: "com.example/CountEvent@1", Value: schemas.MustMarshal(map[string]any{"key": "k1", "by": 1}),
			Key: schemas.MustMarshal("k1")},
		Ctx: schemas.MustMarshal(map[string]any{"now_ns": 1, "logical_now_ns": 1, "entropy": make([]byte, 32), "journal_height": 1,
			"event_hash": "sha256:00", "manifest_hash": "sha256:00", "workflow": "com.example/counter.step@1", "workflow_hash": "sha256:00",
			"key": schemas.MustMarshal("k1"), "cell_mode": true})}
	e, err := wasm.NewEngine(ctx, wasm.Config{CacheDir: built.Dir(b) + "/.wasm-cache"})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	runWasm := func(code []byte, entry string) func(b *testing.B) {
		return func(b *testing.B) {
			r, err := e.Compile(ctx, "bench", schemas.HashBytes(code).String(), code, 0)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.Step(ctx, entry, in); err != nil { // instantiate outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Step(ctx, entry, in); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("wasm/raw", runWasm(partsWasm, "raw"))
	b.Run("wasm/decode", runWasm(partsWasm, "decode"))
	b.Run("wasm/full", runWasm(partsWasm, "full"))
	b.Run("wasm/example", runWasm(md.Runtime.Bytes, "step"))
	b.Run("native/example", func(b *testing.B) {
		fn := counter.Module.Builtin("x").Entrypoints["step"]
		for i := 0; i < b.N; i++ {
			if _, err := fn(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("native/host-encode-input", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := schemas.Marshal(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("native/kernel-validate-state", func(b *testing.B) {
		out, err := counter.Module.Builtin("x").Entrypoints["step"](in)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			if err := m.Registry.Validate("com.example/CounterState@1", out.State); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// buildGuest builds a wasm main package with the flags aosd build uses.
func buildGuest(b *testing.B, pkg string) []byte {
	b.Helper()
	out := filepath.Join(b.TempDir(), "guest.wasm")
	if err := build.Package(context.Background(), "", pkg, out); err != nil {
		b.Fatal(err)
	}
	code, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	return code
}
