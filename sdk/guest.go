package sdk

import (
	"fmt"

	"github.com/aos-kernel/aos/modules"
)

// guest is the wasm side of docs/wasm-abi.md over plain byte slices, so it
// builds and is tested on every target; export_wasip1.go only turns the
// exports' pointers into slices and back.
//
// A guest is single-threaded, and each allocation in a Go wasm guest is
// costly, so a guest reuses its buffers from step to step: the input arena,
// the context, the output and the result. Nothing of them outlives a step
// except through copies: the sdk copies whatever it hands an author to keep
// (decoded values, Variant values, Key, the Context), and RawWorkflow
// documents that its state and event bytes are the step's own.
type guest struct {
	mod    *Module
	arena  []byte   // aos_alloc hands out slices of it
	used   int      // bytes of arena handed out since the last step
	old    [][]byte // arenas outgrown since the last step, still in use
	in     modules.Input
	names  names
	ctx    Ctx
	out    modules.Output
	result []byte // tag byte, then the output envelope or the fault text
}

// Result tags (docs/wasm-abi.md).
const (
	resultOutput = 0
	resultFault  = 1
)

// alloc returns size writable bytes (at least one, so the buffer has an
// address), or nil for a negative size. Every buffer stays valid until a
// step has run, so a host may allocate the entry name and the input
// separately; after the step the arena is reused.
func (g *guest) alloc(size int32) []byte {
	if size < 0 {
		return nil
	}
	n := max(int(size), 1)
	if len(g.arena)-g.used < n {
		if g.used > 0 {
			g.old = append(g.old, g.arena)
		}
		g.arena, g.used = make([]byte, max(2*len(g.arena), n, 4096)), 0
	}
	b := g.arena[g.used : g.used+n : g.used+n]
	g.used += n
	return b
}

// step runs the entrypoint named entry on the input envelope and returns the
// result buffer, valid until the next call.
func (g *guest) step(entry, input []byte) []byte {
	var fault string
	switch err := decodeInput(input, &g.in, &g.names); {
	case g.mod == nil:
		fault = "sdk: no module exported (call sdk.Export from the main package's init)"
	case err != nil:
		fault = "sdk: malformed input envelope: " + err.Error()
	case g.in.Version != 1:
		fault = fmt.Sprintf("sdk: input envelope version %d, this module speaks 1", g.in.Version)
	default:
		if h, ok := g.mod.entries[string(entry)]; ok {
			g.ctx.reset(&g.in)
			fault = run(h, &g.ctx, &g.out)
		} else {
			fault = fmt.Sprintf("module %s has no entrypoint %q", g.mod.name, entry)
		}
	}
	if fault != "" {
		g.result = append(append(g.result[:0], resultFault), fault...)
	} else {
		g.result = appendOutput(append(g.result[:0], resultOutput), &g.out)
	}
	g.in, g.out = modules.Input{}, modules.Output{}
	g.ctx.reset(nil)
	g.used = 0
	clear(g.old)
	g.old = g.old[:0]
	return g.result
}
