package snapshot

import (
	"github.com/aos-kernel/aos/cas"
)

// Progress receives a collection's progress; either function may be nil.
type Progress struct {
	// Marked is Mark's progress: objects proven present so far.
	Marked func(marked int)
	// Swept is Sweep's: unmarked objects handled so far, of total.
	Swept func(done, total int)
}

// Collect finishes collection c: it marks what roots reach in store and
// sweeps the rest, or, if marking fails, aborts c and returns the error
// with nothing deleted. c ends either way.
//
// The caller began c (cas.Guard.Begin) and took roots after that, on the
// writers' own goroutine; see cas.Guard for what the roots must cover. The
// writers may keep writing through the Guard while Collect runs.
func Collect(c *cas.Collection, store cas.Store, roots []Pins, progress Progress) (cas.GCStats, error) {
	marked, err := Mark(store, roots, progress.Marked)
	if err != nil {
		c.Abort()
		return cas.GCStats{}, err
	}
	return c.Sweep(marked.Has, progress.Swept)
}
