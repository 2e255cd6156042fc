package host

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// syscallESRCH is what moving a process that has gone fails with.
const syscallESRCH = syscall.ESRCH

// delegated says whether systemd marked the cgroup at dir as delegated
// (Delegate=yes): systemd 251 and later set the trusted.delegate extended
// attribute on it (user.delegate too, from 252).
func delegated(dir string) bool {
	var b [8]byte
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, b[:]); err == nil && n > 0 && b[0] == '1' {
			return true
		}
	}
	return false
}
