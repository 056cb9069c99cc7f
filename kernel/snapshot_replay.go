package kernel

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// replayCheckpoint passes a journaled checkpoint: every wasm module starts
// fresh, as it did live. With Config.VerifySnapshots the state after it is
// computed (every delta materialized) and kept until its snapshot record.
func (st *state) replayCheckpoint(reason string) error {
	for _, n := range slices.Sorted(maps.Keys(st.drains)) {
		if !st.installDrain(n) {
			return st.stopped
		}
	}
	seq := st.emitCheckpoint(reason)
	if !st.w.cfg.VerifySnapshots {
		st.drainAtCheckpoint()
		return nil
	}
	s, err := st.stateNow()
	if err != nil {
		return fmt.Errorf("replay at checkpoint %d: %w", seq, err)
	}
	if st.verifying == nil {
		st.verifying = map[uint64]*snapshot.State{}
	}
	st.verifying[seq] = s
	return nil
}

// drainAtCheckpoint writes each head's whole delta off the loop, as the
// live world's snapshot did at this checkpoint: one drain per head, run by
// its own goroutine and installed by maybeMaterialize once written (or at
// the next checkpoint). Without it a replay writes cells only when a delta
// outgrows MaterializeAt, in slices on the loop: the loop's single biggest
// cost in a replay from genesis, and less efficient (a slice of 4,096 cells
// rewrites about as many index leaves as a whole delta of 25,000). Where
// cells are written changes no record: replay's reads see the same cells.
func (st *state) drainAtCheckpoint() {
	for _, n := range slices.Sorted(maps.Keys(st.heads)) {
		h := st.heads[n]
		if dirty := h.Stats().Dirty; dirty > 0 {
			if dr := h.PrepareDrain(dirty); dr != nil {
				st.drains[n] = dr
				go dr.Run()
			}
		}
	}
}

// replaySnapshot passes a journaled snapshot record. With
// Config.VerifySnapshots, the snapshot replay computed at its checkpoint
// must be the journaled object, byte for byte; a snapshot of a checkpoint
// before this replay started (the one it was loaded from) is not compared.
func (st *state) replaySnapshot(seq uint64, sr *records.SnapshotRec) error {
	if !st.w.cfg.VerifySnapshots {
		return nil
	}
	s := st.verifying[sr.Checkpoint]
	if s == nil {
		return nil
	}
	delete(st.verifying, sr.Checkpoint)
	data, err := snapshot.Encode(s)
	if err != nil {
		return &ReplayError{Seq: seq, Kind: journal.KindSnapshot, Msg: "encode the replayed snapshot: " + err.Error()}
	}
	got := schemas.HashBytes(data)
	if got == sr.Object {
		st.w.verifiedSnapshots++
		return nil
	}
	msg := "the snapshot replay computes at checkpoint " + fmt.Sprint(sr.Checkpoint) + " is not the journaled one"
	if b, err := st.w.cas.Get(sr.Object); err != nil {
		msg += fmt.Sprintf(" (the journaled object cannot be read: %v)", err)
	} else if j, err := snapshot.Decode(b); err != nil {
		msg += fmt.Sprintf(" (the journaled object does not decode: %v)", err)
	} else {
		msg += "; first difference (journal vs replay): " + snapshot.Diff(j, s)
	}
	return &ReplayError{Seq: seq, Kind: journal.KindSnapshot, Want: sr.Object, Got: got, Msg: msg}
}

// stateNow materializes every head on the loop and captures the state at
// the current height. Replay and scratch worlds use it; the live world
// captures without pausing for cell writes (checkpoint).
func (st *state) stateNow() (*snapshot.State, error) {
	for _, n := range slices.Sorted(maps.Keys(st.drains)) {
		if !st.installDrain(n) {
			return nil, st.stopped
		}
	}
	s := st.captureTables()
	for _, n := range slices.Sorted(maps.Keys(st.heads)) {
		h := st.heads[n]
		if _, err := h.Materialize(); err != nil {
			st.stop("materialize cells of "+n, err)
			return nil, st.stopped
		}
		wf, err := workflowEntry(n, st.keyedHead(n), h.Index())
		if err != nil {
			return nil, err
		}
		s.Workflows = append(s.Workflows, *wf)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// State returns the world's state at its current height, in the form a
// snapshot holds it: what `aosd replay --verify` compares. It materializes
// every head on the loop, so the loop pauses for those cell writes (a
// snapshot does not: it writes them off the loop).
func (w *World) State(ctx context.Context) (*snapshot.State, error) {
	var s *snapshot.State
	var serr error
	if err := w.do(ctx, func(st *state) { s, serr = st.stateNow() }); err != nil {
		return nil, err
	}
	return s, serr
}

// VerifiedSnapshots is how many journaled snapshots replay recomputed and
// found byte-identical (Config.VerifySnapshots).
func (w *World) VerifiedSnapshots() int { return w.verifiedSnapshots }
