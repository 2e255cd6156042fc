package term_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSimTenantsPrivateTmp: on the sim run as root, a bare-metal
// session's /tmp, /var/tmp and /dev/shm are its allocation's own. What
// tenant A writes there, over exec or sftp, is not in the node's /tmp,
// and tenant B, whose session runs at the same time, does not see it; A's
// other sessions see its /tmp and /var/tmp. A's home, in a data directory
// below /tmp as `gpuaas dev` in a test keeps it, stays where it is.
func TestSimTenantsPrivateTmp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sim system users need root (useradd)")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("", "gpuaas-term-tenants-")
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
	ctx := context.Background()
	allocA, allocB := randomAlloc(t), randomAlloc(t)
	for _, a := range []string{allocA, allocB} {
		if err := h.Users.Create(ctx, api.PosixUser(a), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = h.Users.Delete(context.Background(), api.PosixUser(a)) })
	}
	a := newHarnessIn(t, state, api.ShapeBaremetal, allocA, h.Users.Accounts()).client()
	b := newHarnessIn(t, state, api.ShapeBaremetal, allocB, h.Users.Accounts()).client()
	run := func(c *gossh.Client, cmd string) string {
		t.Helper()
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.CombinedOutput(cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	secret := "secret-" + allocA

	// A's session writes and stays open while B looks.
	hold, err := a.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	stdin, _ := hold.StdinPipe()
	stdout, _ := hold.StdoutPipe()
	if err := hold.Start("umask 077; for d in /tmp /var/tmp /dev/shm; do echo a > $d/" + secret + "; done; pwd; echo ready; cat"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() && sc.Text() != "ready" {
		lines = append(lines, sc.Text())
	}
	if home := h.Users.Home(api.PosixUser(allocA)); len(lines) != 1 || lines[0] != home {
		t.Errorf("A's session started in %q; want its home %s", lines, home)
	}
	for _, d := range []string{"/tmp/", "/var/tmp/", "/dev/shm/"} {
		if _, err := os.Lstat(d + secret); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s%s is in the node's namespace: %v", d, secret, err)
		}
	}
	got := run(b, "for d in /tmp /var/tmp /dev/shm; do cat $d/"+secret+" 2>&1; done; ls -A /tmp /var/tmp /dev/shm")
	if slices.Contains(strings.Split(got, "\n"), "a") || strings.Count(got, "No such file or directory") != 3 {
		t.Errorf("B looking for A's files while A's session runs:\n%s", got)
	}
	// A's other sessions, exec and sftp, share its /tmp and /var/tmp
	// (/dev/shm is each session's own).
	if got := run(a, "cat /tmp/"+secret+" /var/tmp/"+secret+"; ls -A /dev/shm | wc -l"); got != "a\na\n0" {
		t.Errorf("A's second session: got %q; want a, a and an empty /dev/shm", got)
	}
	for _, c := range []struct {
		client *gossh.Client
		found  bool
	}{{a, true}, {b, false}} {
		s, err := sftp.NewClient(c.client)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Stat("/tmp/" + secret)
		if (err == nil) != c.found {
			t.Errorf("sftp stat /tmp/%s: %v; want found=%v", secret, err, c.found)
		}
		_ = s.Close()
	}
	// With a terminal too: the program has it as its controlling
	// terminal, in the same private /tmp.
	pty, err := a.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.RequestPty("xterm", 24, 80, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	out, err := pty.Output("tty; cat /tmp/" + secret)
	pty.Close()
	if lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(out), "\r", "")), "\n"); err != nil ||
		len(lines) != 2 || !strings.HasPrefix(lines[0], "/dev/pts/") || lines[1] != "a" {
		t.Errorf("PTY session: %q, %v; want its terminal and A's file", out, err)
	}
	_ = stdin.Close()
	_ = hold.Wait()
}
