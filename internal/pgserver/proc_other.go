//go:build !linux

package pgserver

import "syscall"

// sysProcAttr runs a child as cred (nil: as us) in its own process group, so a
// Ctrl-C at the terminal reaches only us and we shut postgres down in order.
// Only Linux can tie the child's life to ours (Pdeathsig); elsewhere a server
// left behind by a crash is found through its postmaster.pid on the next Start.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
