// Package journaltest is the contract every journal backend keeps, as tests
// a backend runs against itself: journaltest.Run(t, open). journal.Memory
// runs it in package journal, the Badger journal in the Badger package, so
// both are held to one set of assertions (gap-free appends, reads across
// frames bounded by the height, Wait, the kind index that Marks reads,
// First, and retention: DropBefore, its archive callback, ErrTruncated).
// It also gives backends' own tests the deterministic records they write
// and check (Rec and CheckRun; Mixed, whose kinds include the indexed
// ones, and CheckMixed, MarksOf, MixedMarks, FrameBytes, CheckTruncated,
// DropBefore).
//
// It imports only journal; it must not name a backend.
package journaltest
