package term_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// systemUserHarness is the terminal of a bare-metal sim host with system
// users (`gpuaas dev` as root): the allocation's session runs as an
// unprivileged account of its own.
func systemUserHarness(t *testing.T) (*harness, *sim.Host, *user.User) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sim system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("", "gpuaas-term-sim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(parent, "state")
	h, err := sim.NewHostWith(state, sim.H100Baremetal8(), "sim-metal", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	alloc := randomAlloc(t)
	if err := h.Users.Create(context.Background(), api.PosixUser(alloc), nil); err != nil {
		t.Fatal(err)
	}
	th := newHarnessIn(t, state, api.ShapeBaremetal, alloc, h.Users.Accounts())
	u, err := user.Lookup(th.user)
	if err != nil {
		t.Fatal(err)
	}
	if u.Uid == "0" {
		t.Fatal("the session would run as root")
	}
	return th, h, u
}

// TestSSHAgentSocketIsTheAllocationUsers: with `ssh -A` (real OpenSSH and
// ssh-agent) a session running as the allocation's unprivileged account
// gets SSH_AUTH_SOCK, a socket that account owns (0600, in a 0700
// directory of its own) and can use; it is removed when the session ends.
func TestSSHAgentSocketIsTheAllocationUsers(t *testing.T) {
	th, _, u := systemUserHarness(t)
	sock, comment := sshtest.StartAgent(t)
	o := newOpenSSH(t, th)
	args := append([]string{"-A", "-o", "IdentityAgent=" + sock}, o.args(t, "-p")...)
	out, code := o.run(t, nil, "ssh", append(args, th.user+"@127.0.0.1",
		`echo "$SSH_AUTH_SOCK"; stat -c '%a %u' "$SSH_AUTH_SOCK" "$(dirname "$SSH_AUTH_SOCK")"; ssh-add -l`)...)
	lines := strings.Split(out, "\n")
	if code != 0 || len(lines) < 4 || !strings.Contains(out, comment) {
		t.Fatalf("ssh -A: exit %d %q; want the socket and the agent's key %s", code, out, comment)
	}
	if want := []string{"600 " + u.Uid, "700 " + u.Uid}; lines[1] != want[0] || lines[2] != want[1] {
		t.Errorf("socket and directory: got %q; want %q", lines[1:3], want)
	}
	testutil.Eventually(t, "the agent socket removed after the session", func() bool {
		_, err := os.Stat(filepath.Dir(lines[0]))
		return os.IsNotExist(err)
	})
}

// TestReleaseEndsEscapedProcessesOfTheUser: deprovisioning (what `alloc
// release` runs on a bare-metal node) ends every process of the account,
// also those that left the session (nohup, setsid, a loop that ignores
// SIGTERM and SIGHUP and keeps forking), before the account is removed.
func TestReleaseEndsEscapedProcessesOfTheUser(t *testing.T) {
	th, h, u := systemUserHarness(t)
	c := th.client()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.CombinedOutput(`nohup sleep 600 >/dev/null 2>&1 </dev/null & echo $!
setsid sh -c 'trap "" TERM HUP; while :; do sleep 1; done' >/dev/null 2>&1 </dev/null & echo $!`)
	s.Close()
	if err != nil {
		t.Fatalf("start the background jobs: %v %s", err, out)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("got %q; want pids", out)
		}
		pids = append(pids, pid)
	}
	uid, _ := strconv.Atoi(u.Uid)
	if len(pids) != 2 || len(processesOf(uid)) < 2 {
		t.Fatalf("got %q and processes %v; want two jobs of uid %d running", out, processesOf(uid), uid)
	}
	ctx := context.Background()
	if err := h.Users.KillProcesses(ctx, th.user); err != nil {
		t.Fatalf("KillProcesses: %v", err)
	}
	if left := processesOf(uid); len(left) > 0 {
		t.Errorf("processes of uid %d left: %v", uid, left)
	}
	if _, err := h.Users.Delete(ctx, th.user); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

// processesOf lists the live processes (zombies aside) whose real uid is
// uid.
func processesOf(uid int) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var state, real string
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			if f := strings.Fields(v); len(f) > 0 {
				switch k {
				case "State":
					state = f[0]
				case "Uid":
					real = f[0]
				}
			}
		}
		if real == strconv.Itoa(uid) && state != "Z" && state != "X" {
			out = append(out, e.Name())
		}
	}
	return out
}
