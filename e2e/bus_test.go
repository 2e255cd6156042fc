package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// devServerURL is the NATS URL the dev banner shows.
func (p *devProc) serverURL(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s+server\s+(nats://\S+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no server in the dev banner:\n%s", p.stderr.String())
	}
	return m[1]
}

// natscli runs the NATS project's own client for at most d.
func natscli(t *testing.T, d time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.NATSCLI(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no natscli context of the machine's
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestDevBusIsClosed: against `gpuaas dev`, natscli with no credentials
// cannot connect (`nats sub '>'` sees nothing); an operator key made with
// `gpuaas ops nats-identity add` monitors the server read-only, as the
// dev banner says, and cannot read the app's subjects.
func TestDevBusIsClosed(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	url := dev.serverURL(t)

	out, err := natscli(t, 20*time.Second, "--server", url, "sub", ">", "--count", "1")
	if err == nil || !strings.Contains(strings.ToLower(out), "authorization violation") {
		t.Fatalf("nats sub '>' without credentials: %v\n%s\nwant an authorization violation", err, out)
	}

	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	key := filepath.Join(t.TempDir(), "ops.nk")
	if r := dev.gpuaas(t, "", "ops", "nats-identity", "add", "--kind", "operator", "--name", "e2e", "--out", key); r.code != 0 {
		t.Fatalf("nats-identity add exited %d: %s", r.code, r.stderr)
	}
	out, err = natscli(t, 30*time.Second, "--server", url, "--nkey", key, "server", "list")
	if err != nil || !strings.Contains(out, "gpuaas-embedded") {
		t.Fatalf("nats server list with the operator key: %v\n%s\nwant the dev server listed", err, out)
	}
	out, _ = natscli(t, 10*time.Second, "--server", url, "--nkey", key, "sub", "gpuaas.>", "--count", "1")
	if !strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Fatalf("nats sub gpuaas.> with the operator key:\n%s\nwant a permissions violation", out)
	}
}
