package kernel

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aos-kernel/aos/journal"
)

// A cell's past states (GET /v1/timeline). The states a step produced stay
// in the CAS only while something keeps them (a kept snapshot, the live
// head); most never reach it at all, as a cell stepped twice between two
// snapshots is written once. CellHistory recomputes them the one way the
// kernel knows to: it opens a scratch world (ScratchStores: every write in
// memory) from the newest usable snapshot taken before the first step
// wanted, and replays the journal with the live code, exactly as opening a
// world does, while a tap copies out what each step of the one cell
// started from and produced. Replay checks every record it produces
// against the journal byte for byte, step records (and so their state
// hashes) included, so a state it hands back is the state the journal
// names, or the call fails with the ReplayError. Replay ends at the first
// input after the last step wanted, so it costs the records from that
// snapshot's checkpoint to there, whatever the cell's history before.

// HistoryQuery says which steps of which cell CellHistory recomputes.
type HistoryQuery struct {
	Workflow string
	Key      []byte // canonical CBOR; nil for an unkeyed workflow
	// From and To are the seqs of the first and last step records wanted:
	// replay starts from a snapshot journaled before From (or from
	// genesis) and ends at the first input after To.
	From, To uint64
}

// HistoryStep is one step of the cell, as replay recomputed it.
type HistoryStep struct {
	Seq   uint64 // the step record
	Prev  []byte // the state the step started from; nil: none
	State []byte // the state it left; nil: none (deleted or never made)
}

// HistoryResult is what CellHistory recomputed.
type HistoryResult struct {
	// Steps are the cell's steps with From <= Seq <= To, in journal order.
	Steps  []HistoryStep
	Opened OpenInfo // where the replay started and how many records it read
}

// historyTap is a scratch world's view into its own replay.
type historyTap struct {
	wf       string
	key      []byte
	from, to uint64
	steps    []HistoryStep
}

func (h *historyTap) stepped(wf string, key []byte, seq uint64, prev, state []byte) {
	if seq < h.from || seq > h.to || wf != h.wf || !bytes.Equal(key, h.key) {
		return
	}
	h.steps = append(h.steps, HistoryStep{Seq: seq, Prev: bytes.Clone(prev), State: bytes.Clone(state)})
}

// CellHistory recomputes the states of one cell's steps in [q.From, q.To]
// by replaying the journal of s in a scratch world opened with cfg (the
// configuration the live world runs with: its builtins and wasm cache).
// Nothing reaches s. It fails when no usable snapshot precedes From and
// the journal no longer starts at genesis (ErrTruncated), or when replay
// diverges (a ReplayError).
func CellHistory(ctx context.Context, s Stores, cfg Config, q HistoryQuery) (*HistoryResult, error) {
	if q.From == 0 || q.To < q.From {
		return nil, fmt.Errorf("%w: history of steps %d..%d: want 1 <= from <= to", ErrInvalid, q.From, q.To)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sc := ScratchStores(s, s.Journal.Height())
	sc.Journal = &beforeLog{scratchLog: sc.Journal.(*scratchLog), before: q.From}
	tap := &historyTap{wf: q.Workflow, key: q.Key, from: q.From, to: q.To}
	w, err := open(sc, scratchConfig(cfg), tap, nil)
	if err != nil {
		return nil, err
	}
	res := &HistoryResult{Steps: tap.steps, Opened: w.OpenInfo()}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return res, nil
}

// beforeLog is a scratch journal whose snapshots are those journaled
// before a seq: a history replay must start before the first step it
// recomputes.
type beforeLog struct {
	*scratchLog
	before uint64
}

func (l *beforeLog) Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error {
	return l.scratchLog.Marks(k, func(seq uint64) (bool, error) {
		if k == journal.KindSnapshot && seq >= l.before {
			return true, nil
		}
		return fn(seq)
	})
}
