package snapshot

import (
	"fmt"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Loading a snapshot is the one way into a world's state that skips the
// journal before it: the kernel's open starts from the newest usable one,
// and the journal check of a journal retention cut from the oldest. Both
// find it here, through the journal's kind index (never a scan of the
// journal), and take it only once it is checked: a snapshot is usable when
// its record's checkpoint is a checkpoint record before it that the journal
// still holds, and its object reads, decodes (Decode's checks) and is the
// state after that checkpoint. One that is not is passed over for the next,
// and the reason kept.

// Journal is what finding a snapshot reads: records by seq, and the seqs of
// the snapshot records from the kind index, newest first (kernel.Log, the
// backends' journals and journal.Memory have both).
type Journal interface {
	journal.Reader
	Marks(k journal.Kind, fn func(seq uint64) (bool, error)) error
}

// Objects reads an object of the world's CAS (cas.Store's Get).
type Objects func(schemas.Hash) ([]byte, error)

// Order says which usable snapshot Find takes.
type Order int

const (
	// Newest takes the usable snapshot with the newest record: the least
	// journal left to replay (opening a world).
	Newest Order = iota
	// Oldest takes the usable snapshot with the oldest record: the most
	// journal left to check (journalcheck).
	Oldest
)

// Found is what Find found.
type Found struct {
	// Seq is the snapshot record of the snapshot taken; 0 when none was
	// usable.
	Seq uint64
	// State is its state, checked; nil when none was usable.
	State *State
	// Skipped says, for each snapshot passed over before it (or for every
	// snapshot, when none was usable), why it could not be used:
	// "snapshot record N: why".
	Skipped []string
}

// Find takes the first usable snapshot in order, through the journal's kind
// index. Snapshots that cannot be used are skipped (Found.Skipped); an
// error is the kind index's or a read's other than a snapshot's own
// (Marks failing).
func Find(j Journal, get Objects, order Order) (Found, error) {
	var f Found
	try := func(seq uint64) bool {
		s, err := Load(j, get, seq)
		if err != nil {
			f.Skipped = append(f.Skipped, fmt.Sprintf("snapshot record %d: %v", seq, err))
			return true
		}
		f.Seq, f.State = seq, s
		return false
	}
	if order == Newest {
		err := j.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) { return try(seq), nil })
		return f, err
	}
	var seqs []uint64 // newest first
	if err := j.Marks(journal.KindSnapshot, func(seq uint64) (bool, error) {
		seqs = append(seqs, seq)
		return true, nil
	}); err != nil {
		return f, err
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		if !try(seqs[i]) {
			break
		}
	}
	return f, nil
}

// Load reads the snapshot the snapshot record at seq names and checks that
// it can be used: its checkpoint is a checkpoint record before it that the
// journal still holds, and its object reads, decodes and is the state after
// that checkpoint.
func Load(j journal.Reader, get Objects, seq uint64) (*State, error) {
	sr, err := ReadRecord(j, seq)
	if err != nil {
		return nil, err
	}
	cp, err := journal.ReadAt(j, sr.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("its checkpoint %d: %w", sr.Checkpoint, err)
	}
	if cp.Kind != journal.KindCheckpoint || sr.Checkpoint >= seq {
		return nil, fmt.Errorf("its checkpoint %d is a %s record", sr.Checkpoint, cp.Kind)
	}
	s, err := LoadObject(get, sr.Object)
	if err != nil {
		return nil, err
	}
	if s.Height != sr.Checkpoint {
		return nil, fmt.Errorf("object %s is the state after seq %d, the record says %d", sr.Object, s.Height, sr.Checkpoint)
	}
	return s, nil
}

// ReadRecord reads the snapshot record at seq (the kind index names it).
func ReadRecord(j journal.Reader, seq uint64) (*records.SnapshotRec, error) {
	r, err := journal.ReadAt(j, seq)
	if err != nil {
		return nil, err
	}
	if r.Kind != journal.KindSnapshot {
		return nil, fmt.Errorf("the kind index names a %s record at seq %d", r.Kind, seq)
	}
	v, err := records.Decode(r)
	if err != nil {
		return nil, fmt.Errorf("snapshot record %d: %w", seq, err)
	}
	return v.(*records.SnapshotRec), nil
}

// LoadObject reads and decodes the snapshot object h, without the checks
// against its record Load makes.
func LoadObject(get Objects, h schemas.Hash) (*State, error) {
	data, err := get(h)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h, err)
	}
	s, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h, err)
	}
	return s, nil
}
