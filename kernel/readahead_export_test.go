package kernel

// ReadAheadLockstep makes replay wait, before each record, until the
// prefetcher has handled it (one prefetcher, which drops no batch), so a
// test sees its effect whatever the scheduler does. It returns a function
// that undoes it.
func ReadAheadLockstep() (undo func()) {
	readAheadLockstep = true
	return func() { readAheadLockstep = false }
}

// ReadAheadOff stops replay from starting its reader and prefetchers: the
// loop reads and decodes the journal itself.
func ReadAheadOff() (undo func()) {
	readAheadOff = true
	return func() { readAheadOff = false }
}
