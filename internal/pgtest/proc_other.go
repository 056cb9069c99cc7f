//go:build !linux

package pgtest

import "syscall"

// procAttr runs a server binary with cred (nil: as the current user).
// Outside Linux there is no parent-death signal: a test binary that dies
// leaves its server running until someone stops it.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
