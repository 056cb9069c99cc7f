package kernel

import (
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// State migrations (docs/upgrades.md "Migrating state", DECISIONS.md
// "A declared state migration entrypoint").
//
// A defworkflow may declare "migrate": {"entrypoint", "from"}: an
// entrypoint of its module that takes an old state as its event (of the
// first "from" schema the state validates against; no state, no context)
// and returns the new state, and nothing else. It runs when a cell moves
// onto the manifest with a state the workflow's state schema does not
// accept:
//
//   - at rest (tryMove): the move is journaled as a move record (Since
//     "rest", Migrated the old state's hash, StateHash the new one's), and
//     the new state written, in the same loop turn;
//   - by an upgrade of a waiting cell: the check requires the new code's
//     state after each step to equal the migration of the journaled state
//     after that step, from the migration of the state it started from
//     (the migration commutes with the steps), and the move record carries
//     both hashes as above.
//
// Replay runs the migration of every move record that has Migrated again
// and must reach StateHash, or it diverges. A migration that faults (or
// returns a state the schema refuses, or emits anything) changes nothing
// and journals nothing: the cell stays pinned and pin_reason says why.
// Replay reaches the same reason by running it again (the migration is
// pure), and a journaled move record is the only thing that moves a cell
// through a migration in replay. An environmental failure (a timeout, the
// host out of memory) is never journaled either: the cell stays pinned
// with a reason that does not depend on the host, and is tried again
// whenever it is at rest on an older manifest again (its next input, the
// next apply --pin).

// migrationPendingWhy is the pin reason of a cell whose migration could not
// be completed on this host. Replay, which never moves a cell through a
// migration without its journaled record, reaches the same words.
func migrationPendingWhy(rt *wfRuntime) string {
	return fmt.Sprintf("its state needs the migration %s of workflow %s, which did not complete (not journaled; it is tried again at the cell's next input and at the next apply --pin)",
		rt.def.Migrate.Entrypoint, rt.def.Name)
}

// migrateState is state as workflow rt of lm takes it: the state itself
// when rt's state schema accepts it (or there is none), else the output of
// rt's declared migration, which must validate against that schema. from
// is the schema the migration took ("" when it did not run). A fault says
// why the state cannot be taken (no migration, a migration fault, an
// invalid result); env is the host failing the migration.
func (st *state) migrateState(lm *liveManifest, rt *wfRuntime, key, state []byte) (out []byte, from, fault string, env *modules.EnvError) {
	if state == nil {
		return nil, "", "", nil
	}
	reg := lm.m.Registry
	verr := reg.Validate(rt.def.State, state)
	if verr == nil {
		return state, "", "", nil
	}
	mg := rt.def.Migrate
	if mg == nil {
		return nil, "", fmt.Sprintf("its state does not validate against %s of manifest %s (%s), and workflow %s declares no migration: %v",
			rt.def.State, lm.m.Name, lm.text, rt.def.Name, verr), nil
	}
	for _, s := range mg.From {
		if reg.Validate(s, state) == nil {
			from = s
			break
		}
	}
	if from == "" {
		return nil, "", fmt.Sprintf("its state does not validate against %s of manifest %s (%s) (%v), nor against any schema the migration %s takes (%s)",
			rt.def.State, lm.m.Name, lm.text, verr, mg.Entrypoint, strings.Join(mg.From, ", ")), nil
	}
	o, fault, env := st.callEntry(rt, rt.migrate, mg.Entrypoint, &modules.Input{Version: 1, Event: modules.EventIn{Schema: from, Value: state, Key: key}})
	what := fmt.Sprintf("the migration %s of workflow %s (manifest %s, from %s)", mg.Entrypoint, rt.def.Name, lm.m.Name, from)
	switch {
	case env != nil:
		return nil, from, "", env
	case fault != "":
		return nil, from, what + " failed: " + capReason(fault), nil
	case len(o.DomainEvents) > 0 || len(o.Effects) > 0 || len(o.Ann) > 0:
		return nil, from, fmt.Sprintf("%s emitted %d domain events, %d effects and %d bytes of annotations: a migration returns a state and nothing else",
			what, len(o.DomainEvents), len(o.Effects), len(o.Ann)), nil
	case o.State == nil:
		return nil, from, what + " returned no state", nil
	}
	if err := reg.Validate(rt.def.State, o.State); err != nil {
		return nil, from, fmt.Sprintf("%s returned a state that does not validate against %s: %v", what, rt.def.State, err), nil
	}
	return o.State, from, "", nil
}

// moveMigrating moves a pinned instance at rest whose state the current
// state schema refuses through the current workflow's migration, journaled
// as a move record. It reports whether in is still pinned (pinWhy says
// why). Replay only re-runs the migration for the reason: the journaled
// move record, driven after it, moves the cell (replayMove).
func (st *state) moveMigrating(in *instance, rt *wfRuntime, state []byte) bool {
	out, _, fault, env := st.migrateState(st.cur, rt, in.key, state)
	switch {
	case fault != "":
		in.pinWhy = fault
		return true
	case env != nil:
		st.w.cfg.Logger.Warn("state migration stopped by the host; the cell stays pinned", "workflow", in.wf, "key", keyText(in.key), "err", envReason(env))
		in.pinWhy = migrationPendingWhy(rt)
		return true
	case st.replaying:
		in.pinWhy = migrationPendingWhy(rt)
		return true
	}
	old, now := schemas.HashBytes(state), schemas.HashBytes(out)
	rec := &records.MoveRec{Workflow: in.wf, Key: in.key, From: in.pin.m.Hash, To: st.cur.m.Hash, Inputs: []uint64{}, Since: "rest",
		StateHash: &now, Migrated: &old}
	st.emit(journal.KindMove, schemas.MustMarshal(rec))
	if err := rt.head.PutHashed(in.key, out, now, st.logical); err != nil {
		st.stop("cell store write for "+in.wf, err)
		return true
	}
	st.pinTo(in, nil, "")
	return false
}

// migrateForMove is move's half for a record with Migrated: the cell's
// state must be the one the migration was run on, and running it again
// must give the state the record names. It returns the state to write.
func (st *state) migrateForMove(rt *wfRuntime, key []byte, state []byte, exists bool, rec *records.MoveRec) ([]byte, error) {
	if !exists {
		return nil, fmt.Errorf("the move migrates state %s, but the cell has none", rec.Migrated)
	}
	if h := schemas.HashBytes(state); h != *rec.Migrated {
		return nil, fmt.Errorf("the move migrates state %s, but the cell's state is %s", rec.Migrated, h)
	}
	out, _, fault, env := st.migrateState(st.cur, rt, key, state)
	switch {
	case env != nil:
		return nil, fmt.Errorf("the migration could not be run (environmental; reopen to retry): %v", env)
	case fault != "":
		return nil, fmt.Errorf("the migration failed: %s", fault)
	}
	got := schemas.HashBytes(out)
	if rec.StateHash == nil || got != *rec.StateHash {
		return nil, fmt.Errorf("the migration gave state %s, the move names %s", got, hashText(rec.StateHash))
	}
	return out, nil
}
