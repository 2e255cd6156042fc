package term_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// TestSFTPServerSessionRefusesWindowChange: a real account's sftp runs
// sftp-server without a terminal even when the client asked for one, and
// a later window-change is refused, as in a session without a PTY (as the
// terminal did before processes moved into the environment).
func TestSFTPServerSessionRefusesWindowChange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sim system users need root (useradd)")
	}
	if term.FindSFTPServer() == "" {
		t.Skip("no sftp-server installed")
	}
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	parent, err := os.MkdirTemp("/var/lib", "gpuaas-term-winch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(parent, "state")
	h, err := sim.NewHostWith(state, sim.H100Baremetal8(), "sim-winch", sim.Options{SystemUsers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	alloc := randomAlloc(t)
	if err := h.Users.Create(context.Background(), api.PosixUser(alloc), nil); err != nil {
		t.Fatal(err)
	}
	th := newHarnessIn(t, state, api.ShapeBaremetal, alloc, h.Users.Accounts())
	c := th.client()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	go gossh.DiscardRequests(reqs)
	ask := func(kind string, payload any) bool {
		t.Helper()
		ok, err := ch.SendRequest(kind, true, gossh.Marshal(payload))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return ok
	}
	if !ask("pty-req", sshwire.PtyRequestMsg{Term: "xterm", Columns: 80, Rows: 24}) {
		t.Fatal("pty-req refused")
	}
	if !ask("subsystem", sshwire.SubsystemMsg{Name: "sftp"}) {
		t.Fatal("subsystem sftp refused")
	}
	if ask("window-change", sshwire.WindowChangeMsg{Columns: 100, Rows: 30}) {
		t.Error("window-change on an sftp-server session: got true; want false (it has no terminal)")
	}
}
