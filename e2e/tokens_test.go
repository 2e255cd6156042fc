package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// withToken runs the CLI against p's config as a machine does: with
// GPUAAS_TOKEN set to secret.
func (p *devProc) withToken(t *testing.T, secret string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+p.configDir, "NO_COLOR=1", "GPUAAS_TOKEN="+secret)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return result{out.String(), errOut.String(), exit.ExitCode()}
	case err != nil:
		t.Fatalf("run gpuaas %v: %v", args, err)
	}
	return result{out.String(), errOut.String(), 0}
}

// TestTokensForMachines is tokens for machines (docs/tokens.md) as a CI
// pipeline uses them: a project owner creates a viewer and a member token;
// with GPUAAS_TOKEN the viewer lists allocations and cannot create one
// (exit 5), locally and over SSH command mode; the member creates one;
// a revoked token is refused by the next command (exit 4); bad input is
// refused with the reason.
func TestTokensForMachines(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("ssh is not installed (apt-get install openssh-client): %v", err)
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	run := func(stdin string, args ...string) result {
		t.Helper()
		r := dev.gpuaas(t, stdin, args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	run(devPassword, "login", "--password-stdin")
	run("", "ssh-config")

	viewer := run("", "token", "create", "ci-read", "--role", "viewer", "--ttl", "30d")
	secret := strings.TrimSpace(viewer.stdout)
	if _, ok := api.MachineTokenID(secret); !ok || !strings.HasPrefix(secret, api.TokenSecretPrefix) {
		t.Fatalf("token create printed %q; want only the secret (%s…)", viewer.stdout, api.TokenSecretPrefix)
	}
	if !strings.Contains(viewer.stderr, "shown this once") {
		t.Errorf("token create's stderr does not say the secret is shown once:\n%s", viewer.stderr)
	}
	member := strings.TrimSpace(run("", "token", "create", "ci-run", "--role", "member", "--ttl", "12h").stdout)

	if r := dev.withToken(t, secret, "alloc", "list"); r.code != 0 {
		t.Errorf("viewer token alloc list: exit %d\n%s", r.code, r.stderr)
	}
	if r := dev.withToken(t, secret, "alloc", "create", "--sku", "h200-slice", "--gpus", "1"); r.code != 5 {
		t.Errorf("viewer token alloc create: exit %d; want 5 (forbidden)\n%s", r.code, r.stderr)
	}
	r := dev.withToken(t, member, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--json", "id", "--jq", ".id")
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "a-") {
		t.Errorf("member token alloc create: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	if r := dev.withToken(t, member, "token", "create", "more", "--role", "viewer"); r.code != 5 {
		t.Errorf("a token creating a token: exit %d; want 5\n%s", r.code, r.stderr)
	}

	// Over SSH command mode: the user's certificate, the token's scope.
	ssh := func(secret string, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ssh", append([]string{"-F", filepath.Join(cfg, "ssh", "dev", "config"),
			"-o", "BatchMode=yes", "-o", "SendEnv=GPUAAS_TOKEN", "gpuaas-dev"}, args...)...)
		cmd.Env = append(os.Environ(), "GPUAAS_TOKEN="+secret)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatalf("ssh %v: %v", args, err)
		}
		return string(out), 0
	}
	if out, code := ssh(secret, "whoami", "--json", "token", "--jq", ".token.name"); code != 0 || strings.TrimSpace(out) != "ci-read" {
		t.Errorf("whoami over SSH with the token: exit %d %q; want ci-read", code, out)
	}
	if out, code := ssh(secret, "alloc", "list"); code != 0 {
		t.Errorf("viewer token alloc list over SSH: exit %d\n%s", code, out)
	}
	if out, code := ssh(secret, "alloc", "create", "--sku", "h200-slice", "--gpus", "1"); code != 5 {
		t.Errorf("viewer token alloc create over SSH: exit %d; want 5\n%s", code, out)
	}

	list := run("", "token", "list")
	for _, name := range []string{"ci-read", "ci-run"} {
		if !strings.Contains(list.stdout, name) {
			t.Errorf("token list lacks %s:\n%s", name, list.stdout)
		}
	}
	if strings.Contains(list.stdout, secret) || strings.Contains(list.stdout, member) {
		t.Errorf("token list shows a secret:\n%s", list.stdout)
	}

	run("", "token", "revoke", "ci-read")
	if r := dev.withToken(t, secret, "alloc", "list"); r.code != 4 {
		t.Errorf("revoked token alloc list: exit %d; want 4 (unauthenticated)\n%s", r.code, r.stderr)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "create", "x", "--ttl", "0d"}, "a token must live for some time"},
		{[]string{"token", "create", "x", "--ttl", "400d"}, "longer than the maximum"},
		{[]string{"token", "create", "x", "--role", "owner"}, `invalid --role "owner"`},
	} {
		if r := dev.gpuaas(t, "", bad.args...); r.code != 2 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("gpuaas %s: exit %d %q; want 2 and %q", strings.Join(bad.args, " "), r.code, r.stderr, bad.want)
		}
	}
}
