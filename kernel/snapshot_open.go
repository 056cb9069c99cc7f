package kernel

import (
	"fmt"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/routing"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// OpenInfo says how Open rebuilt the world.
type OpenInfo struct {
	// Snapshot is the seq of the snapshot record the world was loaded
	// from; 0 when it replayed from genesis.
	Snapshot uint64
	// Checkpoint is that snapshot's checkpoint: replay started after it.
	Checkpoint uint64
	// Replayed is how many records replay went through.
	Replayed uint64
	// Skipped lists the newer snapshots that could not be used, and why.
	Skipped []string
}

// OpenInfo reports how the world was opened.
func (w *World) OpenInfo() OpenInfo { return w.openInfo }

// loadSnapshot finds the newest usable snapshot (snapshot.Find: through the
// kind index, each checked against its record and checkpoint) and says in
// info which one it took and why it passed over newer ones.
func (st *state) loadSnapshot(info *OpenInfo) (*snapshot.State, error) {
	f, err := snapshot.Find(st.w.journal, st.w.cas.Get, snapshot.Newest)
	for _, why := range f.Skipped {
		st.w.cfg.Logger.Warn("snapshot not usable; trying an older one", "why", why)
	}
	info.Skipped = append(info.Skipped, f.Skipped...)
	if f.State != nil {
		info.Snapshot, info.Checkpoint = f.Seq, f.State.Height
	}
	return f.State, err
}

// restoreManifest rebuilds a manifest a snapshot names, with its router and
// runtimes (its modules fresh, as at the checkpoint).
func (st *state) restoreManifest(sm snapshot.Manifest) (*liveManifest, error) {
	src, err := st.w.cas.Get(sm.Source)
	if err != nil {
		return nil, fmt.Errorf("manifest source: %v", err)
	}
	m, err := manifest.FromSource(src, st.artifact)
	if err != nil {
		return nil, fmt.Errorf("reload manifest: %v", err)
	}
	if m.Hash != sm.Hash {
		return nil, fmt.Errorf("manifest source %s rebuilds manifest %s, the snapshot says %s", sm.Source, m.Hash, sm.Hash)
	}
	wfs, mods, err := st.runtimes(m)
	if err != nil {
		return nil, err
	}
	router, err := routing.New(m)
	if err != nil {
		closeModules(mods)
		return nil, fmt.Errorf("router: %v", err)
	}
	resetModules(mods)
	return &liveManifest{m: m, router: router, wfs: wfs, mods: mods, text: m.Hash.String()}, nil
}

// restore loads a snapshot's state into an empty loop state. Module
// instances start fresh, as the live world's did at the checkpoint.
func (st *state) restore(s *snapshot.State) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("kernel: restore the snapshot of checkpoint %d: %s", s.Height, fmt.Sprintf(format, a...))
	}
	st.seq, st.logical, st.lastCheckpoint, st.lastSnapshot = s.Height, s.Logical, s.Height, s.Height
	st.setLimits(s.Limits)
	if s.World != "" {
		if err := st.adoptWorld(s.World); err != nil {
			return bad("%v", err)
		}
	}
	for _, wf := range s.Workflows {
		h, err := cells.NewHead(st.w.cas, wf.Root, st.w.cfg.Cells)
		if err != nil {
			return bad("workflow %s: %v", wf.Name, err)
		}
		if uint64(h.Index().Len()) != wf.Cells {
			return bad("workflow %s: index %s holds %d cells, the snapshot says %d", wf.Name, wf.Root, h.Index().Len(), wf.Cells)
		}
		st.addHead(wf.Name, h)
	}
	for i := range s.Live {
		sl := &s.Live[i]
		lm, err := st.restoreManifest(snapshot.Manifest{Hash: sl.Hash, Source: sl.Source, Artifacts: sl.Artifacts})
		if err != nil {
			return bad("live manifest %s: %v", sl.Hash, err)
		}
		lm.seq = sl.Seq
		st.live = append(st.live, lm)
	}
	if sm := s.Manifest; sm != nil {
		lm, err := st.restoreManifest(*sm)
		if err != nil {
			return bad("%v", err)
		}
		st.adoptRuntimes(lm.wfs, lm.mods)
		st.man, st.router, st.manText = lm.m, lm.router, lm.text
		st.cur = lm
		st.live = append(st.live, lm)
		// The snapshot does not name the record that applied it (a world
		// with no pins keeps its snapshot bytes): the journal's index of
		// manifest records does, the newest at or before the checkpoint.
		if err := st.w.journal.Marks(journal.KindManifest, func(seq uint64) (bool, error) {
			if seq <= s.Height {
				lm.seq = seq
				return false, nil
			}
			return true, nil
		}); err != nil {
			return bad("find the manifest record: %v", err)
		}
		st.w.current.Store(&installed{m: lm.m, r: lm.router})
	}
	for _, wf := range s.Workflows {
		if wf.State == nil {
			continue
		}
		e, ok, err := st.heads[wf.Name].Lookup(nil)
		if err != nil || !ok || e.StateHash != *wf.State {
			return bad("workflow %s: its unkeyed state is not %s in index %s (err %v)", wf.Name, *wf.State, wf.Root, err)
		}
	}
	for i := range s.Aside {
		a := &s.Aside[i]
		st.hold(&asideModule{name: a.Module, hash: a.Hash, seq: a.Seq, reason: a.Reason, workflows: a.Workflows})
	}
	for i := range s.Instances {
		si := &s.Instances[i]
		in := st.instance(si.Workflow, si.Key)
		for j := range si.Parked {
			in.parked = append(in.parked, fromSnapDelivery(&si.Parked[j]))
		}
		if si.Pin != nil {
			lm := st.liveByHash(*si.Pin)
			if lm == nil || lm == st.cur {
				return bad("instance of %s key %x is pinned to %s, which is not an older live manifest", si.Workflow, si.Key, *si.Pin)
			}
			st.pinTo(in, lm, si.PinWhy)
		}
		if si.Status == snapshot.StatusParked && st.held[in.wf] == nil {
			return bad("instance of %s key %x is parked, but no module set aside holds its workflow", si.Workflow, si.Key)
		}
		if si.Status != snapshot.StatusFailed {
			continue
		}
		f := si.Fault
		in.failed, in.reason = true, f.Reason
		in.fault = &failure{seq: f.Seq, input: f.Input, class: f.Class, skipped: f.Skipped}
		if d := f.Retry; d != nil {
			r := fromSnapDelivery(d)
			in.fault.retry = &r
		}
		st.failed.insert(in)
	}
	for i := range s.Intents {
		it := s.Intents[i].Intent
		in := st.instances[instanceID(it.OriginWorkflow, it.OriginKey)]
		if in == nil || in.failed {
			return bad("intent %s: its origin is not a waiting instance", it.Hash)
		}
		if in.inflight == nil {
			in.inflight = map[schemas.Hash]struct{}{}
		}
		in.inflight[it.Hash] = struct{}{}
		st.inflight[it.Hash] = &it
		if n := s.Intents[i].LastFrame; n > 0 {
			st.frameSeq[it.Hash] = n
		}
		for range s.Intents[i].Frames {
			st.fence.noteFrame(it.Hash)
		}
	}
	for _, e := range s.Settled {
		st.fence.noteSettled(e.Intent, settledIntent{effect: e.Effect, seq: e.Seq, dropSeq: e.DropSeq, receipt: e.Receipt,
			cancelled: e.Cancelled}, st.limits.MaxSettledIntents)
	}
	t := &st.idem
	t.byKey = make(map[idemID]idemEntry, len(s.Idempotency))
	t.fifo = make([]idemID, 0, len(s.Idempotency))
	for _, e := range s.Idempotency {
		var k idemID
		var sum idemID
		copy(k[:], e.Key)
		copy(sum[:], e.Sum)
		t.byKey[k] = idemEntry{seq: e.Seq, logical: e.Logical, sum: sum}
		t.fifo = append(t.fifo, k)
	}
	se := &st.epochs
	se.maxRun = s.Epochs.MaxRun
	se.known, se.epochs = map[string]stateSchema{}, map[string]*schemaEpoch{}
	for _, k := range s.Epochs.Known {
		se.known[k.Workflow] = stateSchema{name: k.Schema.Name, hash: k.Schema.Hash}
	}
	for _, e := range s.Epochs.Changes {
		se.epochs[e.Workflow] = &schemaEpoch{at: e.At, from: stateSchema{name: e.From.Name, hash: e.From.Hash},
			to: stateSchema{name: e.To.Name, hash: e.To.Hash}}
	}
	return nil
}
