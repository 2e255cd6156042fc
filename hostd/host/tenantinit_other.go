//go:build !linux

package host

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
)

// errNotLinux is what tenant isolation says off Linux: hostd runs on
// Linux nodes only.
var errNotLinux = errors.New("tenant isolation needs Linux")

// Isolate is Linux only.
func (iso *Isolation) Isolate(*exec.Cmd, *syscall.Credential, string) error { return errNotLinux }

// RemoveIPC is Linux only.
func RemoveIPC(int) (int, error) { return 0, errNotLinux }

func removeFilesOn(context.Context, string, int, int) (int, error) { return 0, errNotLinux }

// syscallESRCH is what moving a process that has gone fails with.
const syscallESRCH = syscall.ESRCH

// delegated is Linux only.
func delegated(string) bool { return false }
