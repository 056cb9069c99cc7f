package kernel

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// State-schema changes (docs/manifest.md "Changing a state schema",
// docs/DECISIONS.md). An apply that changes a workflow's state schema does
// not touch its cells: it stays O(1) in their number. Instead the workflow
// gets a schema epoch, a logical time no later than any cell write made
// before the apply and earlier than every delivery after it; a cell whose
// LastActive is at or before the epoch was written under an older schema, and
// its state is validated against the current one before its first step under
// the new code. A state that does not validate fails the instance with a
// journaled business fault instead of reaching the module.

// stateSchema identifies the state schema of a workflow: its name and the
// hash of its definition together with every schema it refers to.
type stateSchema struct {
	name string
	hash schemas.Hash
}

func (s stateSchema) String() string { return s.name + " (" + s.hash.String() + ")" }

// schemaEpoch is the last state-schema change of one workflow.
type schemaEpoch struct {
	at       uint64 // cells with LastActive <= at were written before it
	from, to stateSchema
}

// schemaEpochs is the loop's record of state schemas. Rebuilt by replay:
// every field follows from the journal's manifest records and steps.
type schemaEpochs struct {
	// known is the state schema each workflow's cells were last written
	// under, kept after the workflow leaves the manifest (its cells stay).
	known map[string]stateSchema
	// epochs holds, per workflow, its last state-schema change; absent for
	// a workflow whose schema never changed (its steps pay nothing).
	epochs map[string]*schemaEpoch
	// maxRun is the highest logical time a step has run at. A cell's
	// LastActive is the logical time of the step that wrote it, so no cell
	// written so far is later than maxRun. (A stream frame's stamp does not
	// advance st.logical, so st.logical alone does not bound it.)
	maxRun uint64
	// checked counts state validations, for tests.
	checked uint64
	// lastM and lastS memoize stateSchemasOf for the manifest being applied.
	lastM *manifest.Manifest
	lastS map[string]stateSchema
}

// stateSchemasOf is the state schema of each workflow of m.
func (se *schemaEpochs) stateSchemasOf(m *manifest.Manifest) map[string]stateSchema {
	if se.lastM != m {
		se.lastS = make(map[string]stateSchema, len(m.Workflows))
		for n, def := range m.Workflows {
			se.lastS[n] = stateSchemaOf(m, def.State)
		}
		se.lastM = m
	}
	return se.lastS
}

// newStateChange is the records.StateChangeRec an apply of m journals.
func (st *state) newStateChange(m *manifest.Manifest) *records.StateChangeRec {
	rec := &records.StateChangeRec{Workflows: st.changedStateSchemas(m)}
	if len(rec.Workflows) > 0 {
		rec.Epoch = max(st.logical, st.epochs.maxRun)
	}
	return rec
}

// replayStateChange is the records.StateChangeRec replay journals for m, given the
// journaled one: nil when the journal has none (it predates the check), else
// the workflows recomputed (a different list is a divergence the record
// comparison reports) with the journal's epoch. The epoch is adopted, not
// recomputed: a step the host stopped live ran at its logical time but is
// not run again by replay.
func (st *state) replayStateChange(m *manifest.Manifest, journaled *records.StateChangeRec) *records.StateChangeRec {
	if journaled == nil {
		return nil
	}
	return &records.StateChangeRec{Workflows: st.changedStateSchemas(m), Epoch: journaled.Epoch}
}

// changedStateSchemas lists, sorted and never nil, the workflows of m whose
// cells were written under a state schema other than the one m gives them.
// A workflow new to the world has no cells and is not listed.
func (st *state) changedStateSchemas(m *manifest.Manifest) []string {
	out := []string{}
	now := st.epochs.stateSchemasOf(m)
	for _, n := range slices.Sorted(maps.Keys(m.Workflows)) {
		old, ok := st.epochs.known[n]
		if ok && old != now[n] {
			out = append(out, n)
		}
	}
	return out
}

// installStateChange starts the epochs sc records (none when sc is nil: a
// journal from before the check) and notes the state schema m gives each of
// its workflows.
func (st *state) installStateChange(m *manifest.Manifest, sc *records.StateChangeRec) {
	se := &st.epochs
	if se.known == nil {
		se.known, se.epochs = map[string]stateSchema{}, map[string]*schemaEpoch{}
	}
	now := se.stateSchemasOf(m)
	if sc != nil {
		for _, n := range sc.Workflows {
			se.epochs[n] = &schemaEpoch{at: sc.Epoch, from: se.known[n], to: now[n]}
		}
	}
	for n, s := range now {
		se.known[n] = s
	}
	se.lastM, se.lastS = nil, nil
}

// readState reads the state a delivery d to in steps from. If the cell was
// written before the workflow's state schema last changed, the state must
// validate against the current schema; fault says why it does not, and the
// step must not run. err is a cell store failure.
//
// An instance pinned to an older manifest steps under it (pins.go): its
// state was written under that manifest's schema, and nothing is checked.
func (st *state) readState(lm *liveManifest, rt *wfRuntime, in *instance, d *delivery) (prev []byte, exists bool, fault string, err error) {
	if d.stamp.LogicalNs > st.epochs.maxRun {
		st.epochs.maxRun = d.stamp.LogicalNs
	}
	prev, exists, err = rt.head.Get(in.key)
	ep := st.epochs.epochs[in.wf]
	if err != nil || ep == nil || !exists || lm != st.cur {
		return prev, exists, "", err
	}
	e, ok, err := rt.head.Lookup(in.key)
	if err != nil || !ok || e.LastActive > ep.at {
		return prev, exists, "", err // after the change: written under this schema
	}
	st.epochs.checked++
	if verr := st.man.Registry.Validate(rt.def.State, prev); verr != nil {
		fault = fmt.Sprintf("workflow %s key %s: the cell was last written at logical time %d, "+
			"before the apply at logical time %d changed the state schema from %s to %s, "+
			"and its state does not validate against %s: %v; "+
			"reset the cell or apply a state schema that accepts it",
			in.wf, keyText(in.key), e.LastActive, ep.at, ep.from, ep.to, ep.to.name, verr)
	}
	return prev, exists, fault, nil
}

// stateSchemaOf identifies schema name in m by a hash over the definitions
// of name and of every schema it refers to ($ref and variant arms, built-in
// ones included): a referenced def that changes changes what validates.
func stateSchemaOf(m *manifest.Manifest, name string) stateSchema {
	hashes := map[string]schemas.Hash{}
	for _, d := range m.Defs {
		if d.Kind == manifest.KindSchema {
			hashes[d.Name] = d.Hash
		}
	}
	var sys map[string][]byte
	seen := map[string]bool{name: true}
	queue := []string{name}
	add := func(ref string) {
		ref, _, _ = strings.Cut(ref, "#")
		if ref != "" && !seen[ref] {
			seen[ref] = true
			queue = append(queue, ref)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		var doc []byte
		if def := m.Schemas[n]; def != nil {
			for _, a := range def.Variant {
				add(a.Schema)
			}
			doc = def.Schema
		} else if schemas.IsSysName(n) {
			if sys == nil {
				sys = schemas.SysSchemaJSON()
			}
			doc = sys[n]
		}
		if len(doc) > 0 {
			if v, err := schemas.DecodeJSON(doc); err == nil {
				manifest.WalkRefs(v, add)
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf []byte
	for _, n := range names {
		h := hashes[n]
		buf = append(append(append(buf, n...), 0), h[:]...)
	}
	return stateSchema{name: name, hash: schemas.HashBytes(buf)}
}
