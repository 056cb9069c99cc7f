package api

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// ManifestView is the manifest in force (GET /v1/manifest): its hash and
// name, the seq of the manifest record that applied it, and its defs as
// JSON, as declared (the journaled source; a file holding this array
// loads as the same manifest).
type ManifestView struct {
	Hash   schemas.Hash    `json:"hash"`
	Name   string          `json:"name"`
	Seq    uint64          `json:"seq"`
	Source json.RawMessage `json:"source"`
}

// Manifest implements Reader. It reads the manifest the world holds and
// the journal's kind index, not the loop, so it answers on a stopped world
// too.
func (l *Local) Manifest(ctx context.Context) (*ManifestView, error) {
	m := l.W.Manifest()
	if m == nil {
		return nil, AsError(kernel.ErrNoManifest, "manifest")
	}
	v := &ManifestView{Hash: m.Hash, Name: m.Name}
	log := l.W.Journal()
	err := log.Marks(journal.KindManifest, func(seq uint64) (bool, error) {
		return false, log.Read(seq, func(r journal.Record) (bool, error) {
			if r.Seq != seq || r.Kind != journal.KindManifest {
				return false, fmt.Errorf("the kind index names seq %d, the journal has a %s record at %d", seq, r.Kind, r.Seq)
			}
			rec, err := records.Decode(r)
			if err != nil {
				return false, err
			}
			if mr, ok := rec.(*records.ManifestRec); ok && mr.Hash == m.Hash {
				v.Seq = seq
			}
			return false, nil
		})
	})
	if err != nil {
		return nil, AsError(err, "manifest")
	}
	src, err := schemas.ToJSONValue(m.Source)
	if err != nil {
		return nil, AsError(fmt.Errorf("manifest %s: render its source: %w", m.Hash, err), "manifest")
	}
	defs := any([]any{})
	if top, ok := src.(map[string]any); ok && top["defs"] != nil {
		defs = top["defs"]
	}
	if v.Source, err = json.Marshal(defs); err != nil {
		return nil, AsError(err, "manifest")
	}
	return v, nil
}
