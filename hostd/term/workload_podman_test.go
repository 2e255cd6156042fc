package term_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWorkloadSessionsRunInTheContainer: a ticket naming a workload
// (ssh <workload-id>@gateway, docs/apps.md) has every session of the
// connection run in that workload's container through the allocation
// user's own rootless podman: the image's files, container root mapped to
// the user's uid, the exit status, stdin and a terminal passed through;
// sftp is refused in words. A ticket of allocation A naming B's workload
// reaches nothing of B's (A's podman has no such container), and a ticket
// naming no workload is A's plain shell on the node.
func TestWorkloadSessionsRunInTheContainer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("rootless podman as sim system users needs root (useradd)")
	}
	for _, tool := range []string{"podman", "runc", "usermod", "useradd", "newuidmap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no busybox-static (the image's shell): %v", err)
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-term-wl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(parent, "state")
	h, err := sim.NewHostWith(state, sim.H100Baremetal8(), "sim-wl", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()

	const osRelease = "ID=appssh\n"
	extra := map[string]string{"etc/os-release": osRelease}
	for _, applet := range []string{"sh", "cat", "id"} {
		extra["bin/"+applet] = string(busybox)
	}
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/shell", extra)
	cache := &workload.Cache{Dir: filepath.Join(parent, "images")}
	entry, _, err := cache.Ensure(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	envs := h.Env("n-test", testutil.Logger(t)).Envs
	// start runs a workload as alloc's user, as workload.start does.
	start := func(alloc, id string) {
		t.Helper()
		name := api.PosixUser(alloc)
		if err := h.Users.Create(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		subids := workload.SubIDs{Runner: host.ExecRunner{}}
		if _, err := subids.Ensure(ctx, name); err != nil {
			t.Fatal(err)
		}
		e, err := envs.Open(ctx, hostenv.Alloc{ID: alloc, PosixUser: name, Shape: api.ShapeBaremetal})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pm := workload.Podman{Env: e}
			_ = pm.RemoveContainers(context.Background(), 0)
			_ = pm.ResetStorage(context.Background())
			_ = e.Close()
			_ = subids.Release(context.Background(), name)
		})
		p, err := workload.Open(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Start(ctx, workload.Spec{WorkloadID: id, AllocationID: alloc, Image: entry,
			Command: []string{workloadtest.App, "serve"}}); err != nil {
			t.Fatal(err)
		}
	}
	allocA, allocB := randomAlloc(t), randomAlloc(t)
	wlA, wlB := "w-"+strings.TrimPrefix(allocA, "a-"), "w-"+strings.TrimPrefix(allocB, "a-")
	start(allocA, wlA)
	start(allocB, wlB)
	renter, err := user.Lookup(api.PosixUser(allocA))
	if err != nil {
		t.Fatal(err)
	}

	th := newHarnessIn(t, state, api.ShapeBaremetal, allocA, h.Users.Accounts())
	dial := func(wl string) *gossh.Client {
		t.Helper()
		c, err := th.connect(th.user, th.ticket(func(tk *sshcert.Ticket) { tk.Workload = wl }))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// run runs cmd on c with stdin, with a terminal when pty.
	run := func(c *gossh.Client, cmd, stdin string, pty bool) (string, string, int) {
		t.Helper()
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out, errOut bytes.Buffer
		s.Stdout, s.Stderr, s.Stdin = &out, &errOut, strings.NewReader(stdin)
		if pty {
			if err := s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
				t.Fatal(err)
			}
		}
		err = s.Run(cmd)
		var ee *gossh.ExitError
		switch {
		case errors.As(err, &ee):
			return out.String(), errOut.String(), ee.ExitStatus()
		case err != nil:
			t.Fatalf("%q: %v", cmd, err)
		}
		return out.String(), errOut.String(), 0
	}

	c := dial(wlA)
	if out, errOut, code := run(c, "cat /etc/os-release", "", false); code != 0 || out != osRelease {
		// What follows assumes the sessions run in the container.
		t.Fatalf("os-release in the workload: exit %d %q %q; want the image's", code, out, errOut)
	}
	out, _, code := run(c, "id -u; cat /proc/self/uid_map", "", false)
	if f := strings.Fields(out); code != 0 || len(f) < 4 || f[0] != "0" || f[1] != "0" || f[2] != renter.Uid || f[3] != "1" {
		t.Errorf("id -u and uid_map: exit %d %q; want container root mapped to uid %s", code, out, renter.Uid)
	}
	if _, _, code := run(c, "exit 3", "", false); code != 3 {
		t.Errorf("exit 3: got %d", code)
	}
	if out, _, code := run(c, "cat", "stdin reaches the container\n", false); code != 0 || out != "stdin reaches the container\n" {
		t.Errorf("cat of stdin: exit %d %q", code, out)
	}
	if out, _, code := run(c, "test -t 0 && echo terminal $TERM", "", true); code != 0 || !strings.Contains(out, "terminal xterm") {
		t.Errorf("with a pty: exit %d %q; want a terminal in the container", code, out)
	}
	if out, code := sftpAttempt(t, c); code != 1 || !strings.Contains(out, "not supported") {
		t.Errorf("sftp into the workload: exit %d %q; want 1, saying it is not supported", code, out)
	}

	// A's ticket naming B's workload: A's podman knows no such container.
	out, errOut, code := run(dial(wlB), "cat /etc/os-release", "", false)
	if code == 0 || out != "" || !strings.Contains(errOut, "no such container") {
		t.Errorf("A into B's workload: exit %d %q %q; want podman's refusal", code, out, errOut)
	}
	// Without a workload: A's shell on the node, not in a container.
	if out, _, code := run(dial(""), "id -u; cat /etc/os-release", "", false); code != 0 || !strings.HasPrefix(out, renter.Uid+"\n") ||
		strings.Contains(out, osRelease) {
		t.Errorf("A's plain session: exit %d %q; want the node as uid %s", code, out, renter.Uid)
	}
	// A workload id that cannot name a container: no session at all.
	bad := dial("W/../x")
	if _, err := bad.NewSession(); err == nil {
		t.Error("a session opened for a ticket naming a malformed workload")
	}
}

// sftpAttempt asks for the sftp subsystem on c and returns what came on
// stderr and the exit status (-1 without one).
func sftpAttempt(t *testing.T, c *gossh.Client) (string, int) {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if ok, err := ch.SendRequest("subsystem", true, gossh.Marshal(sshwire.SubsystemMsg{Name: "sftp"})); err != nil || !ok {
		t.Fatalf("subsystem sftp: %v %v", ok, err)
	}
	stderr, _ := io.ReadAll(ch.Stderr())
	code := -1
	for req := range reqs {
		var m sshwire.ExitStatusMsg
		if req.Type == "exit-status" && gossh.Unmarshal(req.Payload, &m) == nil {
			code = int(m.Status)
		}
	}
	return string(stderr), code
}
