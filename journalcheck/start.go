package journalcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// A journal that retention cut (First() > 1) lacks the records that built
// the state its first records act on: the intents they settle, the
// instances they recover. The check then starts where the kernel's open
// would: from a snapshot, the state after its checkpoint, and checks the
// records after that checkpoint. It takes the oldest usable one, to check
// as much as possible; the records before its checkpoint are only counted
// out of the check (Report.From says where it began). A snapshot is usable
// when its checkpoint record is still in the journal and its object reads,
// decodes and is the state after that checkpoint. With none, the journal
// breaks RuleTruncated: no kernel could open it either.

// start is where a cut journal's check begins.
type start struct {
	state    *snapshot.State // nil: no usable snapshot
	snapshot uint64          // its snapshot record
	why      string          // when state is nil: why not
}

// errStop ends a read early.
var errStop = errors.New("stop")

// findStart scans a cut journal from first for the oldest usable snapshot.
func findStart(ctx context.Context, j Journal, first uint64, opt Options) (start, error) {
	if opt.Objects == nil {
		return start{}, fmt.Errorf("journalcheck: the journal starts at seq %d (retention dropped what came before); checking it needs the world's snapshot objects (Options.Objects)", first)
	}
	checkpoints := map[uint64]bool{}
	var skipped []string
	var found start
	n := 0
	err := j.Read(first, func(r journal.Record) (bool, error) {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		switch r.Kind {
		case journal.KindCheckpoint:
			checkpoints[r.Seq] = true
		case journal.KindSnapshot:
			s, err := usable(r, checkpoints, opt)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("snapshot record %d: %v", r.Seq, err))
				return true, nil
			}
			found = start{state: s, snapshot: r.Seq}
			return false, errStop
		}
		return true, nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return start{}, fmt.Errorf("journalcheck: look for a snapshot from seq %d: %w", first, err)
	}
	if found.state == nil {
		found.why = fmt.Sprintf("the journal starts at seq %d (retention dropped what came before) and holds no usable snapshot to start from, so nothing in it can be checked (nor can a world open on it)", first)
		if len(skipped) > 0 {
			found.why += ": " + strings.Join(skipped, "; ")
		}
	}
	return found, nil
}

// usable reads the snapshot a snapshot record names, if the journal still
// holds its checkpoint.
func usable(r journal.Record, checkpoints map[uint64]bool, opt Options) (*snapshot.State, error) {
	v, err := records.Decode(r)
	if err != nil {
		return nil, err
	}
	sr := v.(*records.SnapshotRec)
	if !checkpoints[sr.Checkpoint] {
		return nil, fmt.Errorf("its checkpoint %d is not a checkpoint record the journal holds", sr.Checkpoint)
	}
	data, err := opt.Objects(sr.Object)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", sr.Object, err)
	}
	s, err := snapshot.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", sr.Object, err)
	}
	if s.Height != sr.Checkpoint {
		return nil, fmt.Errorf("object %s is the state after seq %d, the record says %d", sr.Object, s.Height, sr.Checkpoint)
	}
	return s, nil
}

// seed makes the model the snapshot's state: the world as it was after
// the snapshot's checkpoint, idle.
func (c *checker) seed(s *snapshot.State) {
	c.prev = s.Height
	c.logical = s.Logical
	c.world = s.World
	if s.Manifest != nil {
		c.hasManifest, c.manifest = true, s.Manifest.Hash
	}
	c.lastCheckpoint = s.Height
	c.limits(&s.Limits)
	for _, a := range s.Aside {
		c.aside[a.Module] = a.Workflows
		for _, wf := range a.Workflows {
			c.held[wf] = a.Module
		}
	}
	for i := range s.Instances {
		si := &s.Instances[i]
		if si.Fault == nil && len(si.Parked) == 0 {
			continue // waiting: its intents bring it in
		}
		in := c.instance(si.Workflow, si.Key)
		for _, d := range si.Parked {
			stamp := d.Stamp
			in.parked = append(in.parked, delivery{seq: d.Seq, kind: journal.KindEvent, stamp: &stamp, depth: d.Depth})
		}
		if si.Fault == nil {
			continue
		}
		f := &failure{fault: si.Fault.Seq, input: si.Fault.Input, skipped: si.Fault.Skipped}
		if d := si.Fault.Retry; d != nil {
			stamp := d.Stamp
			f.retry = &delivery{seq: d.Seq, stamp: &stamp, depth: d.Depth}
		}
		in.failed = f
	}
	for i := range s.Intents {
		it := &s.Intents[i]
		in := c.instance(it.Intent.OriginWorkflow, it.Intent.OriginKey)
		if in.intents == nil {
			in.intents = map[schemas.Hash]struct{}{}
		}
		in.intents[it.Intent.Hash] = struct{}{}
		c.pending[it.Intent.Hash] = &intent{id: in.id, effect: it.Intent.Effect, lastFrame: it.LastFrame}
	}
	for _, st := range s.Settled {
		c.settle(st.Intent, st.Seq, st.Receipt)
	}
}
