package kernel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// Fault classes (records.FaultRec.Class).
const (
	// FaultBusiness is the workflow's own doing (a trap, a panic, malformed
	// output, a limit): replay re-runs the step and must reproduce it. It is
	// journaled with no class, as before classes existed.
	FaultBusiness = ""
	// FaultEnvironmental is the host's doing (a wall-clock limit, the host
	// out of resources): replay cannot reproduce it, so it adopts the
	// journaled record instead of running the step again.
	FaultEnvironmental = "environmental"
)

// boundModule is a module def bound to the code that runs it.
type boundModule struct {
	def    *manifest.ModuleDef
	native *modules.Builtin // builtin, or a native stand-in for a wasm artifact
	runner modules.Runner   // wasm, when no native stand-in is registered
}

func (b *boundModule) describe() string {
	rt := &b.def.Runtime
	switch {
	case rt.Kind == "builtin":
		return fmt.Sprintf("module %s (builtin %s, identity %q)", b.def.Name, rt.Builtin, rt.Identity)
	case b.native != nil:
		return fmt.Sprintf("module %s (wasm %s, run by its native build %s)", b.def.Name, rt.ArtifactHash, b.native.Name)
	default:
		return fmt.Sprintf("module %s (wasm %s)", b.def.Name, rt.ArtifactHash)
	}
}

// bindModules binds every module of m: a builtin to its registered Go code,
// whose declared identity must be the one the manifest pins; a wasm module to
// a registered native build of the same artifact (a builtin whose identity is
// the artifact hash), or else to its compiled artifact.
func (st *state) bindModules(ctx context.Context, m *manifest.Manifest) (map[string]*boundModule, error) {
	out := make(map[string]*boundModule, len(m.Modules))
	for _, n := range slices.Sorted(maps.Keys(m.Modules)) {
		def := m.Modules[n]
		b, err := st.w.bindModule(ctx, def)
		if err != nil {
			return nil, err
		}
		out[n] = b
	}
	return out, nil
}

func (w *World) bindModule(ctx context.Context, def *manifest.ModuleDef) (*boundModule, error) {
	rt := &def.Runtime
	switch rt.Kind {
	case "builtin":
		b, ok := w.cfg.Builtins.Get(rt.Builtin)
		if !ok {
			return nil, fmt.Errorf("module %s: builtin %q is not registered in this program (registered: %s)",
				def.Name, rt.Builtin, strings.Join(w.cfg.Builtins.Names(), ", "))
		}
		if b.Identity != rt.Identity {
			return nil, fmt.Errorf("module %s: the manifest pins builtin %s at identity %q, but this program registers identity %q; "+
				"apply a manifest naming the new identity (its hash changes with it)", def.Name, rt.Builtin, rt.Identity, b.Identity)
		}
		return &boundModule{def: def, native: b}, nil
	case "wasm":
		if b, ok := w.cfg.Builtins.ByIdentity(rt.ArtifactHash); ok {
			return &boundModule{def: def, native: b}, nil
		}
		if w.cfg.Wasm == nil {
			return nil, fmt.Errorf("module %s: wasm modules need a wasm engine and this world has none (kernel.Config.Wasm)", def.Name)
		}
		if rt.Bytes == nil {
			return nil, fmt.Errorf("module %s: wasm artifact %s (%s) was not loaded", def.Name, rt.Artifact, rt.ArtifactHash)
		}
		r, err := w.cfg.Wasm.Compile(ctx, def.Name, rt.ArtifactHash, rt.Bytes, rt.MemoryMiB())
		if err != nil {
			return nil, err // the engine's errors name the module
		}
		return &boundModule{def: def, runner: r}, nil
	}
	return nil, fmt.Errorf("module %s: runtime %q is not available in this kernel", def.Name, rt.Kind)
}

// closeModules releases the instances of modules no longer bound.
func closeModules(mods map[string]*boundModule) {
	for _, n := range slices.Sorted(maps.Keys(mods)) {
		if c, ok := mods[n].runner.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// maxFaultReason bounds a journaled fault reason: a guest chooses its own
// fault text, and the journal keeps it forever.
const maxFaultReason = 4096

// capReason cuts reason to maxFaultReason bytes on a UTF-8 boundary, saying
// how long it was.
func capReason(reason string) string {
	if len(reason) <= maxFaultReason {
		return reason
	}
	cut := maxFaultReason - 64
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes in all)", reason[:cut], len(reason))
}

// resetModules gives every wasm module a fresh instance: a journaled point
// (open, apply) that replay passes through in the same place.
func resetModules(mods map[string]*boundModule) {
	for _, n := range slices.Sorted(maps.Keys(mods)) {
		if r := mods[n].runner; r != nil {
			r.Reset()
		}
	}
}

// call runs one step of rt's module. A business fault comes back as text to
// journal; an environmental failure as env.
func (st *state) call(rt *wfRuntime, in *modules.Input) (out *modules.Output, fault string, env *modules.EnvError) {
	return st.callEntry(rt, rt.fn, rt.def.Impl.Entrypoint, in)
}

// callEntry is call for any entrypoint of rt's module: fn is its native
// code (nil: the runner runs entry).
func (st *state) callEntry(rt *wfRuntime, fn modules.StepFunc, entry string, in *modules.Input) (out *modules.Output, fault string, env *modules.EnvError) {
	if fn != nil {
		out, fault = callStep(fn, in)
		return out, fault, nil
	}
	ctx := context.Background()
	var fromInput bool
	if !st.replaying {
		// The instance first, under its own limit: the step's limits
		// start once it is ready (Config.InstantiateTimeout says why).
		// Replay instantiates inside Step, with no limit at all.
		if p, ok := rt.mod.runner.(modules.Preparer); ok {
			if fault, env := st.prepare(rt, p); fault != "" || env != nil {
				return nil, fault, env
			}
		}
		// Replay runs with no wall-clock limit: a step that finished live
		// finishes again, and one the limit stopped live is adopted from its
		// journaled environmental fault without running. The limit is
		// StepTimeout, or what is left of the input's InputTimeout.
		var d time.Duration
		if d, fromInput = st.stepLimit(); d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	o, err := rt.mod.runner.Step(ctx, entry, in)
	if err == nil {
		if o == nil {
			return nil, "step returned no output", nil
		}
		return o, "", nil
	}
	var f modules.Fault
	if errors.As(err, &f) {
		return nil, string(f), nil
	}
	var e *modules.EnvError
	if errors.As(err, &e) {
		if fromInput && e.Cause == "timeout" {
			e = &modules.EnvError{Module: e.Module, Cause: e.Cause, Err: fmt.Errorf("%w (what was left of input %d's wall-clock budget of %s)",
				e.Err, st.work.input, st.w.cfg.InputTimeout)}
		}
		return nil, "", e
	}
	// Anything else is the host's failure too: never judged as the workflow's.
	return nil, "", &modules.EnvError{Module: rt.mod.def.Name, Cause: "host", Err: err}
}

// prepare makes rt's module instance ready before a live step, under
// Config.InstantiateTimeout, and moves the input's wall-clock deadline by
// the time it took: building an instance is the host's work, not the
// input's. A fault (what the guest's _initialize did) is the step's
// business fault, as when Step instantiates inline in replay.
func (st *state) prepare(rt *wfRuntime, p modules.Preparer) (fault string, env *modules.EnvError) {
	ctx := context.Background()
	if d := st.w.cfg.InstantiateTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	t0 := time.Now()
	err := p.Prepare(ctx)
	if w := &st.work; !w.deadline.IsZero() {
		w.deadline = w.deadline.Add(time.Since(t0))
	}
	if err == nil {
		return "", nil
	}
	var f modules.Fault
	if errors.As(err, &f) {
		return string(f), nil
	}
	if errors.As(err, &env) {
		return "", env
	}
	return "", &modules.EnvError{Module: rt.mod.def.Name, Cause: "host", Err: err}
}

func callStep(fn modules.StepFunc, in *modules.Input) (out *modules.Output, fault string) {
	defer func() {
		if r := recover(); r != nil {
			// Only the panic value is journaled: a stack trace is not
			// deterministic across builds.
			out, fault = nil, fmt.Sprintf("step panicked: %v", r)
		}
	}()
	o, err := fn(in)
	if err != nil {
		var f modules.Fault
		if errors.As(err, &f) {
			return nil, string(f)
		}
		return nil, "step returned an error: " + err.Error()
	}
	if o == nil {
		return nil, "step returned no output"
	}
	return o, ""
}

// envReason is the journaled reason of an environmental fault.
func envReason(e *modules.EnvError) string {
	return fmt.Sprintf("stopped by the host (%s, environmental, not re-run on replay): %v", e.Cause, e.Err)
}

// artifactsOf lists the wasm artifacts m carries, by hash, sorted.
func artifactsOf(m *manifest.Manifest) (hashes []schemas.Hash, bytes [][]byte) {
	seen := map[schemas.Hash]bool{}
	for _, n := range slices.Sorted(maps.Keys(m.Modules)) {
		rt := &m.Modules[n].Runtime
		if rt.Kind != "wasm" || rt.Bytes == nil {
			continue
		}
		h := schemas.HashBytes(rt.Bytes)
		if seen[h] {
			continue
		}
		seen[h] = true
		hashes = append(hashes, h)
		bytes = append(bytes, rt.Bytes)
	}
	return hashes, bytes
}
