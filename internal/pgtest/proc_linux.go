package pgtest

import "syscall"

// procAttr runs a server binary with cred (nil: as the current user) and,
// on Linux, gives it a parent-death signal: SIGQUIT, the postmaster's
// immediate shutdown, so a test binary that dies takes its server along.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
}
