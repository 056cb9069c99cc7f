package journal

import "fmt"

// Reader reads a journal by range: every backend's journal, Memory, and the
// kernel's port have it.
type Reader interface {
	Read(from uint64, fn func(Record) (bool, error)) error
}

// ReadAt reads the one record at seq, as those that follow the kind index
// or a record's reference to another do (a snapshot's checkpoint, a step's
// input). A seq the journal does not hold is ErrCorrupt; one retention
// dropped is ErrTruncated, as Read says.
func ReadAt(j Reader, seq uint64) (Record, error) {
	var out Record
	found := false
	err := j.Read(seq, func(r Record) (bool, error) {
		out, found = r, r.Seq == seq
		return false, nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no record at seq %d", ErrCorrupt, seq)
	}
	return out, err
}
