package wasm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
)

// Prepare builds the instance the next Step runs on, and that Step builds
// none: the kernel starts a step's wall-clock limit after Prepare
// (kernel.Config.InstantiateTimeout). Prepare of a warm module does
// nothing; after a Reset it adopts the spare. What _initialize does comes
// back from Prepare as the Step would have reported it, and leaves no
// instance; a context already done stops it as a timeout.
func TestPrepareBuildsWhatStepRuns(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, wasm.Config{})
	m := compile(t, e, "abi", 0)
	if err := m.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, inline := wasm.Instantiations(m); inline != 1 {
		t.Fatalf("%d inline instantiations after Prepare, want 1", inline)
	}
	if n := count(t, step(t, m, "counter-global", nil).State); n != 1 {
		t.Fatalf("count %d on the prepared instance, want 1 (a fresh one)", n)
	}
	if err := m.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, step(t, m, "counter-global", nil).State); n != 2 {
		t.Fatalf("count %d: Prepare of a warm module replaced its instance", n)
	}
	if adopted, inline := wasm.Instantiations(m); adopted != 0 || inline != 1 {
		t.Fatalf("%d adopted, %d inline; want 0 and 1: the Steps built nothing", adopted, inline)
	}
	m.Reset()
	waitSpare(t, m)
	if err := m.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if adopted, inline := wasm.Instantiations(m); adopted != 1 || inline != 1 {
		t.Fatalf("after Reset: %d adopted, %d inline; want the spare adopted by Prepare", adopted, inline)
	}

	inline := compile(t, e, "initpanic", 0)
	_, want := inline.Step(ctx, "x", counterInput(nil, 1))
	bad := compile(t, e, "initpanic", 0)
	if err := bad.Prepare(ctx); err == nil || !isFault(err) || err.Error() != want.Error() {
		t.Fatalf("Prepare of a module whose _initialize panics: %v, want the Step's fault %v", err, want)
	}
	if _, err := bad.Step(ctx, "x", counterInput(nil, 1)); err == nil || err.Error() != want.Error() {
		t.Fatalf("Step after the failed Prepare: %v, want %v (no instance was kept)", err, want)
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	cold := compile(t, e, "abi", 0)
	var env *modules.EnvError
	if err := cold.Prepare(done); !errors.As(err, &env) || env.Cause != "timeout" {
		t.Fatalf("Prepare under a done context: %v, want an EnvError with cause timeout", err)
	}
	if _, inline := wasm.Instantiations(cold); inline != 0 {
		t.Fatalf("Prepare under a done context instantiated %d times", inline)
	}
}
