package testutil

import "syscall"

// stripeMockProcAttr kills stripe-mock should the test binary die without
// running its cleanups (a panic, a timeout).
func stripeMockProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
