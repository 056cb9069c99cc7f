package snapshot

import (
	"github.com/aos-kernel/aos/schemas"
)

// Pins is what one snapshot keeps reachable in the CAS.
type Pins struct {
	// Indexes are CellIndex roots: mark them with the cells node walk
	// (their nodes and the states their leaves name).
	Indexes []schemas.Hash
	// Objects are plain objects: the manifest's Source and its wasm
	// artifacts.
	Objects []schemas.Hash
}

// Pins lists the CAS objects s refers to (the snapshot object itself is
// its caller's to pin).
func (s *State) Pins() Pins {
	var p Pins
	for _, w := range s.Workflows {
		if !w.Root.IsZero() {
			p.Indexes = append(p.Indexes, w.Root)
		}
	}
	if m := s.Manifest; m != nil {
		p.Objects = append(p.Objects, m.Source)
		p.Objects = append(p.Objects, m.Artifacts...)
	}
	return p
}
