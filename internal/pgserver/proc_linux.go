package pgserver

import "syscall"

// sysProcAttr runs a child as cred (nil: as us) in its own process group, so a
// Ctrl-C at the terminal reaches only us and we shut postgres down in order.
// Pdeathsig asks for a fast shutdown should we die first, so the server
// cannot outlive us. (The kernel sends it when the thread that started the
// child exits; the Go runtime keeps its threads unless a goroutine exits
// while locked to one, which this package never does.)
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGINT}
}
