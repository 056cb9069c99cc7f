package kernel_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// slowStartWasm is a modules.Compiler whose runners count like fakeWasm's,
// but building a fresh instance takes build of wall time, as a wasm
// module's instantiation and _initialize do on a loaded machine (90 ms of
// CPU under -race: a thousand steps). A runner instantiates in Prepare when
// the kernel calls it, else inside Step, under the step's context, as
// modules/wasm's Module does; a build that a context stops leaves no
// instance. An instance is discarded after a failed step and at Reset.
type slowStartWasm struct {
	build time.Duration // wall time of one instantiation; <0: until its context ends
	work  time.Duration // wall time of one step once the instance is warm

	mu     sync.Mutex
	builds int // instantiations that completed
}

func (f *slowStartWasm) Compile(_ context.Context, name, _ string, _ []byte, _ uint32) (modules.Runner, error) {
	return &slowStartRunner{f: f, name: name}, nil
}

type slowStartRunner struct {
	f    *slowStartWasm
	name string
	warm bool
}

var _ modules.Preparer = (*slowStartRunner)(nil)

// wait spends d of wall time, or returns ctx's end as a timeout.
func (r *slowStartRunner) wait(ctx context.Context, d time.Duration) error {
	var after <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-after:
		return nil
	case <-ctx.Done():
		return &modules.EnvError{Module: r.name, Cause: "timeout", Err: ctx.Err()}
	}
}

func (r *slowStartRunner) Prepare(ctx context.Context) error {
	if r.warm {
		return nil
	}
	if err := r.wait(ctx, r.f.build); err != nil {
		return err
	}
	r.f.mu.Lock()
	r.f.builds++
	r.f.mu.Unlock()
	r.warm = true
	return nil
}

func (r *slowStartRunner) Step(ctx context.Context, _ string, in *modules.Input) (*modules.Output, error) {
	if err := r.Prepare(ctx); err != nil { // inline, under the step's context
		return nil, err
	}
	if err := r.wait(ctx, r.f.work); err != nil {
		r.warm = false
		return nil, err
	}
	s, ev := stateCount(in.State), decodeCount(in.Event.Value)
	return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": s.Count + ev.By})}, nil
}

func (r *slowStartRunner) Reset() { r.warm = false }

func slowStartHarness(t *testing.T, f *slowStartWasm, cfg func(*kernel.Config)) *harness {
	h := newHarnessWith(t, 7, true, func(h *harness) {
		h.extra = func(c *kernel.Config) { c.Wasm = f; cfg(c) }
	})
	applyDir(t, h, wasmCounterManifest(t, "slow start counter"))
	return h
}

// TestSlowInstantiationIsNotTheStepsTime: building a fresh instance is the
// host's work, not the step's. A first step whose instance takes four
// times the step limit to build, on a loaded machine, used to be stopped
// by that limit: the instance failed environmentally and its input waited
// for an operator (the crash harness's drain found acknowledged orders with
// no charge, docs/crash-harness.md). It runs now, once its instance is
// ready, within the step limit that starts then; so does the first step
// after a reopen. An instantiation that never ends is still stopped, by
// Config.InstantiateTimeout, as an environmental fault.
func TestSlowInstantiationIsNotTheStepsTime(t *testing.T) {
	ctx := context.Background()
	f := &slowStartWasm{build: 400 * time.Millisecond}
	h := slowStartHarness(t, f, func(c *kernel.Config) { c.StepTimeout = 100 * time.Millisecond })
	for i, key := range []string{"a", "a", "b"} {
		if _, err := h.w.Submit(ctx, countEvent(key, 1)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	h.reopen() // the first live step after an open builds its instance again
	if _, err := h.w.Submit(ctx, countEvent("b", 1)); err != nil {
		t.Fatal(err)
	}
	if _, faults := faultSeqs(t, h); len(faults) != 0 {
		t.Fatalf("faults %+v: a slow instantiation was judged as the step's time", faults)
	}
	if a, b := countOf(t, h, "a"), countOf(t, h, "b"); a != 2 || b != 2 {
		t.Fatalf("counts a=%d b=%d, want 2 and 2", a, b)
	}

	t.Run("the input's budget starts after the instance too", func(t *testing.T) {
		// No step limit; the input's wall-clock budget of 400 ms would
		// have been spent by a 600 ms instantiation before the step (of
		// 100 ms) began.
		f := &slowStartWasm{build: 600 * time.Millisecond, work: 100 * time.Millisecond}
		h := slowStartHarness(t, f, func(c *kernel.Config) { c.StepTimeout, c.InputTimeout = -1, 400*time.Millisecond })
		if _, err := h.w.Submit(ctx, countEvent("a", 5)); err != nil {
			t.Fatal(err)
		}
		if _, faults := faultSeqs(t, h); len(faults) != 0 || countOf(t, h, "a") != 5 {
			t.Fatalf("faults %+v, count %d: the instantiation was charged to the input's budget", faults, countOf(t, h, "a"))
		}
	})

	t.Run("an instantiation that never ends is stopped", func(t *testing.T) {
		f := &slowStartWasm{build: -1}
		h := slowStartHarness(t, f, func(c *kernel.Config) { c.StepTimeout, c.InstantiateTimeout = time.Minute, 200*time.Millisecond })
		if _, err := h.w.Submit(ctx, countEvent("a", 1)); err != nil {
			t.Fatal(err)
		}
		_, faults := faultSeqs(t, h)
		if len(faults) != 1 || faults[0].Class != kernel.FaultEnvironmental || !strings.Contains(faults[0].Reason, "timeout") {
			t.Fatalf("faults %+v: want one environmental timeout", faults)
		}
	})
}
