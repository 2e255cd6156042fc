package env

import (
	"os"

	"golang.org/x/sys/unix"
)

// awaitExit returns once the child pid has exited, without reaping it
// (the caller's cmd.Wait then does, at once). It waits on a pidfd in Go's
// network poller (pidfd_open(2): the descriptor polls readable when the
// process exits), so a session's program costs a parked goroutine while
// it runs, not an OS thread blocked in waitid(2) as cmd.Wait alone would:
// with 1,000 idle sessions, 1,000 threads and their stacks
// (sshgate's BenchmarkIdleSessions, threads/session).
//
// pid cannot have been reused: it is an unreaped child of this process.
// On any failure (a kernel before 5.10 lacks PIDFD_NONBLOCK) it returns
// at once and cmd.Wait blocks as before.
func awaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// RawConn.Read calls exited, and while it reports false waits for
	// the descriptor to poll readable, then calls it again. The check
	// comes after the poller's wait is armed, so an exit between the two
	// is not missed. WNOWAIT leaves the child for cmd.Wait to reap.
	_ = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		return err != nil || info.Signo != 0
	})
}
