package kernel

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// A world's identity binds what it issues to it: every intent's hash
// includes it (records.IntentID.World), and every receipt and frame names
// the world it is signed for (receipts.Receipt.World), so two worlds with
// the same manifest and inputs (a copy, one world per tenant) issue
// different intent hashes, and a receipt signed for one is refused by the
// other even where hashes coincide (intents opened before identities
// existed).
//
// The identity is made once, from the Entropy port, when a world is
// created: Open journals it as the world record (records.WorldRec), which
// is then the journal's first record. A world created before identities
// existed gets one at its first Open by this code, journaled after what
// replay read: its old intents keep the hashes they were opened with, and
// the intents after the record bind the identity. Replay adopts the
// record and never makes one, snapshots carry it (snapshot.State.World),
// and nothing changes it afterwards, so replay, a snapshot, an export and a
// restored copy all reproduce the same intent hashes.

// ErrWrongWorld: a receipt or frame signed for another world, or for no
// world (the first layout, receipts.DomainV1), which any world would take.
// Nothing is recorded.
var ErrWrongWorld = errors.New("kernel: receipt or frame for another world")

// newWorldID makes an identity from the entropy port.
func newWorldID(e Entropy) string {
	var b [records.WorldIDBytes]byte
	e.Fill(b[:])
	return records.WorldIDPrefix + hex.EncodeToString(b[:])
}

// Identity is the world's identity: "world:" and 32 lower-case hex digits.
// Executors sign it into every receipt and frame (the claim answers it).
// It is empty only for a scratch world over a journal written before
// identities existed.
func (w *World) Identity() string { return w.identity }

// adoptWorld takes the identity a world record journals.
func (st *state) adoptWorld(id string) error {
	if st.world != "" {
		return fmt.Errorf("a second world record: the world's identity is %s already, this record says %s", st.world, id)
	}
	if err := records.CheckWorldID(id); err != nil {
		return err
	}
	st.world = id
	return nil
}

// openIdentity gives the world its identity once replay is done: the one
// the journal (or the snapshot) holds, or, for a world that has none (new,
// or created before identities existed), a new one, journaled and durable
// before Open returns. A scratch world journals none: it takes the live
// world's, in memory, if its copy of the journal has none.
func (st *state) openIdentity() error {
	w := st.w
	if st.world == "" && w.cfg.noIdentity {
		st.world = w.cfg.borrowedWorld
	}
	if st.world != "" || w.cfg.noIdentity {
		w.identity = st.world
		return nil
	}
	id := newWorldID(w.cfg.Entropy)
	if err := st.adoptWorld(id); err != nil {
		return fmt.Errorf("kernel: the world's new identity: %w", err)
	}
	st.emit(journal.KindWorld, schemas.MustMarshal(&records.WorldRec{ID: id}))
	recs := st.out
	st.out, st.outBytes = nil, 0
	if err := w.journal.Append(recs); err != nil {
		return fmt.Errorf("%w: journal the world's identity at seq %d: %w", ErrStorage, recs[0].Seq, err)
	}
	w.countJournaled(recs)
	w.identity = id
	return nil
}

// checkWorld refuses a receipt or frame that is not signed for this world.
func (w *World) checkWorld(what string, intent schemas.Hash, world string) error {
	switch {
	case world == w.identity && world != "":
		return nil
	case world == "":
		return fmt.Errorf("%w: %s for intent %s names no world: it is in the first layout (aos/%s/v1), which any world would take; "+
			"this world is %s: update the executor to sign the world the claim answers into its %ss, under aos/%s/v2 "+
			"(docs/executor-protocol.md); nothing was journaled", ErrWrongWorld, what, intent, what, w.identity, what, what)
	default:
		return fmt.Errorf("%w: %s for intent %s is signed for %s, but this world is %s; nothing was journaled",
			ErrWrongWorld, what, intent, world, w.identity)
	}
}
