package kernel

import (
	"context"
	"fmt"

	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// VerifyRun is one scratch replay of a verification.
type VerifyRun struct {
	From     string   // "genesis" or "snapshot"
	Opened   OpenInfo // where it started and how many records it replayed
	Verified int      // journaled snapshots it recomputed byte for byte (genesis only)
	State    schemas.Hash
	// Diff names the first difference from the live state; Err says why
	// the replay could not reach it (a ReplayError names the record,
	// workflow, key and both hashes). Both empty: it matched.
	Diff string
	Err  string
}

// VerifyReport is what `aosd replay --verify` prints.
type VerifyReport struct {
	Height uint64
	Live   schemas.Hash // hash of the live state's encoding
	Runs   []VerifyRun
	OK     bool
}

// VerifyOptions choose the runs of a verification.
type VerifyOptions struct {
	// SnapshotOnly runs only the replay from the latest snapshot (`aosd
	// replay` without --verify): it checks that the latest snapshot and the
	// tail after it reach the live state, not that the snapshot itself is
	// what the journal before it computes.
	SnapshotOnly bool
}

// Verify replays the journal up to live.Height into two scratch worlds, one
// from genesis (recomputing every journaled snapshot on the way) and one
// from the latest snapshot at or below that height, and compares the state
// each reaches with live (World.State of the world that wrote the journal).
// The scratch worlds write only to memory (ScratchStores); cfg is the live
// world's configuration (its builtins and wasm engine run the replays).
func Verify(ctx context.Context, s Stores, cfg Config, live *snapshot.State) (VerifyReport, error) {
	return VerifyWith(ctx, s, cfg, live, VerifyOptions{})
}

// VerifyWith is Verify with the runs opt chooses. A genesis run over a
// journal that retention has cut ends with ErrTruncated's message in its
// Err; the run from the snapshot does not need the cut records.
func VerifyWith(ctx context.Context, s Stores, cfg Config, live *snapshot.State, opt VerifyOptions) (VerifyReport, error) {
	liveBytes, err := snapshot.Encode(live)
	if err != nil {
		return VerifyReport{}, err
	}
	rep := VerifyReport{Height: live.Height, Live: schemas.HashBytes(liveBytes), OK: true}
	froms := []bool{true, false}
	if opt.SnapshotOnly {
		froms = []bool{false}
	}
	for _, genesis := range froms {
		run := VerifyRun{From: "snapshot"}
		if genesis {
			run.From = "genesis"
		}
		c := scratchConfig(cfg)
		c.FromGenesis, c.VerifySnapshots = genesis, genesis
		if c.Progress != nil {
			label := "verify from " + run.From
			p := cfg.Progress
			c.Progress = func(_ string, total uint64) ProgressBar { return p(label, total) }
		}
		run.State, run.Diff, run.Err = verifyRun(ctx, ScratchStores(s, live.Height), c, live, &run)
		if run.Diff != "" || run.Err != "" {
			rep.OK = false
		}
		rep.Runs = append(rep.Runs, run)
	}
	return rep, nil
}

func verifyRun(ctx context.Context, s Stores, cfg Config, live *snapshot.State, run *VerifyRun) (schemas.Hash, string, string) {
	w, err := Open(s, cfg)
	if err != nil {
		return schemas.Hash{}, "", err.Error()
	}
	defer w.Close()
	run.Opened, run.Verified = w.OpenInfo(), w.VerifiedSnapshots()
	got, err := w.State(ctx)
	if err != nil {
		return schemas.Hash{}, "", err.Error()
	}
	b, err := snapshot.Encode(got)
	if err != nil {
		return schemas.Hash{}, "", err.Error()
	}
	if d := snapshot.Diff(live, got); d != "" {
		return schemas.HashBytes(b), fmt.Sprintf("live vs replay from %s: %s", run.From, d), ""
	}
	return schemas.HashBytes(b), "", ""
}
