package journal

import (
	"errors"
	"fmt"
)

// Retention: a backend may drop the oldest whole frames of its journal
// (DropBefore), optionally handing each to an archive first. What every
// backend shares of it lives here so the rules are written once.

// DropStats says what one DropBefore removed.
type DropStats struct {
	Frames  int    // whole frames removed
	Records int    // records in them
	Bytes   int64  // their encoded size (EncodeFrame form)
	First   uint64 // First() after the drop
}

// CheckDropBefore refuses a DropBefore(before) on a journal of the given
// height when before is past the end: at most every record (before =
// height+1) can be dropped, never a seq that was not yet appended.
func CheckDropBefore(before, height uint64) error {
	if before > height+1 {
		return fmt.Errorf("journal: drop before seq %d: the journal ends at seq %d, so before can be at most %d", before, height, height+1)
	}
	return nil
}

// TruncatedError is the error of a read from seq from below first, the
// lowest seq a journal still holds after retention: a *Truncation, which
// wraps ErrTruncated.
func TruncatedError(first, from uint64) error { return &Truncation{First: first, From: from} }

// Truncation is a read from seq From below First, the lowest seq the
// journal still holds: retention dropped the records before First. Callers
// that answer a person take First from it (errors.As) to say where the
// journal now starts.
type Truncation struct {
	First, From uint64
}

func (e *Truncation) Error() string {
	return fmt.Sprintf("%v: journal records before seq %d were dropped by retention (read from seq %d)", ErrTruncated, e.First, e.From)
}

// Unwrap makes a Truncation ErrTruncated.
func (e *Truncation) Unwrap() error { return ErrTruncated }

// Retained is a journal retention may have cut: it reads from a seq on
// and says the lowest seq it still holds.
type Retained interface {
	First() uint64
	Read(from uint64, fn func(Record) (bool, error)) error
}

// ReadRetained reads j from seq from on, or from First() when from is
// below it: a reader that wants whatever the journal holds from a point
// (a trace, a listing from the start) skips what retention dropped instead
// of failing. It returns the seq the read started at. A drop that moves
// First as the read starts (ErrTruncated before fn saw a record) is met by
// starting again at the new First. One that overtakes the read once fn has
// seen records (a backend reading in chunks may meet it) is returned as the
// error it is: records are never skipped in the middle. A reader that must
// not skip anything (a follower resuming at a seq) calls Read and meets
// ErrTruncated instead.
func ReadRetained(j Retained, from uint64, fn func(Record) (bool, error)) (uint64, error) {
	seen := false
	seeing := func(r Record) (bool, error) {
		seen = true
		return fn(r)
	}
	for {
		start := max(from, j.First(), 1)
		err := j.Read(start, seeing)
		var tr *Truncation
		if err == nil || seen || !errors.As(err, &tr) || tr.First <= start {
			return start, err
		}
		// Dropped meanwhile: the journal now starts later; read from there.
	}
}
