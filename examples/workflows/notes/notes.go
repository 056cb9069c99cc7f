// Package notes is the example world examples/manifests/notes: one note per
// note_id, driven by a variant event routed whole.
package notes

import (
	"fmt"

	"github.com/aos-kernel/aos/sdk"
)

// Module is examples/notes; its one entrypoint, "step", runs
// com.example/note.step@1.
var Module = sdk.NewModule("examples/notes")

func init() { sdk.Workflow(Module, "step", Step) }

// State is com.example/NoteState@1.
type State struct {
	Title    string `cbor:"title"`
	Body     string `cbor:"body"`
	Edits    int64  `cbor:"edits"`
	Archived bool   `cbor:"archived"`
}

// Created is com.example/NoteCreated@1.
type Created struct {
	NoteID string `cbor:"note_id"`
	Title  string `cbor:"title"`
}

// Edited is com.example/NoteEdited@1.
type Edited struct {
	NoteID string `cbor:"note_id"`
	Body   string `cbor:"body"`
}

// Step handles com.example/NoteEvent@1. Created makes the note (title set,
// empty body, no edits); a Created for an existing note is ignored, so the
// first title wins. Edited replaces the body and counts the edit; Archived
// marks the note archived. Edited and Archived for a missing note are
// ignored (no cell is created), and an archived note ignores everything.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	if st != nil && st.Archived {
		return st, nil
	}
	switch ev.Tag {
	case "Created":
		if st != nil {
			return st, nil // duplicate create: the first one wins
		}
		var e Created
		if err := ev.As(&e); err != nil {
			return nil, err
		}
		return &State{Title: e.Title}, nil
	case "Edited":
		if st == nil {
			return nil, nil // nothing to edit: no cell is created
		}
		var e Edited
		if err := ev.As(&e); err != nil {
			return nil, err
		}
		n := *st
		n.Body = e.Body
		n.Edits++
		return &n, nil
	case "Archived":
		if st == nil {
			return nil, nil // nothing to archive: no cell is created
		}
		n := *st
		n.Archived = true
		return &n, nil
	default:
		return nil, fmt.Errorf("notes: unknown event arm %q", ev.Tag)
	}
}
