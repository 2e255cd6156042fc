package sshgate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	clitui "github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestTUIOverSSH: `ssh -t gpuaas@gateway` with no command gets the
// dashboard on its PTY, sized from the PTY request and resized by
// window-change, showing the user's allocations and their changes, and
// `q` ends the session cleanly (exit 0, the alternate screen left). The
// client answers no terminal query: a query would hang the first frame.
func TestTUIOverSSH(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.Commands = cmdutil.SSHCommands(sshTree)
		c.TUI = cmdutil.SSHDashboard(clitui.ServeSSH)
	}})
	u := e.newUser()
	id := e.addAlloc(u)

	s, err := e.dial(u, CommandUser).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out sshtest.Buffer
	s.Stdout, s.Stderr = &out, &out
	stdin, err := s.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("xterm-256color", 30, 90, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the first frame, with the allocation", func() bool {
		return strings.Contains(out.String(), id) && strings.Contains(out.String(), "active")
	})
	// The balance of the user's default project (it was "—": over SSH no
	// project went with the request).
	testutil.Eventually(t, "the balance in the status bar", func() bool { return strings.Contains(out.String(), "balance $") })
	if strings.Contains(out.String(), "NODE") {
		t.Fatal("the node column shows at 90 columns; the PTY request's size was not used")
	}
	// Colour from TERM alone: xterm-256color gets 256-colour sequences.
	if !strings.Contains(out.String(), "38;5;") {
		t.Errorf("no 256-colour sequence in the output for TERM=xterm-256color")
	}

	if err := s.WindowChange(40, 120); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a frame at the new width (node column)", func() bool { return strings.Contains(out.String(), "NODE") })

	// A change made elsewhere reaches the screen (event, or the refresh).
	if _, err := u.client.AllocRelease(context.Background(), api.AllocReleaseRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the allocation shown releasing", func() bool { return strings.Contains(out.String(), "releasing") })

	if _, err := stdin.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err := <-done:
		var exitErr *gossh.ExitError
		if errors.As(err, &exitErr) || err != nil {
			t.Fatalf("session ended with %v; want exit status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("q did not end the session within 20s")
	}
	if !strings.Contains(out.String(), "\x1b[?1049l") {
		t.Error("the dashboard did not leave the alternate screen")
	}
}

// TestNoPTYStillGetsHelp: without a PTY, no command still prints the
// command help, not the dashboard.
func TestNoPTYStillGetsHelp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.Commands = cmdutil.SSHCommands(sshTree)
		c.TUI = cmdutil.SSHDashboard(clitui.ServeSSH)
	}})
	u := e.newUser()
	s, err := e.dial(u, CommandUser).NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out sshtest.Buffer
	s.Stdout = &out
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); err != nil {
		t.Fatalf("session: %v", err)
	}
	if !strings.Contains(out.String(), "Signed in as "+u.id) || strings.Contains(out.String(), "\x1b[?1049h") {
		t.Fatalf("got %q; want the command help and no dashboard", out.String())
	}
}
