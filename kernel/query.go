package kernel

import (
	"context"
	"fmt"
	"sort"

	"github.com/aos-kernel/aos/journal"

	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// InstanceCounts counts instances by status.
type InstanceCounts struct {
	Running   int
	Waiting   int
	Completed int
	Failed    int
	Parked    int // not failed, with events parked behind a module set aside
}

// Status is the world at a glance (`aosd status --json`).
type Status struct {
	// World is the world's identity (World.Identity).
	World         string
	ManifestHash  *schemas.Hash
	ManifestName  string
	JournalHeight uint64
	// JournalFirst is the lowest seq the journal holds: 1, unless
	// retention dropped the records before it (JournalHeight+1 once it
	// dropped them all).
	JournalFirst  uint64
	Quiescent     bool
	Instances     InstanceCounts
	Inflight      int
	QueuedEffects int
	Cells         map[string]int
	Limits        Limits
	// Parked is how many events are parked, for failed instances and for
	// those whose module is set aside (park.go).
	Parked uint64
	// Aside are the modules set aside, sorted by name, with the inputs
	// that wait for each (aside.go).
	Aside []ModuleInfo
	// Journaled counts the records of each kind this world made durable
	// since it was opened (what replay read is not counted): two readings
	// give rates. Every kind is present.
	Journaled map[journal.Kind]uint64
	// Pinned lists the older live manifests an apply --pin kept, in the
	// order applied, with how many instances are pinned to each (empty
	// when only the current manifest is live; pins.go).
	Pinned []PinnedManifest
}

// PinnedManifest is an older live manifest in Status.
type PinnedManifest struct {
	Hash      schemas.Hash
	Name      string
	Instances int
}

// Status reports the world's state after every request queued before it.
func (w *World) Status(ctx context.Context) (*Status, error) {
	var s Status
	err := w.do(ctx, func(st *state) {
		if st.man != nil {
			h := st.man.Hash
			s.ManifestHash, s.ManifestName = &h, st.man.Name
		}
		s.Cells = map[string]int{}
		for name, rt := range st.wfs {
			s.Cells[name] = rt.head.Len()
			s.Instances.Completed += rt.head.Len()
		}
		for _, in := range st.instances {
			st := in.status()
			switch st {
			case StatusRunning:
				s.Instances.Running++
			case StatusWaiting:
				s.Instances.Waiting++
			case StatusFailed:
				s.Instances.Failed++
			case StatusParked:
				s.Instances.Parked++
			}
			if st != StatusCompleted && in.hasCell(w.st) {
				s.Instances.Completed--
			}
			s.Parked += uint64(len(in.parked))
		}
		if len(st.aside) > 0 {
			for _, m := range st.modules() {
				if m.Aside {
					s.Aside = append(s.Aside, m)
				}
			}
		}
		for _, lm := range st.live {
			if lm == st.cur {
				continue
			}
			n := 0
			if st.pinned > 0 {
				for _, in := range st.instances {
					if in.pin == lm {
						n++
					}
				}
			}
			s.Pinned = append(s.Pinned, PinnedManifest{Hash: lm.m.Hash, Name: lm.m.Name, Instances: n})
		}
		s.Inflight = len(st.inflight)
		s.Limits = st.limits
		s.Quiescent = s.Instances.Running == 0 && s.Instances.Waiting == 0 && s.Inflight == 0 && s.QueuedEffects == 0
	})
	s.JournalHeight = w.journal.Height()
	s.World = w.identity
	s.JournalFirst = max(w.journal.First(), 1)
	s.Journaled = map[journal.Kind]uint64{}
	w.journaledMu.Lock()
	for _, k := range journal.Kinds() {
		s.Journaled[k] = w.journaled[k]
	}
	w.journaledMu.Unlock()
	if q, ok := w.cfg.Publisher.(QueueReporter); ok && err == nil {
		// Queued intents are also in flight, so quiescence is unchanged.
		s.QueuedEffects = q.Queued()
	}
	return &s, err
}

func (in *instance) hasCell(st *state) bool {
	rt := st.wfs[in.wf]
	if rt == nil {
		return false
	}
	_, ok, _ := rt.head.Lookup(in.key)
	return ok
}

// CellInfo is one row of a cell listing (see CellPage): a cell, or an
// instance not at rest that has no cell (zero StateHash and Size). Key is
// canonical CBOR (nil for an unkeyed workflow); the daemon renders rows as
// JSON.
type CellInfo struct {
	Key        []byte
	StateHash  schemas.Hash
	Size       uint64
	Status     string
	LastActive uint64 // logical ns of the cell's last write
	Reason     string
	// Pin is the older live manifest the instance steps under ("" on the
	// current one), and PinReason why one at rest stays there (pins.go).
	Pin       string
	PinReason string
}

// CellView is one cell with its instance. Key and State are canonical CBOR
// (State nil when there is no cell); the daemon renders them as JSON.
type CellView struct {
	Workflow  string
	Key       []byte
	Status    string
	Reason    string
	State     []byte
	StateHash *schemas.Hash
	Size      uint64
	Inflight  []string // intent hashes, sorted
	Exists    bool     // the cell exists (an instance not at rest may have none)
	// Parked is how many events are parked for the instance (failed, or
	// its module set aside); AsideModule names the module set aside that
	// holds it ("" when none).
	Parked      uint64
	AsideModule string
	// Pin is the older live manifest the instance steps under ("" on the
	// current one), and PinReason why one at rest stays there (pins.go).
	Pin       string
	PinReason string
}

// ErrNoCell reports a cell that does not exist.
var ErrNoCell = fmt.Errorf("kernel: no such cell")

// Cell shows one cell. key is canonical CBOR (nil for an unkeyed workflow).
func (w *World) Cell(ctx context.Context, workflow string, key []byte) (*CellView, error) {
	var v *CellView
	var qerr error
	err := w.do(ctx, func(st *state) {
		rt := st.wfs[workflow]
		if rt == nil {
			qerr = fmt.Errorf("%w: unknown workflow %q", ErrInvalid, workflow)
			return
		}
		state, ok, err := rt.head.Get(key)
		if err != nil {
			qerr = err
			return
		}
		in := st.instances[instanceID(workflow, key)]
		if !ok && in == nil {
			qerr = fmt.Errorf("%w: workflow %s key %s", ErrNoCell, workflow, keyText(key))
			return
		}
		v = &CellView{Workflow: workflow, Key: key, Status: StatusCompleted, Inflight: []string{}, Exists: ok}
		if ok {
			h := schemas.HashBytes(state)
			v.State, v.StateHash, v.Size = state, &h, uint64(len(state))
		}
		if a := st.held[workflow]; a != nil {
			v.AsideModule = a.name
		}
		if in != nil {
			v.Status, v.Reason, v.Parked = in.status(), in.reason, uint64(len(in.parked))
			v.Pin, v.PinReason = st.pinText(in), in.pinWhy
			for h := range in.inflight {
				v.Inflight = append(v.Inflight, h.String())
			}
			sort.Strings(v.Inflight)
		}
	})
	if err != nil {
		return nil, err
	}
	return v, qerr
}

// keyText renders a key in error messages as the daemon's JSON shapes show
// it.
func keyText(key []byte) string { return string(records.KeyJSON(key)) }
