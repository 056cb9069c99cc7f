package kernel

// ReadAheadLockstep makes replay wait, before each record, until the
// read-ahead goroutine has handled it, so a test sees its effect whatever
// the scheduler does. It returns a function that undoes it.
func ReadAheadLockstep() (undo func()) {
	readAheadLockstep = true
	return func() { readAheadLockstep = false }
}

// ReadAheadOff stops replay from starting its read-ahead goroutine.
func ReadAheadOff() (undo func()) {
	readAheadOff = true
	return func() { readAheadOff = false }
}
