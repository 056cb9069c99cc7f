package wasm

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// A small wasm assembler for modules Go does not produce.

func leb(v uint32) []byte { return appendU32(nil, v) }

func sec(id byte, items ...[]byte) []byte {
	c := leb(uint32(len(items)))
	for _, it := range items {
		c = append(c, it...)
	}
	return append(append([]byte{id}, leb(uint32(len(c)))...), c...)
}

func str(s string) []byte { return append(leb(uint32(len(s))), s...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// body is a function body with no locals.
func body(code ...byte) []byte {
	b := append([]byte{0}, code...)
	return append(leb(uint32(len(b))), b...)
}

func module(sections ...[]byte) []byte {
	return cat(append([][]byte{[]byte("\x00asm\x01\x00\x00\x00")}, sections...)...)
}

var (
	typeVoid  = sec(1, []byte{0x60, 0, 0})          // type 0: () -> ()
	funcs1    = sec(3, []byte{0})                   // one function of type 0
	exportF   = sec(7, cat(str("f"), []byte{0, 0})) // export "f" = func 0
	memory1   = sec(5, []byte{0, 1})                // one memory, min 1 page
	loopOnce  = body(0x03, 0x40, 0x0b, 0x0b)        // loop end end
	loopEver  = body(0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b)
	nameCusto = cat([]byte{0}, leb(uint32(len(str("x"))+1)), str("x"), []byte{7}) // a custom section
)

// run instruments code, compiles and instantiates it, sets the interrupt
// global to interrupt and calls "f" until it fails, fuelVisit+1 times at
// most: enough for the checks to run out of fuel once.
func run(t *testing.T, code []byte, interrupt uint64) error {
	t.Helper()
	out, err := prepare(code, true)
	if err != nil {
		t.Fatalf("instrument: %v", err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	cm, err := r.CompileModule(ctx, out)
	if err != nil {
		t.Fatalf("compile the instrumented module: %v", err)
	}
	mod, err := r.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
	if !ok {
		t.Fatal("no interrupt global")
	}
	g.Set(interrupt)
	f := mod.ExportedFunction("f")
	for i := 0; i <= fuelVisit && err == nil; i++ {
		_, err = f.Call(ctx)
	}
	return err
}

func TestInstrument(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
	}{
		{"loop", module(typeVoid, funcs1, memory1, exportF, sec(10, loopOnce))},
		{"custom sections", module(nameCusto, typeVoid, nameCusto, funcs1, memory1, exportF, nameCusto, sec(10, loopOnce), nameCusto)},
		{"globals and exports", module(typeVoid, funcs1, memory1,
			sec(6, []byte{0x7e, 0, 0x42, 7, 0x0b}, []byte{0x7f, 1, 0x41, 1, 0x0b}),
			sec(7, cat(str("f"), []byte{0, 0}), cat(str("g"), []byte{3, 1}), cat(str("memory"), []byte{2, 0})),
			sec(10, body(0x23, 0x01, 0x1a, 0x03, 0x40, 0x0b, 0x0b)))}, // global.get 1; drop; loop end
		// Instructions with immediates of every kind the reader knows.
		{"immediates", module(typeVoid, funcs1, memory1, exportF, sec(10, body(
			0x41, 0, 0x41, 0, 0x41, 1, 0xfc, 11, 0, // memory.fill
			0xfd, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // v128.const
			0xfd, 21, 3, 0x1a, // i8x16.extract_lane_s 3; drop
			0x41, 1, 0x41, 2, 0x41, 0, 0x1c, 1, 0x7f, 0x1a, // select i32; drop
			0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, 0x1a, // i64.const min, 10 bytes
			0x43, 0, 0, 0x80, 0x3f, 0x1a, 0x44, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x1a, // f32.const, f64.const
			0x41, 0, 0x28, 2, 0x80, 0x01, 0x1a, // i32.load align=2 offset=128; drop
			0x02, 0x40, 0x41, 0, 0x0e, 1, 0, 0, 0x0b, // block; br_table [0] 0; end
			0x02, 0x7f, 0x41, 5, 0x0b, 0x1a, // block (result i32) i32.const 5 end; drop
			0x3f, 0, 0x1a, // memory.size; drop
			0x03, 0x40, 0x0b, // loop end
			0x0b,
		)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(t, tc.code, 0); err != nil {
				t.Fatalf("clear: %v", err)
			}
			if err := run(t, tc.code, 1); err == nil || !strings.Contains(err.Error(), "unreachable") {
				t.Fatalf("set: %v, want an unreachable trap", err)
			}
		})
	}
}

// The check at a loop's head stops a loop that never calls anything, and
// lets the garbage collector stop the world meanwhile.
func TestInstrumentStopsALoop(t *testing.T) {
	code := module(typeVoid, sec(3, []byte{0}, []byte{0}), memory1, exportF, sec(10, loopEver, loopOnce))
	out, err := prepare(code, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	g := m.ExportedGlobal(interruptExport).(api.MutableGlobal)
	done := make(chan error)
	go func() {
		_, err := m.ExportedFunction("f").Call(ctx)
		done <- err
	}()
	for range 5 {
		runtime.GC() // stops the world: returns only once the spinning loop visits Go
	}
	g.Set(1)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("got %v, want an unreachable trap", err)
	}
}

func TestInstrumentRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		code []byte
		want string
	}{
		{"reserved export", module(sec(6, []byte{0x7f, 0, 0x41, 0, 0x0b}), sec(7, cat(str(interruptExport), []byte{3, 0}))), "a name the host reserves"},
		{"no memory", module(typeVoid, funcs1, sec(10, loopOnce)), "defines no memory"},
		{"tail call", module(typeVoid, funcs1, memory1, sec(10, body(0x12, 0, 0x0b))), "opcode 0x12: unsupported"},
		{"atomics", module(typeVoid, funcs1, memory1, sec(10, body(0xfe, 0, 0x0b))), "opcode 0xfe: unsupported"},
		{"truncated", module(typeVoid, funcs1, memory1, sec(10, body(0x41))), "malformed"},
		// Counts wazero would allocate for before reading what they count.
		{"element bomb", module(cat([]byte{9, 5}, leb(1<<32-1))), "element section: 4294967295 element segments declared at byte 0, in 0 bytes"},
		{"type bomb", module(sec(1, cat([]byte{0x60}, leb(1<<32-1)))), "type section: 4294967295 parameters declared at byte 2"},
		{"data bomb", module(memory1, sec(11, cat([]byte{1}, leb(1<<32-1)))), "data section: truncated"},
		{"locals bomb", module(typeVoid, funcs1, memory1, sec(10, cat([]byte{8, 1}, leb(1<<32-1), []byte{0x7f, 0x0b}))), "declares 4294967295 locals, over the limit of 50000"},
		{"section bomb", module([]byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f}), "section at byte 8 is truncated"},
		{"garbage", []byte("nope"), "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := prepare(tc.code, true); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzInstrument: prepare never panics, and when wazero accepts a module
// prepared without instrumentation, it accepts it instrumented too. (wazero
// reads only what prepare accepted: its decoder cannot take arbitrary input.)
func FuzzInstrument(f *testing.F) {
	f.Add(module(typeVoid, funcs1, memory1, exportF, sec(10, loopOnce)))
	f.Add(module(typeVoid, funcs1, memory1, sec(6, []byte{0x7f, 1, 0x41, 1, 0x0b}), sec(10, body(0x23, 0, 0x1a, 0x0b))))
	f.Add(module(nameCusto, memory1))
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	f.Fuzz(func(t *testing.T, code []byte) {
		out, err := prepare(code, true)
		if err != nil {
			return
		}
		plain, err := prepare(code, false)
		if err != nil {
			t.Fatalf("prepared instrumented but not plain: %v", err)
		}
		cm, err := r.CompileModule(ctx, plain)
		if err != nil {
			return
		}
		cm.Close(ctx)
		cm, err = r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("wazero accepts %x but not instrumented, %x: %v", plain, out, err)
		}
		cm.Close(ctx)
	})
}
