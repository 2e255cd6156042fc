package e2e

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestOpenSSHAgentAndRemoteForwardOnDev: with `gpuaas dev` and the SSH
// config `gpuaas login` writes, `ssh -A` gives a bare-metal and a slice
// session the client's agent (a real ssh-agent) through a socket the
// session's own user owns, and `ssh -R` listens on the allocation's
// loopback and carries connections back to the client. Run as root, the
// sessions are unprivileged sim users.
func TestOpenSSHAgentAndRemoteForwardOnDev(t *testing.T) {
	sshtest.NeedOpenSSH(t, "ssh")
	dev, cfg := loggedInDev(t)
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	sock, comment := sshtest.StartAgent(t)
	echo := sshtest.ListenEcho(t)

	for _, sku := range []string{"h100-baremetal", "h200-slice"} {
		t.Run(sku, func(t *testing.T) {
			args := []string{"alloc", "create", "--sku", sku, "--wait", "--json", "id", "--jq", ".id"}
			if sku == "h200-slice" {
				args = append(args, "--gpus", "2")
			}
			r := dev.gpuaas(t, "", args...)
			id := strings.TrimSpace(r.stdout)
			if r.code != 0 || id == "" {
				t.Fatalf("create %s: exit %d %q\n%s", sku, r.code, r.stdout, r.stderr)
			}
			target := id + "@localhost"

			out, code := openssh(t, "ssh", "-F", sshConfig, "-A", "-o", "IdentityAgent="+sock, target,
				`id -u; stat -c '%a %u' "$SSH_AUTH_SOCK"; ssh-add -l`)
			lines := strings.Split(out, "\n")
			if code != 0 || len(lines) < 3 || lines[1] != "600 "+lines[0] || !strings.Contains(out, comment) {
				t.Fatalf("ssh -A: exit %d %q; want a socket of the session's uid (0600) and the agent's key", code, out)
			}
			if os.Geteuid() == 0 && lines[0] == "0" {
				t.Errorf("the session runs as root; want an unprivileged sim user")
			}

			port := freeLoopbackPort(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-F", sshConfig, "-N",
				"-R", "127.0.0.1:"+port+":"+echo, target)
			var errOut sshtest.Buffer
			cmd.Stdout, cmd.Stderr = &errOut, &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				_ = cmd.Wait()
				if t.Failed() {
					t.Logf("ssh -R:\n%s", errOut.String())
				}
			}()
			var c net.Conn
			testutil.EventuallyWithin(t, 30*time.Second, "ssh -R to listen on the allocation", func() bool {
				var err error
				c, err = net.Dial("tcp", "127.0.0.1:"+port)
				return err == nil
			})
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(c, "remote forward"); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len("remote forward"))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "remote forward" {
				t.Fatalf("through ssh -R: got %q, %v; want the echo", got, err)
			}
		})
	}
}

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}
