package journal

import "fmt"

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
// lowest seq a journal still holds after retention. It wraps ErrTruncated.
func TruncatedError(first, from uint64) error {
	return fmt.Errorf("%w: journal records before seq %d were dropped by retention (read from seq %d)", ErrTruncated, first, from)
}
