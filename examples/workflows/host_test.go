package workflows_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/aos-kernel/aos/examples/workflows"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/schemas"
)

// TestHostMatchesNative runs every step case through the kernel's own wasm
// host (modules/wasm) and through the native builtin: the same output bytes
// or the same fault, warm instance and all. It also runs them in reverse
// order, so a guest's reused buffers cannot leak from one step into the next.
//
// The host compiles with wazero's compiler, which the race detector slows to
// minutes per module; under -race, TestWasmMatchesNative (interpreter) is
// the cross-target check.
func TestHostMatchesNative(t *testing.T) {
	if raceEnabled {
		t.Skip("wazero's compiler takes minutes under the race detector; run without -race")
	}
	bins := buildAll(t)
	ctx := context.Background()
	eng, err := wasm.NewEngine(ctx, wasm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(ctx)
	runners := map[string]*wasm.Module{}
	for _, mod := range workflows.Modules() {
		sum := sha256.Sum256(bins[mod.Name()])
		r, err := eng.CompileModule(ctx, "com.example/"+mod.Name()+"@1", "sha256:"+hex.EncodeToString(sum[:]), bins[mod.Name()], 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		runners[mod.Name()] = r
	}
	var all []stepCase
	for _, cases := range allCases() {
		all = append(all, cases...)
	}
	for pass, order := range [][]stepCase{all, reversed(all)} {
		for _, c := range order {
			wantOut, wantErr := native(t, &c)
			gotOut, gotErr := runners[c.mod.Name()].Step(ctx, c.entrypoint(), c.input())
			where := c.mod.Name() + "/" + c.name
			if wantErr != nil {
				var f modules.Fault
				if !errors.As(gotErr, &f) || string(f) != wantErr.Error() {
					t.Errorf("pass %d %s: host %v, native fault %q", pass, where, gotErr, wantErr)
				}
				continue
			}
			if gotErr != nil {
				t.Errorf("pass %d %s: host %v, native ok", pass, where, gotErr)
				continue
			}
			if got, want := schemas.MustMarshal(gotOut), schemas.MustMarshal(wantOut); !bytes.Equal(got, want) {
				t.Errorf("pass %d %s: host output\n%x\nnative\n%x", pass, where, got, want)
			}
		}
	}
}

func reversed(cases []stepCase) []stepCase {
	out := make([]stepCase, len(cases))
	for i, c := range cases {
		out[len(cases)-1-i] = c
	}
	return out
}
