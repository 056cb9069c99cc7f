package wasm_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
)

// waitSpare waits until m's spare (which must exist) has been built.
func waitSpare(tb testing.TB, m *wasm.Module) {
	tb.Helper()
	done := wasm.SpareDone(m)
	if done == nil {
		tb.Fatal("no spare after Reset of a warm module")
	}
	<-done
}

// A Step after Reset adopts the instance built in the background, and it
// is the instance a Step would have built: the same init-time stand-ins,
// globals and memory growth as on a never-reset module and as after a
// failed step.
func TestSpareSameAsFresh(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	fresh := compile(t, e, "abi", 0)
	reset := compile(t, e, "abi", 0)
	failed := compile(t, e, "abi", 0)

	// Warm reset and failed up, then discard their instances.
	for range 3 {
		step(t, reset, "counter-global", nil)
		step(t, failed, "counter-global", nil)
	}
	reset.Reset()
	waitSpare(t, reset)
	if _, err := failed.Step(context.Background(), "fault", counterInput(nil, 1)); err == nil {
		t.Fatal("fault: no error")
	}
	if wasm.SpareDone(failed) != nil {
		t.Fatal("a failed step started a spare")
	}

	for _, entry := range []string{"initvals", "counter-global", "counter-global"} {
		want := step(t, fresh, entry, nil).State
		for name, m := range map[string]*wasm.Module{"reset": reset, "failed": failed} {
			if got := step(t, m, entry, nil).State; string(got) != string(want) {
				t.Fatalf("%s: %s after the instance was discarded gave %x, a fresh module %x", name, entry, got, want)
			}
		}
	}
	if adopted, _ := wasm.Instantiations(reset); adopted != 1 {
		t.Fatalf("reset module adopted %d spares, want 1", adopted)
	}
	if adopted, inline := wasm.Instantiations(failed); adopted != 0 || inline != 2 {
		t.Fatalf("failed module: %d adopted, %d inline; want 0 and 2", adopted, inline)
	}

	// Memory growth from a spare matches too: grow, reset, grow again.
	seed := &modules.Input{Version: 1, State: []byte("G")}
	for _, m := range []*wasm.Module{fresh, reset} {
		m.Reset()
		waitSpare(t, m)
		step(t, m, "gc", seed)
	}
	if a, b := step(t, fresh, "counter-global", nil).State, step(t, reset, "counter-global", nil).State; string(a) != string(b) {
		t.Fatalf("after gc on a spare: %x vs %x", a, b)
	}
}

// A module that has not run since the last Reset gets no spare; a second
// Reset with nothing run between keeps the pending one (it is still fresh),
// and a Reset after the adopted spare stepped starts a new one: at most one
// per module.
func TestSpareOnlyWhenWarm(t *testing.T) {
	m := abi(t)
	m.Reset()
	if wasm.SpareDone(m) != nil {
		t.Fatal("Reset of a module that never ran started a spare")
	}
	step(t, m, "counter", nil)
	m.Reset()
	first := wasm.SpareDone(m)
	m.Reset()
	second := wasm.SpareDone(m)
	if first == nil || second != first {
		t.Fatalf("second Reset with nothing run between: spares %v then %v, want the first one kept", first, second)
	}
	<-second
	if n := count(t, step(t, m, "counter-global", nil).State); n != 1 {
		t.Fatalf("count %d on the spare, want 1", n)
	}
	if adopted, inline := wasm.Instantiations(m); adopted != 1 || inline != 1 {
		t.Fatalf("%d adopted, %d inline; want 1 and 1", adopted, inline)
	}
	// Once the spare has stepped, a Reset replaces it.
	m.Reset()
	if third := wasm.SpareDone(m); third == nil || third == first {
		t.Fatalf("Reset after the adopted spare stepped: spare %v, want a new one", third)
	}
}

// What _initialize does surfaces at the Step that adopts the spare exactly
// as at a Step that instantiates inline: the same class and text.
func TestSpareInitFailure(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	inline := compile(t, e, "initpanic", 0)
	_, want := inline.Step(context.Background(), "x", counterInput(nil, 1))
	if !isFault(want) {
		t.Fatalf("inline: %v, want a business fault", want)
	}

	m := compile(t, e, "initpanic", 0)
	if _, err := m.Step(context.Background(), "x", counterInput(nil, 1)); err == nil || err.Error() != want.Error() {
		t.Fatalf("first step: %v, want %v", err, want)
	}
	// A failed _initialize leaves no instance, so Reset would start no
	// spare: start one as Reset does for a warm module.
	m.Reset()
	if wasm.SpareDone(m) != nil {
		t.Fatal("spare without a warm instance")
	}
	wasm.StartSpare(m)
	waitSpare(t, m)
	_, err := m.Step(context.Background(), "x", counterInput(nil, 1))
	if err == nil || err.Error() != want.Error() || isFault(err) != isFault(want) {
		t.Fatalf("after the spare: %v, want %v", err, want)
	}
	if adopted, _ := wasm.Instantiations(m); adopted != 1 {
		t.Fatalf("%d adopted, want 1", adopted)
	}
	// Discarded as today: the next Step instantiates inline and fails alike.
	if _, err := m.Step(context.Background(), "x", counterInput(nil, 1)); err == nil || err.Error() != want.Error() {
		t.Fatalf("next step: %v, want %v", err, want)
	}
}

// A spare whose _initialize never ends is stopped when the adopting Step's
// context ends: the Step reports the timeout, and the goroutine has ended.
func TestSpareStoppedWithStep(t *testing.T) {
	m := compile(t, newEngine(t, wasm.Config{}), "initspin", 0)
	wasm.StartSpare(m)
	done := wasm.SpareDone(m)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the spare is surely running: after a collection,
		// which needs no clock. Either order must give the timeout.
		runtime.GC()
		cancel()
	}()
	_, err := m.Step(ctx, "x", counterInput(nil, 1))
	var env *modules.EnvError
	if !errors.As(err, &env) || env.Cause != "timeout" || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want an EnvError with cause timeout wrapping context.Canceled", err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the spare's goroutine still runs after the step returned")
	}
	if wasm.SpareDone(m) != nil {
		t.Fatal("the stopped spare is still pending")
	}
}

// Close and Engine.Close stop a spare in flight and wait for it.
func TestSpareStoppedByClose(t *testing.T) {
	e := newEngine(t, wasm.Config{})
	m := compile(t, e, "initspin", 0)
	wasm.StartSpare(m)
	done := wasm.SpareDone(m)
	m.Close()
	select {
	case <-done:
	default:
		t.Fatal("the spare's goroutine still runs after Close")
	}

	m2 := compile(t, e, "initspin", 0)
	wasm.StartSpare(m2)
	done = wasm.SpareDone(m2)
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("the spare's goroutine still runs after Engine.Close")
	}
	// The module fails after its engine closed, as before.
	if _, err := m2.Step(context.Background(), "x", counterInput(nil, 1)); err == nil {
		t.Fatal("step after Engine.Close: no error")
	}
}

func isFault(err error) bool {
	var f modules.Fault
	return errors.As(err, &f)
}
