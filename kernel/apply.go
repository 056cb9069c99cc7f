package kernel

import (
	"context"
	"fmt"
	"sort"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
)

// Blocker is one reason the world is not quiescent.
type Blocker struct {
	Kind     string `json:"kind"` // "instance" or "intent"
	Workflow string `json:"workflow"`
	Key      []byte `json:"key,omitempty"`
	Status   string `json:"status,omitempty"`
	Intent   string `json:"intent,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// ApplyResult says what an apply did or would do.
type ApplyResult struct {
	Applied      bool             `json:"applied"`
	Unchanged    bool             `json:"unchanged,omitempty"`
	ManifestHash schemas.Hash     `json:"manifest_hash"`
	Previous     *schemas.Hash    `json:"previous_hash,omitempty"`
	Diff         manifest.Changes `json:"diff"`
	BlockedBy    []Blocker        `json:"blocked_by"`
	Seq          uint64           `json:"seq,omitempty"`
}

// Apply makes m the world's manifest if the world is quiescent. When it is
// not, the result lists the blockers and the error wraps ErrNotQuiescent;
// nothing changes. With dryRun nothing changes either way.
func (w *World) Apply(ctx context.Context, m *manifest.Manifest, dryRun bool) (*ApplyResult, error) {
	res, err := w.send(ctx, request{apply: m, dryRun: dryRun})
	return res.applied, err
}

func (st *state) apply(m *manifest.Manifest, dryRun bool) (*ApplyResult, error) {
	res := &ApplyResult{ManifestHash: m.Hash, Diff: manifest.Diff(st.man, m), BlockedBy: st.blockers()}
	if st.man != nil {
		h := st.man.Hash
		res.Previous = &h
	}
	if _, err := st.runtimes(m); err != nil {
		return res, err
	}
	if len(res.BlockedBy) > 0 {
		return res, fmt.Errorf("%w: %d blockers", ErrNotQuiescent, len(res.BlockedBy))
	}
	if st.man != nil && st.man.Hash == m.Hash {
		res.Unchanged = true
		return res, nil
	}
	if dryRun {
		return res, nil
	}
	res.Seq = st.installManifest(m)
	res.Applied = true
	return res, nil
}

// installManifest journals m and makes it current.
func (st *state) installManifest(m *manifest.Manifest) uint64 {
	wfs, err := st.runtimes(m)
	if err != nil {
		panic(fmt.Sprintf("kernel: install checked manifest: %v", err)) // apply checked it
	}
	seq := st.emit(journal.KindManifest, schemas.MustMarshal(&ManifestRec{Hash: m.Hash, Name: m.Name, Source: m.Source}))
	router, err := routing.New(m)
	if err != nil {
		panic(fmt.Sprintf("kernel: router for loaded manifest: %v", err))
	}
	st.man, st.router, st.wfs = m, router, wfs
	st.w.current.Store(&installed{m: m, r: router})
	return seq
}

// runtimes binds every workflow of m to its step function and cell head.
func (st *state) runtimes(m *manifest.Manifest) (map[string]*wfRuntime, error) {
	names := make([]string, 0, len(m.Workflows))
	for n := range m.Workflows {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make(map[string]*wfRuntime, len(names))
	for _, n := range names {
		def := m.Workflows[n]
		mod := m.Modules[def.Impl.Module]
		if mod == nil {
			return nil, fmt.Errorf("workflow %s: module %s is not in the manifest", n, def.Impl.Module)
		}
		if mod.Runtime.Kind != "builtin" {
			return nil, fmt.Errorf("workflow %s: module %s: runtime %q is not available in this kernel (builtin only)", n, mod.Name, mod.Runtime.Kind)
		}
		fn, ok := st.w.cfg.Builtins.Lookup(mod.Runtime.Builtin, def.Impl.Entrypoint)
		if !ok {
			return nil, fmt.Errorf("workflow %s: builtin module %q has no entrypoint %q registered in this binary (registered: %v)",
				n, mod.Runtime.Builtin, def.Impl.Entrypoint, st.w.cfg.Builtins.Names())
		}
		head := st.heads[n]
		if head == nil {
			h, err := cells.NewHead(st.w.cas, schemas.Hash{}, st.w.cfg.Cells)
			if err != nil {
				return nil, fmt.Errorf("workflow %s: cells: %w", n, err)
			}
			head = h
			st.heads[n] = h
		}
		out[n] = &wfRuntime{def: def, fn: fn, head: head, ctx: def.Context != "", keyed: def.Keyed()}
	}
	return out, nil
}

// blockers lists what stands between the world and quiescence, sorted.
func (st *state) blockers() []Blocker {
	var out []Blocker
	for _, in := range st.instances {
		if s := in.status(); s == StatusRunning || s == StatusWaiting {
			out = append(out, Blocker{Kind: "instance", Workflow: in.wf, Key: in.key, Status: s})
		}
	}
	for h, it := range st.inflight {
		out = append(out, Blocker{Kind: "intent", Workflow: it.OriginWorkflow, Key: it.OriginKey, Intent: h.String(), Effect: it.Effect})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Workflow != b.Workflow {
			return a.Workflow < b.Workflow
		}
		if string(a.Key) != string(b.Key) {
			return string(a.Key) < string(b.Key)
		}
		return a.Intent < b.Intent
	})
	return out
}
