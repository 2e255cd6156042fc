package e2e

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/sshkeys"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestLogoutEndsSSH is the SSH side of logout through the built binary and
// `gpuaas dev`: an OpenSSH session open with the login's certificate ends
// within seconds of `gpuaas logout`, with the reason on its terminal, and
// a copy of that certificate kept aside is refused afterwards; a new login
// gets in again.
func TestLogoutEndsSSH(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("ssh is not installed (apt-get install openssh-client): %v", err)
	}
	dev, cfg := loggedInDev(t)
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id", "--jq", ".id")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	paths := sshkeys.For(cfg, "dev")
	target := id + "@localhost"
	copied, err := os.ReadFile(paths.Cert)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shell := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-F", paths.Config, "-tt", target)
	stdin, err := shell.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	shell.Stdout, shell.Stderr = &out, &out
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- shell.Wait() }()
	if _, err := io.WriteString(stdin, "echo open-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, time.Minute, "the shell to answer", func() bool { return strings.Contains(out.String(), "open-42") })

	start := time.Now()
	if r := dev.gpuaas(t, "", "logout"); r.code != 0 {
		t.Fatalf("logout: exit %d %s", r.code, r.stderr)
	}
	select {
	case err := <-done:
		t.Logf("ssh ended %s after `gpuaas logout` started (the command included)", time.Since(start).Round(time.Millisecond))
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 255 || !strings.Contains(out.String(), "your login was ended") {
			t.Fatalf("ssh: got %v, output %q; want exit 255 with the reason", err, out.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the shell was still open 5s after logout; output %q", out.String())
	}
	_ = stdin.Close()

	// The copy of the certificate, put back where logout removed it.
	if err := os.WriteFile(paths.Cert, copied, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := openssh(t, "ssh", "-F", paths.Config, target, "echo in"); code != 255 || !strings.Contains(out, "this login was ended") {
		t.Fatalf("the logged-out certificate: exit %d, %q; want refused", code, out)
	}
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login again: exit %d %s", r.code, r.stderr)
	}
	if out, code := openssh(t, "ssh", "-F", paths.Config, target, "echo in"); code != 0 || strings.TrimSpace(out) != "in" {
		t.Fatalf("after logging in again: exit %d, %q; want in", code, out)
	}
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
