package sshtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartAgent runs a real ssh-agent holding one key made for the test, and
// returns its socket (for SSH_AUTH_SOCK) and the key's comment (what
// `ssh-add -l` lists it by). The agent is stopped at cleanup; a machine
// without ssh-agent, ssh-add or ssh-keygen skips the test.
func StartAgent(t testing.TB) (sock, comment string) {
	t.Helper()
	NeedOpenSSH(t, "ssh-agent", "ssh-add", "ssh-keygen")
	dir := t.TempDir()
	sock = filepath.Join(dir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Process.Kill()
		_ = agent.Wait()
	})
	for deadline := time.Now().Add(ReadUntilTimeout); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh-agent did not listen on %s", sock)
		}
		time.Sleep(10 * time.Millisecond)
	}
	comment = fmt.Sprintf("agent-key-%d", time.Now().UnixNano())
	key := filepath.Join(dir, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	return sock, comment
}
