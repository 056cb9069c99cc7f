package kernel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/aos-kernel/aos/cells"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// Snapshots (DESIGN.md §9, docs/snapshots.md).
//
// A snapshot is taken in two journaled steps so the loop pauses only to
// copy its tables, never to write cells:
//
//  1. At an idle point (between loop requests every mailbox is drained),
//     the loop journals a checkpoint record, gives every wasm module a
//     fresh instance, captures its tables (instances, intents, fence,
//     idempotency, epochs, limits, manifest) and prepares one cells.Drain
//     per head holding that head's whole delta.
//  2. A goroutine runs the drains (writing dirty states and index nodes),
//     takes each head's root from its drain, writes the manifest source
//     and the snapshot object to the CAS, and hands back to the loop,
//     which installs the drains and journals the snapshot record naming
//     the object. The record is appended after the CAS writes returned, in
//     the same store and sync, so a durable snapshot record always names a
//     complete snapshot; a crash anywhere before it leaves the previous
//     snapshot the latest, and the checkpoint alone changes nothing.
//
// Meanwhile the world goes on: the drains leave the head serving reads and
// writes (cells.Drain), and what the loop changes after the checkpoint is
// not in the snapshot, which is the state after the checkpoint record.
//
// Opening loads the latest usable snapshot and replays only the records
// after its checkpoint. Replay passes checkpoints where the live world did
// and resets modules there too, so guests that keep globals compute the
// same outputs whichever way the world was opened.

// Errors callers branch on.
var (
	// ErrSnapshotBusy: a snapshot is already being written.
	ErrSnapshotBusy = errors.New("kernel: a snapshot is already in progress")
	// ErrTruncated: the journal no longer holds the records a replay needs.
	ErrTruncated = errors.New("kernel: journal truncated")
)

// SnapshotResult says what a snapshot did.
type SnapshotResult struct {
	Checkpoint uint64       // seq of the checkpoint record: the snapshot is the state after it
	Seq        uint64       // seq of the snapshot record
	Object     schemas.Hash // the snapshot object in the CAS
	Bytes      int          // its size
	Dirty      int          // dirty cells it materialized
	Cells      uint64       // cells in all workflows
	// Pause is the loop's time on the snapshot: copying its tables at the
	// checkpoint, then installing the written cells (cells.Head.Install)
	// before it journals the snapshot record.
	Pause    time.Duration
	Duration time.Duration // from the checkpoint until the snapshot record was durable
}

// snapJob is a snapshot between its checkpoint and its snapshot record.
type snapJob struct {
	checkpoint uint64
	state      *snapshot.State // tables captured at the checkpoint; Workflows filled by run
	heads      []snapHead
	source     []byte   // the manifest's Source, written with the object
	sources    [][]byte // the older live manifests' Sources likewise (pins.go)
	dirty      int
	started    time.Time
	pause      time.Duration

	object schemas.Hash
	bytes  int
	err    error // a storage failure writing it: the world stops

	written chan struct{} // closed once write returned (err set): holdTail waits for it
	done    chan struct{} // closed once the snapshot record is durable (or it failed)
	res     SnapshotResult
	fail    error
}

type snapHead struct {
	name  string
	keyed bool
	dr    *cells.Drain     // nil when the delta was empty
	ix    *cells.CellIndex // the index at the checkpoint when dr is nil
}

// Snapshot takes a snapshot now and returns once its record is durable.
// ErrSnapshotBusy when one is already being written.
func (w *World) Snapshot(ctx context.Context) (SnapshotResult, error) {
	var job *snapJob
	var serr error
	if err := w.do(ctx, func(st *state) { job, serr = st.checkpoint(records.CheckpointOperator) }); err != nil {
		return SnapshotResult{}, err
	}
	if serr != nil {
		return SnapshotResult{}, serr
	}
	select {
	case <-job.done:
		return job.res, job.fail
	case <-ctx.Done():
		return SnapshotResult{}, ctx.Err()
	}
}

// snapshotBlocker says why a snapshot cannot start now ("" when it can):
// the world is idle between requests, so only a snapshot still being
// written stands in the way.
func (st *state) snapshotBlocker() string {
	if st.snap != nil {
		return fmt.Sprintf("the snapshot of checkpoint %d is still being written", st.snap.checkpoint)
	}
	return ""
}

// checkpoint journals a checkpoint and starts writing its snapshot.
func (st *state) checkpoint(reason string) (*snapJob, error) {
	if b := st.snapshotBlocker(); b != "" {
		return nil, fmt.Errorf("%w: %s", ErrSnapshotBusy, b)
	}
	t0 := time.Now()
	// Slices already being written must land first: a head has one drain
	// at a time, and the snapshot's takes the rest of the delta.
	for _, n := range slices.Sorted(maps.Keys(st.drains)) {
		if !st.installDrain(n) {
			return nil, st.stopped
		}
	}
	seq := st.emitCheckpoint(reason)
	job := &snapJob{checkpoint: seq, started: t0, written: make(chan struct{}), done: make(chan struct{})}
	job.state = st.captureTables()
	if st.man != nil {
		job.source = st.man.Source
	}
	for _, lm := range st.live {
		if lm != st.cur {
			job.sources = append(job.sources, lm.m.Source)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(st.heads)) {
		h := st.heads[n]
		sh := snapHead{name: n, keyed: st.keyedHead(n)}
		dirty := h.Stats().Dirty
		if dirty > 0 {
			sh.dr = h.PrepareDrain(dirty)
		}
		if sh.dr == nil {
			sh.ix = h.Index()
		} else {
			st.drains[n] = sh.dr
			job.dirty += dirty
		}
		job.heads = append(job.heads, sh)
	}
	st.snap = job
	job.pause = time.Since(t0)
	st.w.snapWG.Add(1)
	go st.w.writeSnapshot(job)
	return job, nil
}

// emitCheckpoint journals a checkpoint and gives every wasm module a fresh
// instance, live and on replay alike.
func (st *state) emitCheckpoint(reason string) uint64 {
	seq := st.emit(journal.KindCheckpoint, schemas.MustMarshal(&records.CheckpointRec{Reason: reason}))
	for _, lm := range st.live {
		resetModules(lm.mods) // the current manifest's are st.mods
	}
	st.lastCheckpoint = seq
	return seq
}

// keyedHead says whether head n belongs to a keyed workflow; a workflow no
// longer in the manifest is treated as keyed (its state is not listed
// apart).
func (st *state) keyedHead(n string) bool {
	rt := st.wfs[n]
	return rt == nil || rt.keyed
}

// writeSnapshot is step 2, off the loop.
func (w *World) writeSnapshot(job *snapJob) {
	defer w.snapWG.Done()
	job.err = job.write(w)
	close(job.written)
	// Hand back to the loop, which journals the record (or stops the
	// world on a storage failure) and answers once that is durable.
	_, err := w.send(context.Background(), request{query: func(st *state) { st.finishSnapshot(job) }})
	if err == nil && job.fail == nil {
		job.res.Duration = time.Since(job.started)
		job.res.Pause = job.pause
		w.cfg.Observer.Snapshotted(job.res.Pause, job.res.Duration, job.res.Bytes)
	} else if job.fail == nil {
		job.fail = err
	}
	close(job.done)
}

// write runs the drains and writes the manifest source and the object.
func (job *snapJob) write(w *World) error {
	s := job.state
	for _, sh := range job.heads {
		ix := sh.ix
		if sh.dr != nil {
			sh.dr.Run()
			if err := sh.dr.Err(); err != nil {
				return fmt.Errorf("write the cells of %s: %w", sh.name, err)
			}
			ix = sh.dr.Index()
		}
		wf, err := workflowEntry(sh.name, sh.keyed, ix)
		if err != nil {
			return err
		}
		s.Workflows = append(s.Workflows, *wf)
	}
	if job.source != nil {
		if _, err := w.cas.Put(job.source); err != nil {
			return fmt.Errorf("write the manifest source: %w", err)
		}
	}
	for _, src := range job.sources {
		if _, err := w.cas.Put(src); err != nil {
			return fmt.Errorf("write the source of a live manifest: %w", err)
		}
	}
	data, err := snapshot.Encode(s)
	if err != nil {
		return fmt.Errorf("encode: %w", err) // a bug: captureTables built what Check refuses
	}
	h, err := w.cas.Put(data)
	if err != nil {
		return fmt.Errorf("write the snapshot object: %w", err)
	}
	job.object, job.bytes = h, len(data)
	return nil
}

// workflowEntry is a head's line in a snapshot. Every head is listed, an
// empty one with the zero root, so a reopened world has the same heads.
func workflowEntry(name string, keyed bool, ix *cells.CellIndex) (*snapshot.Workflow, error) {
	wf := &snapshot.Workflow{Name: name, Root: ix.Root(), Cells: uint64(ix.Len())}
	if !keyed && wf.Cells == 1 {
		e, ok, err := ix.Lookup(nil)
		if err != nil {
			return nil, fmt.Errorf("read the state of %s: %w", name, err)
		}
		if ok {
			h := e.StateHash
			wf.State = &h
		}
	}
	return wf, nil
}

// finishSnapshot is step 2's end, on the loop.
func (st *state) finishSnapshot(job *snapJob) {
	if st.snap != job {
		return
	}
	st.snap = nil
	t0 := time.Now()
	defer func() { job.pause += time.Since(t0) }()
	if job.err != nil {
		st.stop("snapshot of checkpoint "+fmt.Sprint(job.checkpoint), job.err)
		// Answered as every caller of a stopped world is (ErrStorage's
		// promise): ErrBroken, then the storage failure.
		job.fail = fmt.Errorf("%w: %w", ErrBroken, st.stopped)
		return
	}
	for _, sh := range job.heads {
		if sh.dr != nil && st.drains[sh.name] == sh.dr {
			if !st.installDrain(sh.name) {
				job.fail = st.stopped
				return
			}
		}
	}
	seq := st.emit(journal.KindSnapshot, schemas.MustMarshal(&records.SnapshotRec{Checkpoint: job.checkpoint, Object: job.object, Bytes: uint64(job.bytes)}))
	st.lastSnapshot = job.checkpoint
	var total uint64
	for _, wf := range job.state.Workflows {
		total += wf.Cells
	}
	job.res = SnapshotResult{Checkpoint: job.checkpoint, Seq: seq, Object: job.object, Bytes: job.bytes,
		Dirty: job.dirty, Cells: total}
}

// captureTables copies the loop's tables into a snapshot.State whose
// Workflows are left for the writer to fill.
func (st *state) captureTables() *snapshot.State {
	s := &snapshot.State{Version: snapshot.Version, Height: st.seq, Logical: st.logical, Limits: st.limits, World: st.world,
		Workflows: []snapshot.Workflow{}, Instances: []snapshot.Instance{}, Intents: []snapshot.Intent{},
		Settled: []snapshot.Settled{}, Idempotency: []snapshot.Idem{}}
	if m := st.man; m != nil {
		s.Manifest = snapManifest(m)
	}
	for _, lm := range st.live {
		if lm != st.cur {
			sm := snapManifest(lm.m)
			s.Live = append(s.Live, snapshot.LiveManifest{Hash: sm.Hash, Source: sm.Source, Artifacts: sm.Artifacts, Seq: lm.seq})
		}
	}
	for _, in := range st.instances {
		var si snapshot.Instance
		switch in.status() {
		case StatusFailed:
			f := in.fault
			si = snapshot.Instance{Workflow: in.wf, Key: in.key, Status: snapshot.StatusFailed,
				Fault: &snapshot.Fault{Seq: f.seq, Input: f.input, Class: f.class, Reason: in.reason, Skipped: f.skipped}}
			if d := f.retry; d != nil {
				sd := snapDelivery(d)
				si.Fault.Retry = &sd
			}
		case StatusWaiting:
			si = snapshot.Instance{Workflow: in.wf, Key: in.key, Status: snapshot.StatusWaiting}
		case StatusParked:
			si = snapshot.Instance{Workflow: in.wf, Key: in.key, Status: snapshot.StatusParked}
		case StatusCompleted:
			if in.pin == nil {
				continue // at rest
			}
			si = snapshot.Instance{Workflow: in.wf, Key: in.key, Status: snapshot.StatusPinned}
		default:
			continue // impossible at a checkpoint: running
		}
		if in.pin != nil {
			h := in.pin.m.Hash
			si.Pin, si.PinWhy = &h, in.pinWhy
		}
		for i := range in.parked {
			si.Parked = append(si.Parked, snapDelivery(&in.parked[i]))
		}
		s.Instances = append(s.Instances, si)
	}
	sort.Slice(s.Instances, func(i, j int) bool {
		a, b := &s.Instances[i], &s.Instances[j]
		if a.Workflow != b.Workflow {
			return a.Workflow < b.Workflow
		}
		return string(a.Key) < string(b.Key)
	})
	for h, it := range st.inflight {
		s.Intents = append(s.Intents, snapshot.Intent{Intent: *it, Frames: uint64(st.fence.frameCount(h)), LastFrame: st.frameSeq[h]})
	}
	sort.Slice(s.Intents, func(i, j int) bool { return string(s.Intents[i].Intent.Hash[:]) < string(s.Intents[j].Intent.Hash[:]) })
	f := &st.fence
	for _, h := range f.fifo[f.head:] {
		e := f.settled[h]
		s.Settled = append(s.Settled, snapshot.Settled{Intent: h, Effect: e.effect, Seq: e.seq, DropSeq: e.dropSeq, Receipt: e.receipt,
			Cancelled: e.cancelled})
	}
	t := &st.idem
	for _, k := range t.fifo[t.head:] {
		e := t.byKey[k]
		s.Idempotency = append(s.Idempotency, snapshot.Idem{Key: append([]byte(nil), k[:]...), Seq: e.seq, Logical: e.logical,
			Sum: append([]byte(nil), e.sum[:]...)})
	}
	for _, n := range slices.Sorted(maps.Keys(st.aside)) {
		a := st.aside[n]
		s.Aside = append(s.Aside, snapshot.Aside{Module: a.name, Hash: a.hash, Seq: a.seq, Reason: a.reason, Workflows: a.workflows})
	}
	se := &st.epochs
	s.Epochs = snapshot.Epochs{MaxRun: se.maxRun, Known: []snapshot.KnownSchema{}, Changes: []snapshot.Epoch{}}
	for _, n := range slices.Sorted(maps.Keys(se.known)) {
		k := se.known[n]
		s.Epochs.Known = append(s.Epochs.Known, snapshot.KnownSchema{Workflow: n, Schema: snapshot.SchemaID{Name: k.name, Hash: k.hash}})
	}
	for _, n := range slices.Sorted(maps.Keys(se.epochs)) {
		e := se.epochs[n]
		s.Epochs.Changes = append(s.Epochs.Changes, snapshot.Epoch{Workflow: n, At: e.at,
			From: snapshot.SchemaID{Name: e.from.name, Hash: e.from.hash}, To: snapshot.SchemaID{Name: e.to.name, Hash: e.to.hash}})
	}
	return s
}

// snapManifest names m in a snapshot: its hash, its source's, its artifacts.
func snapManifest(m *manifest.Manifest) *snapshot.Manifest {
	hs, _ := artifactsOf(m)
	sort.Slice(hs, func(i, j int) bool { return string(hs[i][:]) < string(hs[j][:]) })
	if hs == nil {
		hs = []schemas.Hash{}
	}
	return &snapshot.Manifest{Hash: m.Hash, Source: schemas.HashBytes(m.Source), Artifacts: hs}
}

// maybeCheckpoint takes a snapshot at the end of a loop turn once
// Config.SnapshotEvery records were journaled since the last checkpoint.
func (st *state) maybeCheckpoint() {
	every := st.w.cfg.SnapshotEvery
	if every <= 0 || st.replaying || st.stopped != nil || st.snap != nil || st.seq-st.lastCheckpoint < uint64(every) {
		return
	}
	if _, err := st.checkpoint(records.CheckpointRecords); err != nil && st.stopped == nil {
		st.w.cfg.Logger.Warn("automatic snapshot not taken", "err", err)
	}
}

// holdTail bounds what an open after a kill replays (Config.SnapshotMaxTail):
// at the end of a loop turn, once SnapshotMaxTail records were journaled
// since the checkpoint of the newest snapshot whose record is journaled and
// a snapshot is being written, the loop waits for that snapshot's writer
// and journals its record in this turn's batch. So no durable journal ever
// holds more than SnapshotMaxTail records, plus one turn's, after its
// newest snapshot's checkpoint, however slowly snapshots are written; a
// slow snapshot slows ingest instead (TailObserver hears when).
func (st *state) holdTail() {
	limit, job := st.w.cfg.SnapshotMaxTail, st.snap
	if limit <= 0 || job == nil || st.stopped != nil || st.seq-st.lastSnapshot < uint64(limit) {
		return
	}
	if o, ok := st.w.cfg.Observer.(TailObserver); ok {
		o.SnapshotHolding(st.seq-st.lastSnapshot, job.checkpoint)
	}
	<-job.written
	// The writer hands back to the loop afterwards too; finishSnapshot
	// then finds the job finished and does nothing.
	st.finishSnapshot(job)
}

// TailObserver is an Observer that also hears when the loop holds its turn
// for a snapshot being written (holdTail, Config.SnapshotMaxTail): tail is
// the records journaled since the newest journaled snapshot's checkpoint,
// checkpoint the checkpoint of the snapshot it waits for. It is called on
// the loop, before the wait.
type TailObserver interface {
	SnapshotHolding(tail, checkpoint uint64)
}

// snapshotTimer asks for a snapshot every interval, taken when anything
// but the last snapshot's own record was journaled since its checkpoint.
func (w *World) snapshotTimer(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stopTimer:
			return
		case <-t.C:
			_ = w.enqueue(context.Background(), request{query: func(st *state) {
				if st.snap != nil || st.stopped != nil || st.seq <= st.lastCheckpoint+1 {
					return
				}
				if _, err := st.checkpoint(records.CheckpointTime); err != nil && st.stopped == nil {
					st.w.cfg.Logger.Warn("automatic snapshot not taken", "err", err)
				}
			}})
		}
	}
}

// snapDelivery is a delivery as a snapshot holds it.
func snapDelivery(d *delivery) snapshot.Delivery {
	return snapshot.Delivery{Seq: d.seq, Schema: d.schema, Value: d.value, Stamp: *d.stamp, EventHash: d.eventHash, Depth: d.depth}
}

// fromSnapDelivery is a snapshot's delivery in the loop's form.
func fromSnapDelivery(d *snapshot.Delivery) delivery {
	stamp := d.Stamp
	return delivery{seq: d.Seq, schema: d.Schema, value: d.Value, stamp: &stamp, eventHash: d.EventHash, depth: d.Depth}
}
