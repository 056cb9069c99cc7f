package journalcheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/journal"
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
// decodes and is the state after that checkpoint: the kernel's open finds
// and checks it the same way (snapshot.Find), through the journal's kind
// index. With none, the journal breaks RuleTruncated: no kernel could open
// it either.

// start is where a cut journal's check begins.
type start struct {
	state    *snapshot.State // nil: no usable snapshot
	snapshot uint64          // its snapshot record
	why      string          // when state is nil: why not
}

// findStart finds the oldest usable snapshot of a journal cut before first.
func findStart(ctx context.Context, j Journal, first uint64, opt Options) (start, error) {
	if opt.Objects == nil {
		return start{}, fmt.Errorf("journalcheck: the journal starts at seq %d (retention dropped what came before); checking it needs the world's snapshot objects (Options.Objects)", first)
	}
	if err := ctx.Err(); err != nil {
		return start{}, err
	}
	f, err := snapshot.Find(j, opt.Objects, snapshot.Oldest)
	if err != nil {
		return start{}, fmt.Errorf("journalcheck: look for a snapshot from seq %d: %w", first, err)
	}
	if f.State == nil {
		why := fmt.Sprintf("the journal starts at seq %d (retention dropped what came before) and holds no usable snapshot to start from, so nothing in it can be checked (nor can a world open on it)", first)
		if len(f.Skipped) > 0 {
			why += ": " + strings.Join(f.Skipped, "; ")
		}
		return start{why: why}, nil
	}
	return start{state: f.State, snapshot: f.Seq}, nil
}

// seed makes the model the snapshot's state: the world as it was after
// the snapshot's checkpoint, idle.
func (c *checker) seed(s *snapshot.State) {
	c.prev = s.Height
	c.logical = s.Logical
	c.world = s.World
	if s.Manifest != nil {
		c.hasManifest, c.manifest = true, s.Manifest.Hash
		c.live = map[schemas.Hash]bool{s.Manifest.Hash: true}
		for _, lm := range s.Live { // the older live manifests (nil: none)
			c.live[lm.Hash] = true
		}
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
		if st.Cancelled {
			c.settled[st.Intent] = settled{seq: st.Seq, cancelled: true}
		}
	}
}
