package sshgate

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestSessionBannerOnPtyShellOnly is the login banner (docs/budgets.md): an
// interactive (pty) shell through the gateway shows one line on stderr
// before the shell — the allocation's cost so far and burn, the runway of
// the project's balance and of its budget — and exec sessions, with or
// without a pty, never get it in their output.
func TestSessionBannerOnPtyShellOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres, controld and two sim hosts")
	}
	s := startRealStack(t, nil)
	ctx := context.Background()
	if _, err := s.admin.BillingBudgetSet(ctx, api.BudgetSetRequest{Period: api.BudgetDay, AmountMinor: 100_00}); err != nil {
		t.Fatal(err)
	}
	owner := s.login(s.admin, s.env.Admin.ID)
	metal := s.createAlloc(s.admin, "h100-baremetal", 8)
	c := s.dial(owner, metal.ID)

	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm", 30, 100, nil); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr sshtest.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	stdin, err := sess.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Shell(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, "exit\n"); err != nil {
		t.Fatal(err)
	}
	_ = sess.Wait()
	want := "gpuaas: " + metal.ID + " has cost $"
	if got := stderr.String(); !strings.Contains(got, want) || !strings.Contains(got, "at $17.60/h") ||
		!strings.Contains(got, "lasts") || !strings.Contains(got, "day budget: ") || strings.Count(got, "gpuaas: ") != 1 {
		t.Fatalf("pty shell stderr %q; want one banner line with cost, burn, balance and budget runway", got)
	}
	if strings.Contains(stdout.String(), "has cost") {
		t.Errorf("the banner went to stdout: %q", stdout.String())
	}

	// exec: no banner, on either stream.
	out, errOut, status, err := sshtest.Run(t, c, "echo hi")
	if err != nil || status != 0 || out != "hi\n" || strings.Contains(errOut, "has cost") {
		t.Fatalf("exec: got %q, %q, %d, %v; want hi and no banner", out, errOut, status, err)
	}
	// exec with a pty (ssh -t host cmd): no banner either.
	sess, err = c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm", 30, 100, nil); err != nil {
		t.Fatal(err)
	}
	var ptyOut, ptyErr sshtest.Buffer
	sess.Stdout, sess.Stderr = &ptyOut, &ptyErr
	if err := sess.Run("echo hi"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ptyOut.String()+ptyErr.String(), "has cost") {
		t.Fatalf("pty exec got the banner: %q / %q", ptyOut.String(), ptyErr.String())
	}
}
