package sim

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestGuestAgentAndRemoteForward: a sim guest with system users, as a
// slice's VM: a session that asks for the client's agent gets
// SSH_AUTH_SOCK, a socket the guest user owns (0600 in a 0700 directory)
// through which ssh-add reaches the client's agent, removed when the
// session ends; a remote forward listens on the guest's loopback and
// carries connections back to the client until it is cancelled.
func TestGuestAgentAndRemoteForward(t *testing.T) {
	needSystemUsers(t)
	sshtest.NeedOpenSSH(t, "ssh-add")
	ctx := context.Background()
	root := searchableDir(t)
	users, err := NewSystemUsers(ctx, filepath.Join(root, "users"), filepath.Join(root, "homes"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = users.Close() })
	h, err := newHypervisor(filepath.Join(root, "hypervisor"), users, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	name := randomUser(t)
	key, line := guestKey(t)
	if err := h.Define(ctx, testSpec("a-vmfwd", seedDir(t, name, line))); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, "a-vmfwd"); err != nil {
		t.Fatal(err)
	}
	addr, err := h.Address(ctx, "a-vmfwd")
	if err != nil {
		t.Fatal(err)
	}
	dial := func() *gossh.Client {
		t.Helper()
		c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: name, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
			HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := dial()

	// The client's agent, holding one key.
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: sshtest.NewKey(t), Comment: "guest-agent-key"}); err != nil {
		t.Fatal(err)
	}
	if err := agent.ForwardToAgent(c, keyring); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.RequestAgentForwarding(s); err != nil {
		t.Fatal(err)
	}
	out, err := s.CombinedOutput(`echo "$SSH_AUTH_SOCK"; stat -c '%a %u' "$SSH_AUTH_SOCK" "$(dirname "$SSH_AUTH_SOCK")"; ssh-add -l`)
	s.Close()
	uid, _ := lookupIDs(t, name)
	lines := strings.Split(string(out), "\n")
	u := strconv.Itoa(int(uid))
	if err != nil || len(lines) < 4 || lines[1] != "600 "+u || lines[2] != "700 "+u || !strings.Contains(lines[3], "guest-agent-key") {
		t.Fatalf("agent session: %v %q; want the socket (600, in a 700 directory, uid %s) and the key listed", err, out, u)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Dir(lines[0])); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent socket %s still there after the session", lines[0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Without the request, no agent. (Once asked for, the agent is the
	// connection's, as with sshd: another connection.)
	s, err = dial().NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, _ = s.CombinedOutput(`echo "${SSH_AUTH_SOCK:-none}"`)
	s.Close()
	if string(out) != "none\n" {
		t.Errorf("session without agent request: got %q; want none", out)
	}

	// ssh -R: the guest listens on its loopback.
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("tcpip-forward: %v", err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(conn, conn); conn.Close() }()
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("through the remote forward: got %q, %v; want ping", buf, err)
	}
	conn.Close()
	if err := ln.Close(); err != nil {
		t.Fatalf("cancel-tcpip-forward: %v", err)
	}
	if conn, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Error("the cancelled forward still listens")
	}
	// A privileged port is refused.
	if ln, err := c.Listen("tcp", "127.0.0.1:80"); err == nil {
		ln.Close()
		t.Error("tcpip-forward to port 80: granted; want refused")
	}
}
