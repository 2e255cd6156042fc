package tasks

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Rootless podman keeps the user namespace and mount namespace it made
// for the user alive with a pause process (podman-system-migrate(1)),
// made on the user's first podman command: its mount namespace is a copy
// of the node's mounts then, so a volume mounted at the time stays
// mounted in it after every container is gone. podman itself ends it
// with SIGKILL (podman system migrate) and makes a new one at its next
// command (docs/decisions/0066-volume-mount-propagation.md).

// pauseComm is the name podman gives its pause process (comm, proc(5)).
const pauseComm = "podman pause"

// endUserPause ends the pause processes of uid when they are all that
// holds the volume: every holder namespace has only processes of uid
// named pauseComm (a container of the user binding the volume, a conmon,
// or anyone else's process makes it false, and nothing is signalled). It
// reports whether it ended them; it waits until they are gone.
func endUserPause(hs []nsHolder, uid int, now func() time.Time) bool {
	if len(hs) == 0 || uid <= 0 {
		return false
	}
	var pids []int
	for _, h := range hs {
		for _, p := range h.pids {
			n, err := strconv.Atoi(p)
			if err != nil || !isPauseOf(p, uid) {
				return false
			}
			pids = append(pids, n)
		}
	}
	for _, p := range pids {
		// Looked at again just before: a pid is never another's process.
		if isPauseOf(strconv.Itoa(p), uid) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	deadline := now().Add(pauseExitWait)
	for _, p := range pids {
		// A process that exited has no namespaces left, a zombie too.
		for now().Before(deadline) {
			if _, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/mnt"); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return true
}

// pauseExitWait bounds the wait for an ended pause process to be gone.
const pauseExitWait = 5 * time.Second

// isPauseOf says whether process pid is podman's pause process and
// uid's (real and effective, proc(5) status).
func isPauseOf(pid string, uid int) bool {
	comm, err := os.ReadFile("/proc/" + pid + "/comm")
	if err != nil || strings.TrimSpace(string(comm)) != pauseComm {
		return false
	}
	st, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(st), "\n") {
		if f, ok := strings.CutPrefix(l, "Uid:"); ok {
			ids := strings.Fields(f)
			return len(ids) >= 2 && ids[0] == strconv.Itoa(uid) && ids[1] == strconv.Itoa(uid)
		}
	}
	return false
}
