package journal

import "errors"

// Errors callers branch on. Every backend returns them, so the kernel and
// the tests can tell a refused append from a broken store whatever holds the
// frames.
var (
	// ErrGap reports an Append whose records do not continue the journal
	// exactly: first seq not Height()+1, or seqs not consecutive.
	ErrGap = errors.New("journal: records do not continue the sequence")
	// ErrCorrupt reports a stored frame that does not decode or whose
	// sequence numbers disagree with its key or its neighbours.
	ErrCorrupt = errors.New("journal: corrupt frame")
	// ErrFailed is returned by every Append after one whose commit or fsync
	// failed: what reached the disk is then unknown, so the journal refuses
	// to continue until it is reopened.
	ErrFailed = errors.New("journal: an earlier append failed; reopen the journal")
	// ErrTruncated reports a read from a seq below First: retention
	// (DropBefore) removed those records, so they cannot be read back from
	// this journal, only from an archive of them if one was kept.
	ErrTruncated = errors.New("journal: truncated")
	// ErrArchive reports an archive file (ReadArchive) that is not one, is
	// cut short, or whose frames do not follow each other.
	ErrArchive = errors.New("journal: bad archive")
)
