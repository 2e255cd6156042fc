package host

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ending every process of an allocation's user (Users.KillProcesses),
// including those that left the session they were started in (setsid,
// nohup, a double fork): they are found by who they are, not by whose
// child they are.

// killDeadline bounds how long the SIGKILL rounds go on for processes
// that keep coming back (a fork loop).
const killDeadline = 10 * time.Second

// proc is one live process in /proc.
type proc struct {
	pid             int
	realUID, effUID int
	zombie          bool
}

// readProc reads /proc/<pid>/status; ok is false for a process gone
// meanwhile.
func readProc(pid int) (p proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return p, false
	}
	p.pid, p.realUID, p.effUID = pid, -1, -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		f := strings.Fields(v)
		switch {
		case k == "State" && len(f) > 0:
			// A zombie has ended; only its parent can make it go, and
			// one whose parent is a container's init may never.
			p.zombie = f[0] == "Z" || f[0] == "X"
		case k == "Uid" && len(f) >= 2:
			p.realUID, _ = strconv.Atoi(f[0])
			p.effUID, _ = strconv.Atoi(f[1])
		}
	}
	return p, true
}

// liveProcesses lists the processes (zombies left out) match accepts,
// never this process.
func liveProcesses(match func(p proc) bool) ([]int, error) {
	return processes(func(p proc) bool { return !p.zombie && match(p) })
}

// processes lists the processes match accepts, zombies included, never
// this process.
func processes(match func(p proc) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		if p, ok := readProc(pid); ok && match(p) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// processesOfUID lists the live processes running as uid (real or
// effective: a set-uid program the user started counts).
func processesOfUID(uid int) ([]int, error) {
	return liveProcesses(func(p proc) bool { return ofUID(p, uid) })
}

func ofUID(p proc, uid int) bool { return p.realUID == uid || p.effUID == uid }

// killUntilGone sends SIGKILL to what list finds, round after round, until
// a round finds nothing or killDeadline passes (ErrProcessesLeft). each,
// when not nil, runs once per round first: a way to reach processes
// forked between the listing and the kill.
func killUntilGone(ctx context.Context, what string, list func() ([]int, error), each func()) error {
	deadline := time.Now().Add(killDeadline)
	for {
		if each != nil {
			each()
		}
		pids, err := list()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kill processes of %s: %w: %v", what, ErrProcessesLeft, pids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// killAllAs sends SIGKILL to every process uid may signal, from a process
// running as uid: kill(2) with pid -1 is one pass of the kernel over the
// process table, so a process forking as fast as it can does not outrun
// it as it can a listing. /bin/sh's kill builtin makes the call (the
// caller is spared); it reads no startup file when not interactive.
func killAllAs(ctx context.Context, uid, gid int) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "kill -9 -1")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setsid: true}
	_ = cmd.Run() // exits 1 when nothing was left to kill
}

// KillProcessesUnder ends every process whose environment variable key
// names dir or a path below it (HOME and a sandbox home, say): SIGTERM,
// up to grace for them to go, then SIGKILL until none is left. It is how
// the sim's sandbox users, whose processes run as hostd's own user, are
// told apart: an environment is inherited through setsid, nohup and
// double forks (though a process may clear its own; sandbox users are
// not isolated from hostd in any case).
func KillProcessesUnder(ctx context.Context, key, dir string, grace time.Duration) error {
	dir = filepath.Clean(dir)
	exact, below := []byte(key+"="+dir), []byte(key+"="+dir+"/")
	list := func() ([]int, error) {
		return liveProcesses(func(p proc) bool {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
			if err != nil {
				return false
			}
			for _, kv := range bytes.Split(b, []byte{0}) {
				if bytes.Equal(kv, exact) || bytes.HasPrefix(kv, below) {
					return true
				}
			}
			return false
		})
	}
	pids, err := list()
	if err != nil || len(pids) == 0 {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	waitGone(ctx, list, grace)
	return killUntilGone(ctx, key+"="+dir, list, nil)
}

// waitGone polls list until it is empty or wait has passed.
func waitGone(ctx context.Context, list func() ([]int, error), wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if pids, err := list(); err != nil || len(pids) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
