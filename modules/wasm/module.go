package wasm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/aos-kernel/aos/modules"
)

// Module runs the entrypoints of one compiled module on at most one warm
// instance. It implements modules.Runner. Not safe for concurrent use: the
// kernel's loop owns it. Different Modules may run concurrently.
type Module struct {
	s       *moduleState
	cleanup runtime.Cleanup
}

var _ modules.Runner = (*Module)(nil)

// moduleState is a Module's state, apart from the Module so that an
// abandoned Module can be closed when it is collected.
type moduleState struct {
	eng            *Engine
	name           string
	c              *compiled
	inst           *instance // the warm instance, nil when there is none
	in             []byte    // the input envelope's encoding, reused
	stdout, stderr capture   // of the current call, shared by the adopted instances
	spare          *spare    // the next fresh instance, being built; nil when there is none
	closed         bool

	adopted, inline int // instantiations taken from a spare and made in a Step (failed ones too), for tests
}

// spare is a fresh instance built on a goroutine of its own after a Reset,
// so that the next Step only adopts it instead of instantiating on the
// kernel's loop. It is what instantiate would have made at that Step: a
// fresh instance is deterministic (its clock and randomness start from
// fixed values), and whatever _initialize did is kept as err for the Step
// to report. Until done is closed, only the goroutine touches inst, err
// and the captures; after, only the loop.
type spare struct {
	cancel         context.CancelFunc // stops _initialize (the interrupt)
	done           chan struct{}      // closed when the goroutine has ended
	inst           *instance
	err            error
	stdout, stderr capture // _initialize's, apart from the current step's
}

// phase says what a guest call is doing, for the WASI policy.
type phase uint8

const (
	phaseInit phase = iota // _initialize: everything gets a deterministic stand-in
	phaseStep              // aos_alloc, aos_step: randomness, files, sockets and sleeps are violations
)

// instance is one instantiation of a module and the host's state for it.
// The host functions reach it through the call's context (callCtx).
type instance struct {
	mod         api.Module
	mem         api.Memory
	alloc, step api.Function
	interrupt   api.MutableGlobal // see interruptExport; nil if not instrumented
	stack       [4]uint64

	phase     phase
	violation string // the first thing the current step must not have asked for
	slept     bool   // the current step slept (poll_oneoff with a timeout)
	exited    bool   // the guest called proc_exit
	exitCode  uint32
	clock     uint64 // the monotonic clock's stand-in
	rand      uint64 // random_get's generator state

	stdout, stderr *capture
}

// violate records that the guest asked for something a step must not have.
// Only the first counts: later ones may be its consequences.
func (in *instance) violate(reason string) {
	if in.phase == phaseStep && in.violation == "" {
		in.violation = reason
	}
}

// sleep records that the guest slept. It is a violation only if nothing
// else goes wrong: the Go runtime sleeps while it crashes, and the crash is
// the reason to report.
func (in *instance) sleep() {
	if in.phase == phaseStep {
		in.slept = true
	}
}

// nextRand is splitmix64: deterministic, and good enough to seed the Go
// runtime's own generator.
func (in *instance) nextRand() uint64 {
	in.rand += 0x9e3779b97f4a7c15
	z := in.rand
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fault is the fault of a call that returned: a forbidden call it made.
func (in *instance) fault() error {
	switch {
	case in.violation != "":
		return modules.Fault(in.violation)
	case in.slept:
		return modules.Fault(violSleep)
	}
	return nil
}

// begin starts a call into the guest.
func (in *instance) begin(p phase) {
	in.phase, in.violation, in.slept, in.exited = p, "", false, false
	in.stdout.reset()
	in.stderr.reset()
}

// Step runs entrypoint on in. It instantiates the module (running
// _initialize) when no instance is warm.
//
// It returns the output, or a modules.Fault for a business fault (a trap,
// proc_exit, a fault the guest returned, a malformed, non-canonical or
// oversized result, a forbidden WASI call, memory exhausted), or a
// *modules.EnvError when ctx stopped the step (Cause "timeout") or the host
// failed ("instantiate", "host"). After any error the instance is
// discarded, and the next Step starts on a fresh one.
func (m *Module) Step(ctx context.Context, entrypoint string, in *modules.Input) (*modules.Output, error) {
	out, err := m.s.run(ctx, entrypoint, in)
	// m's cleanup closes s once m is unreachable, which it would be during
	// the step without this.
	runtime.KeepAlive(m)
	return out, err
}

// Prepare makes the warm instance ready under ctx when there is none: it
// adopts the spare, or instantiates the module (running _initialize). The
// Step after it then only runs the entrypoint. It returns what that Step
// would have returned for the instantiation (modules.Preparer).
func (m *Module) Prepare(ctx context.Context) error {
	err := m.s.prepare(ctx)
	runtime.KeepAlive(m)
	return err
}

var _ modules.Preparer = (*Module)(nil)

// Reset discards the warm instance: the next Step starts on a fresh one.
// The kernel calls it at journaled points. If the module had an instance,
// Reset starts building the fresh one in the background, so that the next
// Step does not instantiate on the caller's goroutine; a module that has not
// run since the last Reset keeps what it has (a spare, or nothing).
func (m *Module) Reset() {
	m.s.reset()
	runtime.KeepAlive(m)
}

// Close discards the instance and releases the compiled code (shared with
// other Modules of the same code, and closed when the last one closes).
func (m *Module) Close() error {
	m.cleanup.Stop()
	m.s.close()
	return nil
}

// Name is the module def's name.
func (m *Module) Name() string { return m.s.name }

func (s *moduleState) run(ctx context.Context, entrypoint string, in *modules.Input) (*modules.Output, error) {
	if s.closed {
		return nil, &modules.EnvError{Module: s.name, Cause: "host", Err: ErrClosed}
	}
	if ctx.Err() != nil {
		// A spare stays: the step never touched it, and dropping it would
		// wait on the caller's goroutine for a build in flight.
		s.discard()
		return nil, s.stopped(ctx)
	}
	if s.inst == nil {
		if err := s.instantiate(ctx); err != nil {
			return nil, err
		}
	}
	out, err := s.step(ctx, s.inst, entrypoint, in)
	if err != nil {
		s.discard()
	}
	return out, err
}

func (s *moduleState) prepare(ctx context.Context) error {
	switch {
	case s.closed:
		return &modules.EnvError{Module: s.name, Cause: "host", Err: ErrClosed}
	case s.inst != nil:
		return nil
	case ctx.Err() != nil:
		return s.stopped(ctx) // as run: a spare stays
	}
	return s.instantiate(ctx)
}

func (s *moduleState) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.dropSpare()
	s.discard()
	s.eng.release(s.c)
}

// reset discards the warm instance, if any, and starts a spare in its
// place; with no warm instance it changes nothing.
func (s *moduleState) reset() {
	if s.closed || s.inst == nil {
		// Nothing ran since the last reset: a spare, built or being
		// built, is still as fresh as a new one would be (instances are
		// deterministic), so it is kept, and a module that never ran
		// gets none.
		return
	}
	s.discard()
	s.startSpare()
}

// startSpare builds a fresh instance on a goroutine of its own. wazero
// supports this: ModuleConfig.WithName documents instantiating one
// CompiledModule many times anonymously, as moduleConfig does, and its
// examples/concurrent-instantiation (wazero v1.12.0) "demonstrates how to
// instantiate multiple Wasm instances per Goroutine concurrently" from one
// CompiledModule in one Runtime and calls them concurrently; only an
// api.Function's Call is not goroutine-safe, and the spare calls only its
// own instance's. The instances share no host state: the spare writes only
// its own captures and instance.
//
// An engine whose guests cannot be stopped (stopNever, for benchmarks)
// builds no spare: one that spun could never be stopped.
func (s *moduleState) startSpare() {
	if s.eng.stop == stopNever {
		return
	}
	base, ok := s.eng.spareStarted()
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(base)
	sp := &spare{
		cancel: cancel,
		done:   make(chan struct{}),
		stdout: newCapture(s.eng.cfg.StderrTail),
		stderr: newCapture(s.eng.cfg.StderrTail),
	}
	s.spare = sp
	go func() {
		defer s.eng.spareWG.Done()
		defer close(sp.done)
		sp.inst, sp.err = s.build(ctx, &sp.stdout, &sp.stderr)
	}()
}

// dropSpare stops the spare, if any, waits for its goroutine to end and
// discards what it built.
func (s *moduleState) dropSpare() {
	sp := s.spare
	if sp == nil {
		return
	}
	s.spare = nil
	sp.cancel()
	<-sp.done
	if sp.inst != nil {
		_ = sp.inst.mod.Close(context.Background())
	}
}

// adopt makes the spare the warm instance, waiting for it under ctx. If ctx
// ends first the spare is stopped and discarded, and the step fails as an
// instantiation that ctx stopped does; if _initialize failed, the step
// fails as it would have in instantiate.
func (s *moduleState) adopt(ctx context.Context) error {
	sp := s.spare
	select {
	case <-sp.done:
	case <-ctx.Done():
		s.dropSpare() // stop it, wait for its goroutine and discard it
		return s.stopped(ctx)
	}
	s.spare = nil
	sp.cancel()
	s.adopted++
	if sp.err != nil {
		return sp.err
	}
	sp.inst.stdout, sp.inst.stderr = &s.stdout, &s.stderr // the steps' own from now on
	s.inst = sp.inst
	return nil
}

func (s *moduleState) discard() {
	if s.inst != nil {
		_ = s.inst.mod.Close(context.Background())
		s.inst = nil
	}
}

// instantiate makes the warm instance: it adopts the spare if there is
// one, and builds the instance itself if not.
func (s *moduleState) instantiate(ctx context.Context) error {
	if s.spare != nil {
		return s.adopt(ctx)
	}
	inst, err := s.build(ctx, &s.stdout, &s.stderr)
	s.inline++
	if err != nil {
		return err
	}
	s.inst = inst
	return nil
}

// build instantiates the module and runs _initialize under ctx, with the
// guest's output going to stdout and stderr. It touches nothing else of s
// but what never changes (the engine, name and code), so it may run on a
// goroutine other than the loop's.
func (s *moduleState) build(ctx context.Context, stdout, stderr *capture) (*instance, error) {
	inst := &instance{clock: clockStart, rand: randSeedStart, stdout: stdout, stderr: stderr}
	inst.begin(phaseInit)
	cc := &callCtx{Context: ctx, in: inst}
	mod, err := s.c.rt.InstantiateModule(cc, s.c.code, moduleConfig)
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.stopped(ctx)
		}
		return nil, &modules.EnvError{Module: s.name, Cause: "instantiate", Err: err}
	}
	inst.mod, inst.mem = mod, mod.ExportedMemory("memory")
	inst.alloc, inst.step = mod.ExportedFunction("aos_alloc"), mod.ExportedFunction("aos_step")
	if s.eng.stop == stopByInterrupt {
		g, ok := mod.ExportedGlobal(interruptExport).(api.MutableGlobal)
		if !ok {
			_ = mod.Close(context.Background())
			return nil, &modules.EnvError{Module: s.name, Cause: "instantiate", Err: errors.New("wasm: the interrupt global is missing")}
		}
		inst.interrupt = g
	}
	if s.c.init {
		disarm := arm(ctx, inst.interrupt)
		err := mod.ExportedFunction("_initialize").CallWithStack(cc, nil)
		if disarm != nil && disarm() {
			err = s.stopped(ctx)
		} else if err != nil {
			err = s.callFailed(ctx, inst, "_initialize", err)
		}
		if err != nil {
			_ = mod.Close(context.Background())
			return nil, err
		}
	}
	return inst, nil
}

// arm makes ctx stop the guest of g (the instance's interrupt global) when
// it is done, until the returned disarm is called; disarm reports whether
// ctx stopped it, after which the instance must not run again. A context
// that cannot be done needs no arming: arm returns nil.
func arm(ctx context.Context, g api.MutableGlobal) (disarm func() (fired bool)) {
	if g == nil || ctx.Done() == nil {
		return nil
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		g.Set(1)
		close(fired)
	})
	return func() bool {
		if stop() {
			return false
		}
		<-fired // set, or being set: wait until it is
		return true
	}
}

// moduleConfig instantiates guests anonymously (any number may run in one
// runtime) and without running start functions: the host calls
// _initialize itself, under its WASI policy. wazero's own WASI settings
// (args, env, stdio, clocks, files) are unused: the host's
// wasi_snapshot_preview1 answers every call.
var moduleConfig = wazero.NewModuleConfig().WithName("").WithStartFunctions()

func (s *moduleState) step(ctx context.Context, inst *instance, entrypoint string, in *modules.Input) (*modules.Output, error) {
	s.in = appendInput(s.in[:0], in)
	size := uint64(len(entrypoint)) + uint64(len(s.in))
	if size > 1<<31-1 {
		return nil, modules.Fault(fmt.Sprintf("wasm step input is %d bytes, over what a wasm32 guest can take", size))
	}
	inst.begin(phaseStep)
	cc := &callCtx{Context: ctx, in: inst}
	disarm := arm(ctx, inst.interrupt)
	out, err := s.calls(cc, inst, entrypoint, uint32(size))
	if disarm != nil && disarm() {
		return nil, s.stopped(ctx) // whatever happened after, ctx stopped it
	}
	return out, err
}

// calls makes the two calls of a step: aos_alloc for the entrypoint's
// name and the input, then aos_step.
func (s *moduleState) calls(cc *callCtx, inst *instance, entrypoint string, size uint32) (*modules.Output, error) {
	inst.stack[0] = uint64(size)
	if err := inst.alloc.CallWithStack(cc, inst.stack[:]); err != nil {
		return nil, s.callFailed(cc.Context, inst, "aos_alloc", err)
	}
	if err := inst.fault(); err != nil {
		return nil, err
	}
	ptr := uint32(inst.stack[0])
	if uint64(ptr)+uint64(size) > uint64(inst.mem.Size()) {
		return nil, modules.Fault(fmt.Sprintf("wasm guest aos_alloc(%d) returned %#x, outside its memory of %d bytes",
			size, ptr, inst.mem.Size()))
	}
	inst.mem.WriteString(ptr, entrypoint)
	inst.mem.Write(ptr+uint32(len(entrypoint)), s.in)

	inst.stack = [4]uint64{uint64(ptr), uint64(len(entrypoint)), uint64(ptr) + uint64(len(entrypoint)), uint64(len(s.in))}
	if err := inst.step.CallWithStack(cc, inst.stack[:]); err != nil {
		return nil, s.callFailed(cc.Context, inst, "aos_step", err)
	}
	if err := inst.fault(); err != nil {
		return nil, err
	}
	return s.result(inst, uint32(inst.stack[0]>>32), uint32(inst.stack[0]))
}

// result reads and decodes the result buffer of aos_step.
func (s *moduleState) result(inst *instance, ptr, n uint32) (*modules.Output, error) {
	if n == 0 {
		return nil, modules.Fault("wasm guest returned an empty result")
	}
	if limit := s.eng.cfg.MaxResultBytes; uint64(n) > uint64(limit) {
		return nil, modules.Fault(fmt.Sprintf("wasm guest result is %d bytes, over the host's limit of %d", n, limit))
	}
	buf, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, modules.Fault(fmt.Sprintf("wasm guest result of %d bytes at %#x is outside its memory of %d bytes",
			n, ptr, inst.mem.Size()))
	}
	switch buf[0] {
	case 0:
		out, err := decodeOutput(bytes.Clone(buf[1:]))
		if err != nil {
			return nil, modules.Fault(err.Error())
		}
		return out, nil
	case 1:
		text := strings.ToValidUTF8(string(buf[1:]), "\uFFFD")
		if text == "" {
			return nil, modules.Fault("wasm guest returned a fault with no text")
		}
		return nil, modules.Fault(text)
	}
	return nil, modules.Fault(fmt.Sprintf("wasm guest result starts with tag %d; want 0 (an output envelope) or 1 (a fault)", buf[0]))
}

// callFailed classifies the error of a call into the guest. A deadline or
// cancellation that stopped it is environmental; so is a failure of the
// host. Everything the guest did is a business fault, with the first
// forbidden call it made taking precedence (what followed may be its
// consequence), then proc_exit, then a trap. A sleep is not reported here:
// the Go runtime sleeps while it crashes.
func (s *moduleState) callFailed(ctx context.Context, inst *instance, fn string, err error) error {
	var exit *sys.ExitError // wazero's WithCloseOnContextDone stopped it
	if !inst.exited && errors.As(err, &exit) &&
		(exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled) {
		return s.stopped(ctx)
	}
	where := ""
	if fn != "aos_step" {
		where = " in " + fn
	}
	switch {
	case inst.violation != "":
		return modules.Fault(inst.violation)
	case inst.exited:
		return modules.Fault(fmt.Sprintf("wasm guest exited with code %d%s", inst.exitCode, where) + inst.printed())
	}
	msg := err.Error()
	if trap, ok := strings.CutPrefix(msg, "wasm error: "); ok {
		trap, _, _ = strings.Cut(trap, "\n")
		return modules.Fault("wasm guest trapped" + where + ": " + trap + inst.printed())
	}
	return &modules.EnvError{Module: s.name, Cause: "host", Err: fmt.Errorf("wasm %s: %w", fn, err)}
}

// stopped is the failure of a call that ctx's deadline or cancellation
// stopped.
func (s *moduleState) stopped(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		err = context.DeadlineExceeded
	}
	return &modules.EnvError{Module: s.name, Cause: "timeout", Err: fmt.Errorf("wasm guest stopped: %w", err)}
}

// printed is what the guest wrote during the call, for a fault's reason.
func (in *instance) printed() string {
	var b strings.Builder
	if t := in.stderr.String(); t != "" {
		b.WriteString("; stderr: " + t)
	}
	if t := in.stdout.String(); t != "" {
		b.WriteString("; stdout: " + t)
	}
	return b.String()
}
