package sshconfig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUserConfigPathIsOpenSSHs is the regression test of "`ssh-config
// --write` writes $HOME/.ssh/config when OpenSSH will read another":
// OpenSSH reads ~/.ssh/config from the home the password database gives
// (getpwuid), so with $HOME pointing elsewhere (sudo, a script) --write
// edits that file, as getent(1) tells it, not $HOME's.
func TestUserConfigPathIsOpenSSHs(t *testing.T) {
	out, err := exec.Command("getent", "passwd", strconv.Itoa(os.Getuid())).Output()
	if err != nil {
		t.Fatalf("getent passwd: %v", err)
	}
	fields := strings.Split(strings.TrimSpace(string(out)), ":")
	if len(fields) < 6 || fields[5] == "" {
		t.Fatalf("getent passwd: %q", out)
	}
	t.Setenv("HOME", t.TempDir())
	t.Setenv(UserConfigEnv, "")
	got, err := UserConfigPath()
	if want := filepath.Join(fields[5], ".ssh", "config"); err != nil || got != want {
		t.Fatalf("UserConfigPath with HOME=%s: %q, %v; want OpenSSH's %q", os.Getenv("HOME"), got, err, want)
	}
}

// TestUserConfigEnvOverrides: GPUAAS_SSH_USER_CONFIG names the file for
// someone who runs ssh -F FILE (the operator guide's test, which must not
// edit the machine's ~/.ssh/config); a relative path is refused.
func TestUserConfigEnvOverrides(t *testing.T) {
	want := filepath.Join(t.TempDir(), "ssh_config")
	t.Setenv(UserConfigEnv, want)
	if got, err := UserConfigPath(); err != nil || got != want {
		t.Fatalf("UserConfigPath with %s=%s: %q, %v; want that file", UserConfigEnv, want, got, err)
	}
	t.Setenv(UserConfigEnv, "ssh_config")
	if got, err := UserConfigPath(); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("relative %s: %q, %v; want it refused", UserConfigEnv, got, err)
	}
}
