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

// Step handles com.example/NoteEvent@1: Created sets the title, Edited
// replaces the body and counts edits, Archived marks the note archived. An
// archived note ignores everything.
func Step(c *sdk.Ctx, st *State, ev sdk.Variant) (*State, error) {
	var n State
	if st != nil {
		n = *st
	}
	if n.Archived {
		return st, nil
	}
	switch ev.Tag {
	case "Created":
		var e Created
		if err := ev.As(&e); err != nil {
			return nil, err
		}
		n.Title = e.Title
	case "Edited":
		var e Edited
		if err := ev.As(&e); err != nil {
			return nil, err
		}
		n.Body = e.Body
		n.Edits++
	case "Archived":
		n.Archived = true
	default:
		return nil, fmt.Errorf("notes: unknown event arm %q", ev.Tag)
	}
	return &n, nil
}
